"""The restated TRAINED row's decode (`properties.video_trained.OraclePath.decode`) against transformers' real
``load_video`` (`TrainedPath.decode`, PyAV, transformers 5.24.0) on the clip kinds where semantics §20.2 records that
an engine process judged against the restatement and the reproducer's real ``load_video`` did not: variable frame rate,
very short (3 frames, under every minimum) and one frame, with constant as the control.

What running found (semantics §20.2): the two read the same source frames, but the restatement handed over the
processor's plan, whose indices keep the temporal padding (the last frame repeated to an even count), where the real
loader returns the frames it read, before the processor pads them. The restatement now drops the plan's padding, so
the comparison below is exact: the restated frames are the real ones (indices said and read back, rate, count),
refusals agreeing, the odd counts that parted before included. One difference stays, by design: a one-frame Qwen3-VL
clip, which ``load_video`` reads and the processor's ``smart_resize`` then refuses, is refused by the restatement,
as the trained side as a whole refuses it.

Both rows need transformers 5.24.0 and PyAV: they run in a child of their own (``python -m
tests.reference.test_video_trained_decode``), so an engine's transformers imported earlier in a session does not
stand in its way.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deferlab.reference.system.video import VideoRequest
from tests.child import JSON_MARK, run_child

FAMILIES = ("qwen2.5-vl", "qwen3-vl")
KINDS = ("constant", "vfr", "short", "one")
REQUESTS = (VideoRequest(), VideoRequest(fps=1.0), VideoRequest(fps=4.0), VideoRequest(num_frames=8))


def _read(side: Any, data: bytes, request: VideoRequest) -> dict[str, Any]:
    """One decode: the indices the side says, the indices its frames' codes say, its rate and count."""
    from deferlab.reference.oracle.video import read_index

    try:
        got = side.decode(data, request)
    except Exception as exc:  # noqa: BLE001 - a refusal is a result, compared
        return {"refused": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    return {"said": list(got.indices or ()), "read": [read_index(f) for f in got.frames], "fps": got.fps,
            "total": got.total}  # fmt: skip


def child() -> dict[str, Any]:
    from deferlab.properties import clips, video_trained
    from deferlab.reference.oracle.video import trained_plan

    out: dict[str, Any] = {}
    for family in FAMILIES:
        real, restated = video_trained.trained_paths(family)["TRAINED"], video_trained.oracle_path(family)
        for kind in KINDS:
            data = clips.encode(clips.KINDS[kind])
            clip = clips.clip_of_bytes(data)
            for request in REQUESTS:
                try:
                    padded = trained_plan(family, clip, request).padded
                except Exception:  # noqa: BLE001 - the plan refuses (the one-frame Qwen3-VL clip's resize)
                    padded = None
                out[f"{family} {kind} {request.label()}"] = {
                    "real": _read(real, data, request),
                    "restated": _read(restated, data, request),
                    "plan_padded": padded,
                }
    return out


@pytest.fixture(scope="module")
def decoded() -> dict[str, Any]:
    from deferlab.reference.system.extras import why_missing

    for extra in ("video", "transformers"):
        if (why := why_missing(extra)) is not None:
            pytest.skip(why)
    return run_child("tests.reference.test_video_trained_decode", module=True, timeout=600)


pytestmark = [pytest.mark.extra("video"), pytest.mark.extra("transformers")]
ONE_FRAME_QWEN3 = {f"qwen3-vl one {r}" for r in ("defaults", "fps=1", "fps=4")}


def test_restated_decode_is_the_real_one_everywhere_but_one_frame_qwen3(decoded):
    """Every point but the one-frame Qwen3-VL ones: both refuse, or the restated frames are the real ones (indices
    said and read back, rate, count)."""
    parted = []
    for point, got in decoded.items():
        if point in ONE_FRAME_QWEN3:
            continue
        real, restated = got["real"], got["restated"]
        if "refused" in real or "refused" in restated:
            if ("refused" in real) != ("refused" in restated):
                parted.append(f"{point}: real {real} restated {restated}")
            continue
        if real != restated or real["said"] != real["read"]:
            parted.append(f"{point}: real {real} restated {restated}")
    assert parted == [], parted
    assert len(decoded) == len(FAMILIES) * len(KINDS) * len(REQUESTS)


def test_the_points_the_padding_parted_now_agree(decoded):
    """The difference §20.2 recorded, gone: where the real loader reads an odd count (short: 3 frames; vfr at the
    defaults: 7; one frame, Qwen2.5-VL) the processor's plan pads one frame, and the restated decode no longer hands
    that frame over."""
    for point in ("qwen2.5-vl short defaults", "qwen3-vl short defaults", "qwen3-vl vfr defaults",
                  "qwen2.5-vl one defaults"):  # fmt: skip
        got = decoded[point]
        assert got["plan_padded"] == 1 and len(got["real"]["said"]) % 2 == 1, (point, got)
        assert got["restated"] == got["real"], (point, got)
    assert decoded["qwen3-vl constant defaults"]["plan_padded"] == 0  # the control: an even count, no padding


def test_one_frame_qwen3_is_read_by_load_video_and_refused_by_the_trained_side(decoded):
    """The processor refuses the clip (``smart_resize``: t:1 under temporal_factor 2) after ``load_video`` has read
    its one frame: the restated decode refuses it, as the trained side as a whole does (semantics §20.2)."""
    for point in sorted(ONE_FRAME_QWEN3):
        got = decoded[point]
        assert got["plan_padded"] is None and got["real"].get("read") == [0], (point, got)
        assert "temporal_factor" in got["restated"].get("refused", ""), (point, got)


if __name__ == "__main__":
    print(JSON_MARK + json.dumps(child()))
