"""LMDeploy's real video path (`impl.lmdeploy.video`) against deferlab's restatement of its rule from semantics §20.7
(`reference.oracle.video_served.lmdeploy_plan`), which the video claims read every served difference against: if the
two parted, C16-C18 would call LMDeploy's own behaviour unexplained. Every field of the plan (frames, size, grid,
tokens, padding, times), every refusal and every option the path does not take, on the whole grid of §20.3 under
every option set of the claims, on long clips of the sizes clients send (the processor's total budget binds), on
clips whose container reports no frame rate, and under options past the swept ones (a rate with a count, a rate
above the source's, one-sided and crossed pixel bounds, a count of one, a count over the clip's). Mutants of the
rule must part, so the comparison can fail.

The path computes with the release's transformers (a loader companion), which must be active before anything
imports transformers: it runs in a child, this module run as ``python -m tests.impl.lmdeploy.test_video_rule SPEC``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from typing import Any

import numpy as np
import pytest

from deferlab.reference.system.video import Clip, Unsupported, VideoRequest, grid_clips
from tests.child import JSON_MARK, run_child

FAMILY = "qwen3-vl"  # LMDeploy's only family with a video path (semantics §20.7)
SIZES = ((640, 480), (1280, 720), (1920, 1080), (1080, 1920), (3840, 2160), (63, 47), (16, 127), (8, 4000))
LONG = tuple(Clip(f, fps, w, h) for f, fps in ((900, 30.0), (8100, 30.0), (36000, 60.0)) for w, h in SIZES)
UNKNOWN = tuple(Clip(f, 0.0) for f in (1, 2, 3, 5, 32, 33, 100, 1000, 20000))
MORE = (
    VideoRequest(fps=45.0),
    VideoRequest(fps=0.5),
    VideoRequest(fps=4.0, num_frames=8),
    VideoRequest(num_frames=1),
    VideoRequest(num_frames=2),
    VideoRequest(min_pixels=512 * 28 * 28),
    VideoRequest(max_pixels=50000),
    CROSSED := VideoRequest(min_pixels=10**7, max_pixels=10**6),  # LMDeploy falls back to the checkpoint's pair
    VideoRequest(total_pixels=10**6),
)
# Counts over the default 32 (a count with a rate; a count over some clips' frames): on frames up to 640x480 only,
# since the processor resizes every frame it is handed (500 frames of 4K would be 12 GB of blank pixels).
MANY = (VideoRequest(fps=1.0, num_frames=100), VideoRequest(num_frames=500))
# (name in video_served, replacement): each a plausible misreading of §20.7's rule
MUTANTS = {
    "LMDEPLOY_NUM_FRAMES": 16,  # another default count
    "LMDEPLOY_FPS": 2.0,  # a default rate, as the other engines and the trained side have
    "lmdeploy_indices": "rounded",  # linspace rounded (the trained side's) where LMDeploy truncates
    "lmdeploy_size": "no fallback",  # crossed bounds passed on instead of falling back to the checkpoint's
}


def _outcome(fn: Any, clip: Clip, request: VideoRequest) -> Any:
    try:
        p = fn(clip, request)
    except Unsupported:
        return "unsupported"
    except Exception:  # noqa: BLE001 - a refusal on both sides is agreement
        return "refused"
    return [list(p.indices), p.size, p.grid, p.tokens, list(p.times), p.padded]


def points() -> list[tuple[Clip, VideoRequest]]:
    """The sweep: every clip of the grid x every option set of the claims, then the extra clips x every request."""
    from deferlab.properties.video_claims import OPTION_SETS

    found = [(c, r) for r in OPTION_SETS for c in grid_clips()]
    found += [(c, r) for c in (*LONG, *UNKNOWN) for r in (*OPTION_SETS, *MORE)]
    return found + [(c, r) for c in (*LONG, *UNKNOWN) if c.width * c.height <= 640 * 480 for r in MANY]


def _parted(path: Any, rule: Any, where: list[tuple[Clip, VideoRequest]]) -> tuple[list[str], int]:
    parted, answered = [], 0
    for clip, request in where:
        got, want = _outcome(path.plan, clip, request), _outcome(rule, clip, request)
        answered += isinstance(got, list)
        if json.dumps(got, default=list) != json.dumps(want, default=list):
            parted.append(f"{clip} {request.label()}: served {got} rule {want}"[:400])
    return parted, answered


def _mutant(value: Any, original: Any) -> Any:
    """What the mutant puts in place of ``original`` (a constant, or the function with one step changed)."""
    from deferlab.reference.oracle import video_served as vs

    if value == "rounded":

        def rounded(clip: Clip, request: VideoRequest) -> np.ndarray:
            n = len(original(clip, request))
            return (
                np.arange(clip.frames)
                if n == clip.frames
                else np.linspace(0, clip.frames - 1, n).round().astype(np.int64)
            )

        return rounded
    if value == "no fallback":
        fam = vs.family_of(FAMILY)
        return lambda family, r: (r.min_pixels or fam.min_pixels, r.max_pixels or fam.max_pixels)
    return value


def child(spec: str) -> dict[str, Any]:
    from deferlab.impl.lmdeploy import sources
    from deferlab.impl.lmdeploy.video import COMPANIONS, video_paths
    from deferlab.reference.oracle import video_served as vs

    try:
        source = sources.load(spec, companions=COMPANIONS[FAMILY])
    except sources.LMDeployFetchError as exc:
        return {"skip": f"LMDeploy {spec} cannot be fetched: {exc}"}
    path = video_paths(source, FAMILY)[0]
    where = points()
    started = time.perf_counter()
    parted, answered = _parted(path, functools.partial(vs.lmdeploy_plan, FAMILY), where)
    seconds = time.perf_counter() - started
    # the mutants on the worked part of the sweep: the defaults and the crossed bounds on every tenth grid clip
    few = [(c, r) for c in (*grid_clips()[::10], *LONG) for r in (VideoRequest(), CROSSED)]
    mutants = {}
    for name, value in MUTANTS.items():
        original = getattr(vs, name)
        setattr(vs, name, _mutant(value, original))
        try:
            mutants[name] = len(_parted(path, functools.partial(vs.lmdeploy_plan, FAMILY), few)[0])
        finally:
            setattr(vs, name, original)
    return {"system": path.system, "points": len(where), "answered": answered, "count": len(parted),
            "parted": parted[:5], "seconds": seconds, "mutants": mutants, "few": len(few)}  # fmt: skip


@pytest.fixture(scope="module")
def served() -> dict[str, Any]:
    from deferlab.impl.lmdeploy.sources import DEFAULT_VERSION

    spec = os.environ.get("DEFERLAB_LMDEPLOY", DEFAULT_VERSION)
    # one torch thread: the processor's resizes are small and many; on a shared machine two threads spent 9x
    # the time contending (measured: 7.2 s against 0.8 s for 3,000 plans at fps=1)
    found = run_child(
        "tests.impl.lmdeploy.test_video_rule", spec, module=True, env={"OMP_NUM_THREADS": "1"}, timeout=900
    )
    if "skip" in found:
        pytest.skip(found["skip"])
    return found


REAL = pytest.mark.extra("transformers")  # the real path computes with the release's pinned transformers


@pytest.mark.parametrize(
    ("clip", "request_", "want"),
    [
        # §20.7's table: every frame of a short clip by count, the last repeated to pad; pair-mean times
        (Clip(5, 5.0), VideoRequest(), ((0, 1, 2, 3, 4, 4), (64, 64), (3, 4, 4), 12, (0.1, 0.5, 0.8))),
        # 32 of 300 frames by a truncating linspace (k x 299 // 31), no rate
        (Clip(300, 30.0), VideoRequest(), (tuple(k * 299 // 31 for k in range(32)), (64, 64), (16, 4, 4), 64, None)),
        # a rate: floor(2 s x 1) = 2 frames of 10
        (Clip(10, 5.0), VideoRequest(fps=1.0), ((0, 9), (64, 64), (1, 4, 4), 4, (0.9,))),
        # the smaller of a count and a rate: floor(4 s x 4) = 16 over 8 -> 8
        (
            Clip(100, 25.0),
            VideoRequest(fps=4.0, num_frames=8),
            (tuple(k * 99 // 7 for k in range(8)), None, (4, 4, 4), 16, None),
        ),
    ],
)
def test_the_restated_rule_gives_section_20_7s_worked_numbers(clip, request_, want):
    from deferlab.reference.oracle.video_served import lmdeploy_plan

    p = lmdeploy_plan(FAMILY, clip, request_)
    indices, size, grid, tokens, times = want
    assert (p.indices, p.grid, p.tokens) == (indices, grid, tokens)
    assert size is None or p.size == size
    assert times is None or p.times == pytest.approx(times, abs=1e-9)


@pytest.mark.parametrize(
    ("clip", "request_", "why"),
    [
        (Clip(2, 5.0), VideoRequest(fps=1.0), "t:1 must be larger"),  # floor(0.4 x 1) = 0 -> one frame
        (Clip(20, 0.0), VideoRequest(), "frame rate is 0"),  # no 24 fps fallback in the timestamps
        (Clip(20, 0.0), VideoRequest(fps=2.0), "t:1 must be larger"),  # duration 0: one frame, refused first
        (Clip(10, 5.0), VideoRequest(total_pixels=10**6), "no total_pixels"),
    ],
)
def test_the_restated_rule_refuses_where_section_20_7_says(clip, request_, why):
    from deferlab.reference.oracle.video_served import lmdeploy_plan

    with pytest.raises(Exception, match=why):
        lmdeploy_plan(FAMILY, clip, request_)


def test_crossed_pixel_bounds_fall_back_to_the_checkpoints_size():
    from deferlab.reference.oracle.video_served import lmdeploy_plan

    crossed = lmdeploy_plan(FAMILY, Clip(4, 2.0, 640, 480), CROSSED)
    assert crossed == lmdeploy_plan(FAMILY, Clip(4, 2.0, 640, 480), VideoRequest())
    lone = lmdeploy_plan(FAMILY, Clip(4, 2.0, 640, 480), VideoRequest(max_pixels=50000))
    assert lone.size != crossed.size  # a lone bound is completed, not refused and not ignored


@REAL
def test_lmdeploy_serves_what_section_20_7_states_on_every_point(served):
    from deferlab.reference.oracle.video_served import lmdeploy_plan, rule_for

    assert rule_for(served["system"]) == ("semantics §20.7", lmdeploy_plan)
    assert served["count"] == 0, served["parted"]
    # the whole grid x the six option sets (36,000) and the extras: most answered, so plans were compared
    assert served["points"] > 36_500 and served["answered"] > 35_000, (served["points"], served["answered"])
    assert served["seconds"] < 240, served["seconds"]


@REAL
@pytest.mark.parametrize("name", MUTANTS)
def test_a_mutant_of_the_rule_parts_from_lmdeploy(served, name):
    """The check can fail: each misreading of §20.7 (another default count, a default rate, rounded indices, crossed
    pixel bounds passed on) parts from the real code on the mutants' points."""
    assert served["mutants"][name] > 0, (name, served["few"])


if __name__ == "__main__":
    print(JSON_MARK + json.dumps(child(sys.argv[1])))
