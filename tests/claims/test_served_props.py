"""The served-vs-trained harness (`properties.served`) itself: it reads the checkpoint exactly, and it can fail.

Why: C13-C15 are only as good as the checks behind them. On the checkpoint
oracle served as a path (`served.CheckpointPath`) every check must pass and
§16.5's level recovery must return the checkpoint's own levels bit for bit;
on paths one deliberate step away from it the checks must find the step, and
only where the §16.2 rule says it is unexplained (a level off is allowed, two
are not; a normalization one ulp off fails C15, not C14).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.properties import claimcheck, served
from deferlab.properties import strategies as s
from deferlab.properties.strategies import served as ss
from deferlab.reference.oracle import checkpoint, skew
from deferlab.reference.system.profiles import profile
from tests.worked import worked_k3

WORKED_K3 = worked_k3()  # semantics §3.2's worked table, Kimi-K3: (w, h) -> (new_w, new_h, pad_w, pad_h, grid, tokens)
TRUTH = served.CheckpointPath()
MODEL = served.Session()  # deferlab's model (its paths are built once, on first use)


@pytest.mark.parametrize("size", list(WORKED_K3))
def test_the_checkpoint_gives_the_worked_geometry(size: tuple[int, int]) -> None:
    """The oracle C13 compares against reproduces semantics §3.2's worked Kimi-K3 table."""
    rc = checkpoint.resize_config(*size, profile("kimi-k3"))
    got = (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height, tuple(rc.grid_thw), rc.num_tokens)
    assert got == WORKED_K3[size]


@given(size=s.image_sizes(max_side=16384), cfg=s.preprocess_configs())
@example(size=(4000, 3000), cfg=profile("kimi-k2.5"))
def test_model_geometry_agrees_with_the_checkpoint_on_drawn_configs(size: tuple[int, int], cfg: Any) -> None:
    """The model's NaViT (every path, any config, fixed tokens included) decides as the checkpoint does."""
    for path in MODEL.paths("RELEASED") + [TRUTH]:
        assert served.geometry_problem(path, *size, cfg) is None


@given(case=ss.served_cases())
@example(case=ss.ServedCase.make("PA", 7, 5, seed=1, geometry=(2, 2, 3, 2)))
def test_level_recovery_is_exact_on_the_checkpoint(case: ss.ServedCase) -> None:
    """§16.5 on the checkpoint's own output: the recovered levels are `checkpoint.levels`, every value is the
    checkpoint's normalization of its level (0 ulps), and the check passes."""
    cfg = case.config(served.session_config())
    trained = served.Trained.of(case.image, cfg)
    levels = served.recover_levels(trained.values, served.level_table(TRUTH, cfg))
    assert np.array_equal(levels, trained.levels)
    channel = np.arange(3).reshape(1, 3, 1, 1)
    assert not skew.ulp_distance(trained.values, trained.table[channel, levels]).any()
    assert served.pixel_problem(TRUTH, case.image, cfg, trained) is None


@given(stats=s.normalization_stats())
def test_the_checkpoint_passes_c15_for_any_stats(stats: tuple) -> None:
    """The checkpoint's table read back through the 16x16 levels image is `normalization_table`, bitwise."""
    mean, std = stats
    assert served.normalization_problem(TRUTH, replace(served.session_config(), image_mean=mean, image_std=std)) is None


class Shifted(served.CheckpointPath):
    """The checkpoint, but a resized image's levels moved by ``delta`` (clipped) before it normalizes them: a
    resize that rounds differently. (An image served unresized, the 16x16 levels image included, is left as is:
    a shift there would be a different normalization, which §16.5 reads as ulps, not levels.)"""

    def __init__(self, delta: int) -> None:
        self.delta, self.name = delta, f"resize off by {delta} levels"

    def serve(self, images, cfg):
        values, grids = checkpoint.preprocess(images, cfg)
        width, height = images[0].size  # one PIL image per call here
        rc = checkpoint.resize_config(width, height, cfg)
        if (rc.new_width, rc.new_height) == (width, height):
            return values, grids
        table = checkpoint.normalization_table(cfg)
        levels = served.recover_levels(values, table).astype(np.int16)
        moved = np.clip(levels + self.delta, 0, 255)
        return table[np.arange(3).reshape(1, 3, 1, 1), moved], grids


class Nudged(served.CheckpointPath):
    """The checkpoint, but every value ``ulps`` float32 steps up (a different normalization arithmetic)."""

    def __init__(self, ulps: int) -> None:
        self.ulps, self.name = ulps, f"nudged by {ulps} ulps"

    def serve(self, images, cfg):
        values, grids = checkpoint.preprocess(images, cfg)
        for _ in range(self.ulps):
            values = np.nextafter(values, np.float32(np.inf))
        return values, grids


def _pixel_check(path: served.CheckpointPath):
    def check(case: ss.ServedCase) -> None:
        cfg = case.config(served.session_config())
        problem = served.pixel_problem(path, case.image, cfg, served.Trained.of(case.image, cfg))
        assert problem is None, problem

    return check


def _shift_examples() -> st.SearchStrategy[ss.ServedCase]:
    return ss.served_cases(arrays=False, classes=("RGB", "L"))


@pytest.mark.parametrize(("delta", "caught"), [(1, False), (-1, False), (2, True), (-2, True)])
def test_c14_allows_a_level_and_catches_two(delta: int, caught: bool) -> None:
    """A path one level off everywhere is explained (§16.2 (a)); two levels off is found, with its count."""
    found = claimcheck.find_counterexample(_shift_examples(), _pixel_check(Shifted(delta)), max_examples=40)
    assert (found is not None) == caught, found
    if caught:
        assert "values unexplained" in found.error and f"up to {abs(delta)} levels off" in found.error


@pytest.mark.parametrize("ulps", [1, served.ALLOWANCE_ULPS])
def test_a_few_ulps_fail_c15_but_not_c14(ulps: int) -> None:
    """A normalization ``ulps`` off is within C14's allowance (b) and still breaks C15's bitwise claim."""
    path = Nudged(ulps)
    assert claimcheck.find_counterexample(_shift_examples(), _pixel_check(path), max_examples=20) is None
    problem = served.normalization_problem(path, served.session_config())
    assert problem is not None and "256 of 256 levels differ from the checkpoint in FP32" in problem


def test_c13_catches_a_path_off_by_one_pixel() -> None:
    """A path whose resize target is one pixel narrower fails C13 on the first size that is resized."""

    class Narrow(served.CheckpointPath):
        name = "one pixel narrower"

        def geometry(self, width, height, cfg):
            new_w, new_h, pad_w, pad_h = super().geometry(width, height, cfg)
            return new_w - 1, new_h, pad_w, pad_h

    problem = served.geometry_problem(Narrow(), 8000, 6000, profile("kimi-k3"))
    assert problem is not None and "(4141, 3107, 2, 1) != checkpoint's (4142, 3107, 2, 1)" in problem


def test_the_exemplars_cover_every_class_and_the_corpus() -> None:
    """The C14 table reads every class of semantics §16.3, arrays, and the shipped corpus's small images."""
    cases = ss.exemplars()
    assert {c.cls for c in cases} == set(ss.IMAGE_CLASSES) | {ss.ARRAY_CLASS}
    assert any(c.origin.startswith("corpus") for c in cases)
    for case in cases:  # every one is an input the checkpoint accepts
        checkpoint.preprocess([case.image], case.config(served.session_config()))
