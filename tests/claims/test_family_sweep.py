"""C13's exhaustive geometry sweep (`properties.geometry_sweep` on `impl.compiled`,
`properties.family_geometry`): the machinery on tiny fake functions (a planted disagreement is the counterexample),
and one family swept for real on vLLM 0.34.0."""

from __future__ import annotations

import os

import numpy as np
import pytest

from deferlab.impl import compiled as gc
from deferlab.properties import geometry_sweep as gs
from deferlab.reference.system import extras

PLANTED = (37, 11)  # (width, height) where the fake engine function disagrees with its oracle


def fake_engine(height, width, a0, a1, a2):  # noqa: ANN001, ANN201 - compiled by numba as the engines' are
    """A geometry-like function: refuses a ratio over a0, else (height, width) snapped to a multiple of a1."""
    if max(height, width) / min(height, width) > a0:
        raise ValueError("ratio")
    h = max(a1, round(height / a1) * a1)
    w = max(a1, round(width / a1) * a1)
    if width == 37 and height == 11:
        w += a2  # the planted disagreement
    return h, w


def fake_oracle(ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
    """The vectorized rule without the plant: (width, height), `REFUSED` past the ratio."""
    w, h = np.broadcast_arrays(np.asarray(ws, np.int64), np.asarray(hs, np.int64))
    refused = np.maximum(w, h) / np.minimum(w, h) > 8
    out = np.stack([np.maximum(4, np.rint(w / 4) * 4), np.maximum(4, np.rint(h / 4) * 4)]).astype(np.int64)
    return np.where(refused, gc.REFUSED, out)


CALL = gc.Call("f(h, w, a0, a1, a2)", ("r[1]", "r[0]"))
ARGS = (8, 4, 1)


def test_sweep_grid_finds_the_planted_size_first() -> None:
    """The chunked sweep, engine and oracle both NumPy: the planted size is the first (and only) difference,
    whichever chunk it falls in."""
    scalar = gc.interpreted(fake_engine, CALL, ARGS)

    def engine(ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
        ww, hh = np.broadcast_arrays(ws, hs)
        return gc.evaluate(scalar, ww.ravel(), hh.ravel()).reshape(2, *ww.shape)

    for rows in (1, 5, 64):
        tally = gc.sweep_grids([engine], fake_oracle, 64, chunk_rows=rows)[0]
        assert (tally.found[0][:2], tally.count) == (PLANTED, 1)
        assert tally.found == [(*PLANTED, [37, 12], [36, 12])]


def test_sweep_agrees_without_the_plant() -> None:
    scalar = gc.interpreted(fake_engine, CALL, (8, 4, 0))
    tally = gc.Tally()
    ws, hs = gc.check_sizes((4,), 64, n_random=200)
    tally.add(ws, hs, gc.evaluate(scalar, ws, hs), fake_oracle(ws, hs))
    assert tally.found == [] and tally.count == 0


@pytest.mark.extra("vllm")
def test_compiled_sweep_finds_the_planted_size() -> None:
    """numba compiles the fake function, agrees with it interpreted, and the exhaustive sweep names the plant."""
    found = gs.sweep_function(fake_engine, CALL, ARGS, "fake_engine", fake_oracle, steps=(4,), max_side=64)
    assert found.route == "compiled", found.note
    assert (found.sizes, found.first, found.mismatches) == (64 * 64, PLANTED, 1)
    assert "compiled with numba" in found.evidence("fake_oracle", ("width", "height"))
    assert "first 37x11" in found.evidence("fake_oracle", ("width", "height"))


class _Opaque:
    """A plain Python object: numba cannot type it as a global, so a function reading it does not compile."""

    scale = 1


OPAQUE = _Opaque()


def not_compilable(height, width, a0, a1, a2):  # noqa: ANN001, ANN201
    """Reads `OPAQUE`: the sweep falls back to the interpreted function."""
    return fake_engine(height * OPAQUE.scale, width, a0, a1, a2)


@pytest.mark.extra("vllm")
def test_uncompilable_function_is_swept_interpreted_on_a_reduced_set() -> None:
    found = gs.sweep_function(not_compilable, CALL, ARGS, "not_compilable", fake_oracle, steps=(4,), max_side=64)
    assert found.route == "interpreted-reduced"
    assert "numba cannot compile" in found.note
    assert found.first == PLANTED  # every size up to 48 x 48 is in the reduced set
    assert "interpreted, on a reduced set" in found.evidence("fake_oracle", ("width", "height"))


def test_without_numba_the_sweep_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc, "numba_missing", lambda: "needs numba (the deferlab[vllm] extra)")
    found = gs.sweep_function(fake_engine, CALL, ARGS, "fake_engine", fake_oracle, steps=(4,), max_side=64)
    assert found.route == "skipped" and found.sizes == 0
    assert found.evidence("o", ("width",)).startswith("exhaustive sweep skipped: the compiled sweep needs numba")


@pytest.mark.slow
@pytest.mark.own_process  # vLLM's pinned transformers (tests/conftest.py)
@pytest.mark.extra("vllm")
@pytest.mark.extra("transformers")
@pytest.mark.skipif(os.environ.get("DEFERLAB_VLLM", "0.34.0") != "0.34.0", reason="vLLM 0.34.0's function")
def test_exhaustive_sweep_of_vllm_qwen3_vl() -> None:
    """vLLM 0.34.0's Qwen3-VL ``image_smart_resize``, compiled, over every size up to 4096 x 4096: all agree with
    `reference.oracle.qwen.resize_targets`, and the function is the path's own geometry on the spot sizes."""
    from deferlab.properties import families as fam
    from deferlab.properties import family_geometry, served
    from deferlab.properties.engines import load_or_skip

    missing = extras.why_missing("vllm")
    if missing:
        pytest.skip(missing)
    session = load_or_skip(lambda spec: served.vllm_session(spec, ["qwen3-vl"]), "0.34.0", "vllm")
    paths = session.family_paths("qwen3-vl")
    assert paths, "vLLM 0.34.0 serves Qwen3-VL"
    result = family_geometry.exhaustive("vllm", paths, fam.config("qwen3-vl"))
    sweep = result.sweep
    assert sweep.route == "compiled", sweep.note
    assert sweep.sizes == 4096 * 4096
    assert sweep.first is None and sweep.mismatches == 0, result.evidence()
    assert result.spot == []
    assert "image_smart_resize" in sweep.function
    print(f"\n[sweep] {result.evidence()}")
