"""The checks every family's video oracle test makes against its trained side run for real (`test_video_oracle_glm`,
`test_video_oracle_gemma4`): the grid, a drawn clip, and the two tests each such file holds (its trained-side tests
in a child where this process cannot run them; its CARD row refused, no card recipe of its own).

Why one place: what "the oracle equals the trained side" means (a refusal on both sides agrees, times within 1e-6
s: `test_video_oracle.difference`) and how a counterexample is worded must be the same for every family; a family's
test keeps what is its own (its stated examples, the counts its rule predicts, its hypothesis strategies).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from deferlab.reference.oracle import video as oracle
from deferlab.reference.system.video import Clip, Unsupported, VideoRequest, grid_clips
from tests.reference.test_video_oracle import difference, label, options, outcome, real_code, trained
from tests.reference.video_child import run_in_a_child

CHILD_TESTS = "(trained or grid or drawn or decode) and not in_a_child"


def family_tests(test_file: str, family: str, env: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """The two tests every family's oracle file holds, bound to it: its trained-side tests in a child (``env`` set
    there) when this process cannot run them, and its CARD row refused (the family has no card recipe of its own).
    A test file binds them to its own names, which pytest collects."""

    @real_code
    def test_trained_side_in_a_child() -> None:
        """This file's trained-side tests in a pytest process of their own, when this one cannot run them."""
        run_in_a_child(Path(test_file), partial(trained, family), CHILD_TESTS, env)

    def test_one_row_only() -> None:
        """The family has no card recipe of its own: its CARD row is `Unsupported` with the reason."""
        with pytest.raises(Unsupported, match="no CARD row"):
            oracle.plan(family, "CARD", Clip(120, 30.0), VideoRequest())

    return test_trained_side_in_a_child, test_one_row_only


def grid_counts(family: str) -> dict[str, int]:
    """Every clip of the 6,000-clip grid x every option set of ``family``: the oracle's TRAINED plan equals the real
    processor's exactly (times: the whole seconds of the prompt text), a refusal on both sides agreeing; what the
    real side answered, counted (refused, unsupported, plans). The wall time is printed."""
    path = trained(family)["TRAINED"]
    found, counts = [], {"refused": 0, "unsupported": 0, "plans": 0}
    start = time.perf_counter()
    for request in options(family):
        for clip in grid_clips():
            a = outcome(partial(oracle.plan, family, "TRAINED"), clip, request)
            b = outcome(path.plan, clip, request)
            counts[b if isinstance(b, str) else "plans"] += 1
            if (d := difference(a, b)) is not None:
                found.append(f"{label(clip, request)}: {d}")
    print(f"\n{family}: {6000 * len(options(family))} plans per side in {time.perf_counter() - start:.1f} s, {counts}")
    assert not found, f"{len(found)} differ; first: " + "; ".join(found[:5])
    return counts


def agrees_on(family: str, frames: int, fps: float, size: tuple[int, int], request: VideoRequest) -> None:
    """A drawn clip: the oracle's TRAINED outcome equals the real processor's."""
    clip = Clip(frames, fps, *size)
    a = outcome(partial(oracle.plan, family, "TRAINED"), clip, request)
    b = outcome(trained(family)["TRAINED"].plan, clip, request)
    assert difference(a, b) is None, f"{label(clip, request)}: {difference(a, b)}"
