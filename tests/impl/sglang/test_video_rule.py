"""SGLang's real video path (`impl.sglang.video`) against deferlab's restatement of its rule from semantics §20.5
(`reference.oracle.video_served`), which the video claims read every served difference against: if the two parted,
C17 would call SGLang's own behaviour unexplained. Every field of the plan (frames, pre-resize, size, grid, tokens,
times) and every refusal, on a tenth of the grid under the claims' option sets, on clips of the sizes clients send
(long ones, where the total budget's share binds), and under a client's min_pixels above that share (the budget's
floor). The path computes with the release's transformers (a loader companion): it runs in a child, this module
run as ``python -m tests.impl.sglang.test_video_rule SPEC``.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import pytest

from deferlab.reference.system.video import Clip, VideoRequest, grid_clips
from tests.impl.sglang.support import JSON_MARK, default_spec, run_child

FAMILIES = ("qwen2.5-vl", "qwen3-vl")
SIZES = ((640, 480), (1280, 720), (1920, 1080), (1080, 1920), (3840, 2160), (63, 47), (16, 127))
LONG = tuple(
    Clip(f, fps, w, h) for f, fps in ((900, 30.0), (8100, 30.0), (10200, 30.0), (36000, 60.0)) for w, h in SIZES
)
MORE = (
    VideoRequest(min_pixels=512 * 28 * 28),
    VideoRequest(min_pixels=700 * 28 * 28),
    VideoRequest(total_pixels=20 * 100352),
    VideoRequest(max_pixels=50000),
)


def child(spec: str) -> dict[str, Any]:
    from deferlab.impl.sglang.sources import load
    from deferlab.impl.sglang.video import video_paths
    from deferlab.properties.video_claims import OPTION_SETS
    from deferlab.reference.oracle.video_served import sglang_plan

    def outcome(fn: Any, clip: Clip, request: VideoRequest) -> Any:
        try:
            p = fn(clip, request)
        except Exception:  # noqa: BLE001 - a refusal on both sides is agreement
            return "refused"
        return [list(p.indices), p.pre_size, p.size, p.grid, p.tokens, list(p.times), p.padded]

    source = load(spec, companions=("transformers", "torchvision"))
    out: dict[str, Any] = {}
    points = [(c, r) for r in OPTION_SETS for c in grid_clips()[::10]]
    points += [(c, r) for c in LONG for r in (*OPTION_SETS, *MORE)]
    for family in FAMILIES:
        path = video_paths(source, family)[0]
        parted, answered = [], 0
        for clip, request in points:
            got = outcome(path.plan, clip, request)
            want = outcome(functools.partial(sglang_plan, family), clip, request)
            answered += got != "refused"
            if json.dumps(got, default=list) != json.dumps(want, default=list):
                parted.append(f"{clip} {request.label()}: served {got} rule {want}"[:400])
        out[family] = {"points": len(points), "answered": answered, "parted": parted[:5], "count": len(parted)}
    return out


@pytest.fixture(scope="module")
def served() -> dict[str, Any]:
    spec = default_spec()
    return run_child("tests.impl.sglang.test_video_rule", spec, spec=spec, timeout=900, module=True)


pytestmark = pytest.mark.extra("transformers")


@pytest.mark.parametrize("family", FAMILIES)
def test_sglang_serves_what_section_20_5_states_on_every_point(served, family):
    rec = served[family]
    assert rec["count"] == 0, rec["parted"]
    assert rec["points"] > 3800 and rec["answered"] > 3500  # most points answered: the pre-resize was compared


if __name__ == "__main__":
    print(JSON_MARK + json.dumps(child(sys.argv[1])))
