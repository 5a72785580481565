"""What the reference tests of the smart_resize families share (ERNIE-4.5-VL, PaddleOCR-VL, GLM-4.1V, MiniCPM-V
4.6: `reference.oracle.ernie45_vl`, `paddleocr`, `glm4v`, `minicpm_v`).

Why a module: the four oracles keep one front door (a scalar form that checks each side and its own config type,
a vectorized form over integer arrays of sides in 1..), refuse a ratio over 200 alike in both forms (where they
refuse at all), and ERNIE's and PaddleOCR's are swept over the same sizes against the same transformers function.
One check per rule, called by each file with its own oracle, cases and messages, keeps the four files checking the
same thing the same way: a check strengthened here is strengthened for every family.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from deferlab.reference.system.errors import InputTypeError, InputValueError

Scalar = Callable[[int, int, Any], Any]
Vectorized = Callable[[Any, Any, Any], Any]


def refused_in_both_forms(oracle: ModuleType, hw: tuple[int, int], cfg: Any, match: str) -> None:
    """``hw`` refused by ``resize_target`` in one line matching ``match``, and 0 x 0 from ``resize_targets``."""
    with pytest.raises(InputValueError, match=match) as info:
        oracle.resize_target(*hw, cfg)
    assert "\n" not in str(info.value)
    h, w = oracle.resize_targets(np.array([hw[0]]), np.array([hw[1]]), cfg)
    assert (h.tolist(), w.tolist()) == ([0], [0])


def front_door_refusals(scalar: Scalar, vectorized: Vectorized, cfg: Any, wrong: Any, what: str) -> None:
    """A config of the wrong type (``wrong``, refused matching ``what``) in both forms; a side under 1 in the scalar
    form; a float array and a side out of 1.. (each array) in the vectorized form."""
    with pytest.raises(InputTypeError, match=what):
        scalar(10, 10, wrong)
    with pytest.raises(InputTypeError, match=what):
        vectorized(np.array([1]), np.array([1]), wrong)
    with pytest.raises(InputValueError, match="height must be"):
        scalar(0, 5, cfg)
    with pytest.raises(InputValueError, match="width must be"):
        scalar(5, 0, cfg)
    with pytest.raises(InputTypeError, match="heights must be an integer array"):
        vectorized(np.array([1.5]), np.array([2]), cfg)
    with pytest.raises(InputValueError, match="heights must all be in 1.."):
        vectorized(np.array([0]), np.array([1]), cfg)
    with pytest.raises(InputValueError, match="widths must all be in 1.."):
        vectorized(np.array([1]), np.array([0]), cfg)


def resize_rules(
    oracle: ModuleType,
    cfg: Any,
    *,
    targets: list[tuple[Any, tuple[int, int], tuple[int, int]]],
    grid: tuple[tuple[int, int], tuple[int, int, int], int],
    refused: list[tuple[int, int]],
    refusals: tuple[str, Any, str],
    sweep: dict[str, Any] | None = None,
) -> type:
    """The test class of the rules every smart_resize family keeps (``oracle``'s ``resize_target``,
    ``resize_targets``, ``grid`` and ``num_tokens``), on the family's own cases: ``targets`` rows of (config,
    (h, w), resize target) by hand; ``grid`` ((h, w), grid row, tokens) under ``cfg``; ``refused`` the sizes whose
    side ratio is over 200; ``refusals`` (the match of that refusal, a config of the wrong type, the match of its
    refusal); ``sweep`` the configs (by id) under which `vectorized_equals_scalar` runs, none where the scalar
    form is the vectorized one. A family's file binds the class to a ``Test...`` name, where pytest collects it."""
    ratio_match, wrong, what = refusals

    class ResizeRules:
        @pytest.mark.parametrize(("cfg", "hw", "expected"), targets)
        def test_resize_target_by_hand(self, cfg: Any, hw: tuple[int, int], expected: tuple[int, int]) -> None:
            assert oracle.resize_target(*hw, cfg) == expected

        def test_grid_and_tokens_by_hand(self) -> None:
            assert oracle.grid(*grid[0], cfg) == grid[1]
            assert oracle.num_tokens(*grid[0], cfg) == grid[2]

        @pytest.mark.parametrize("hw", refused)
        def test_a_ratio_over_200_is_refused(self, hw: tuple[int, int]) -> None:
            refused_in_both_forms(oracle, hw, cfg, ratio_match)

        def test_front_door_refusals(self) -> None:
            front_door_refusals(oracle.resize_target, oracle.resize_targets, cfg, wrong, what)

        @pytest.mark.parametrize("cfg", list((sweep or {}).values()), ids=list(sweep or {}))
        def test_vectorized_equals_scalar(self, cfg: Any) -> None:
            vectorized_equals_scalar(oracle, cfg)

    if not sweep:
        del ResizeRules.test_vectorized_equals_scalar
    return ResizeRules


def sizes(seed: int = 5, factor: int = 28) -> list[tuple[int, int]]:
    """Every size to 120 x 120, every 1 x n and n x 1 to 4096, factor multiples +-1, and 5000 drawn sizes."""
    rng = np.random.default_rng(seed)
    found = [(h, w) for h in range(1, 121) for w in range(1, 121)]
    found += [(1, n) for n in range(1, 4097)] + [(n, 1) for n in range(1, 4097)]
    steps = [(k, j, d, e) for k in range(1, 147, 5) for j in (1, 13, 146) for d in (-1, 0, 1) for e in (-1, 0, 1)]
    found += [(k * factor + d, j * factor + e) for k, j, d, e in steps]
    return found + [tuple(map(int, s)) for s in rng.integers(1, 4097, (5000, 2))]


def size_arrays(step: int, seed: int, picked: int, drawn: int, *, small: bool, squares: bool) -> tuple[np.ndarray, ...]:
    """(heights, widths): every 1 x n and n x 1 to 4096; ``picked`` pairs of multiples of ``step`` +-1 drawn against
    each other; ``drawn`` sizes in 1..4096; with ``small`` every size to 120 x 120, with ``squares`` every n x n."""
    line = np.arange(1, 4097)
    hs, ws = [line, np.ones_like(line)], [np.ones_like(line), line]
    if small:
        hs, ws = [np.repeat(line[:120], 120), *hs], [np.tile(line[:120], 120), *ws]
    if squares:
        hs, ws = [*hs, line], [*ws, line]
    edge = np.unique(np.concatenate([np.arange(step, 4097, step) + d for d in (-1, 0, 1)]))
    rng = np.random.default_rng(seed)
    pairs = rng.choice(edge[(edge >= 1) & (edge <= 4096)], (picked, 2))
    hs += [pairs[:, 0], rng.integers(1, 4097, drawn)]
    ws += [pairs[:, 1], rng.integers(1, 4097, drawn)]
    return np.concatenate(hs), np.concatenate(ws)


def scalar_or_zero(oracle: ModuleType, h: int, w: int, cfg: Any) -> tuple[int, int]:
    """``resize_target``, or (0, 0) where it refuses the size (what ``resize_targets`` returns there)."""
    try:
        return oracle.resize_target(h, w, cfg)
    except InputValueError:
        return 0, 0


def vectorized_equals_scalar(oracle: ModuleType, cfg: Any) -> None:
    """``resize_targets`` over `sizes` equals ``resize_target`` size by size (0 x 0 where refused)."""
    found = sizes()
    h, w = (np.array(v) for v in zip(*found, strict=True))
    vh, vw = oracle.resize_targets(h, w, cfg)
    assert [scalar_or_zero(oracle, a, b, cfg) for a, b in found] == list(zip(vh.tolist(), vw.tolist(), strict=True))


def smart_resize_equals(oracle: ModuleType, theirs: ModuleType, processor: Any, published: Any, tight: Any) -> None:
    """transformers' ``smart_resize`` (module ``theirs``) equals the oracle on `sizes` (seed 6) under both configs,
    a ``ValueError`` where the oracle refuses; ``processor``'s patch count is 4 x the oracle's tokens (seed 7)."""
    for cfg in (published, tight):
        for h, w in sizes(seed=6):
            try:
                found = theirs.smart_resize(h, w, cfg.factor, min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)
            except ValueError:
                found = (0, 0)
            assert scalar_or_zero(oracle, h, w, cfg) == found, (h, w)
    for h, w in sizes(seed=7)[::97]:
        if scalar_or_zero(oracle, h, w, published) != (0, 0):
            assert oracle.num_tokens(h, w, published) * 4 == processor.get_number_of_image_patches(h, w), (h, w)
