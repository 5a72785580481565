"""`impl.sglang.video_glm`: SGLang's GLM-4.1V video path against TRAINED (semantics §20.5, "GLM-4.1V on SGLang").

What is checked against what: SGLang's plans (its own request parsing, merge, sampling and hand-over; the pinned
transformers' resize and prompt text) on 0.5.23 and 0.5.17 against the trained side run for real (transformers
5.24.0's ``Glm4vVideoProcessor``, `properties.video_trained.trained_paths`), on a subset of the grid and the clips the
fragment names, with the verdicts the reading predicted: where they agree, and where they differ and why (0.5.23
clamps a client's fps to the processor's 2; 0.5.17 drops it and its transformers 5.12.1 gives a clip under 0.5 s no
frame). C19: SGLang's decord decode of encoded kinds against TRAINED's PyAV decode, frames read back from their
pixels. SGLang runs with its release's transformers and TRAINED with 5.24.0, so each side runs in a child of its own
(this module as ``python -m tests.impl.sglang.test_video_glm SPEC OUT``, ``SPEC`` "trained" for the trained side).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pytest

from deferlab.properties.video_claims import BASE_OPTION_SETS
from deferlab.reference.system.video import Clip, VideoRequest, grid_clips
from tests.impl.sglang import video_support
from tests.impl.sglang.support import JSON_MARK

FAMILY = "glm-4.1v"
NEWEST, OLDEST = "0.5.23", "0.5.17"
NAMED = ((1, 5.0), (3, 5.0), (4, 5.0), (5, 5.0), (1, 1.0), (2, 1.0), (120, 30.0), (36000, 30.0), (120, 0.0))
KINDS = ("constant", "short", "rotation90")  # C19: agreement, an odd one, and decord's known refusal
DEFAULTS, FPS1, FPS4, PIXELS = (BASE_OPTION_SETS.index(r) for r in (
    VideoRequest(), VideoRequest(fps=1.0), VideoRequest(fps=4.0),
    VideoRequest(min_pixels=64 * 28 * 28, max_pixels=256 * 28 * 28)))  # fmt: skip
FIELDS = {"C16": ("indices",), "C17": ("size", "padded", "grid", "tokens"), "C18": ("times",)}


def clips() -> list[Clip]:
    return [Clip(f, fps) for f, fps in NAMED] + list(grid_clips()[::50])


# --- the children ---------------------------------------------------------------------------------------------------
def child(spec: str, out: str) -> dict[str, Any]:
    return video_support.child(spec, out, FAMILY, (clips(), BASE_OPTION_SETS, KINDS))


# --- the tests ------------------------------------------------------------------------------------------------------
pytestmark = pytest.mark.extra("transformers")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("glm-video")
    got = video_support.run_sides("tests.impl.sglang.test_video_glm", out, (NEWEST, OLDEST))
    got["out"] = out
    return got


def part(plan: dict[str, Any], claim: str) -> Any:
    return plan.get("refused") and "refused" or [plan[k] for k in FIELDS[claim]]


def differing(runs: dict[str, Any], spec: str, claim: str, option: int) -> list[tuple[int, float]]:
    """The clips (frames, fps), smallest first, where SGLang ``spec``'s plan differs from TRAINED's in ``claim``'s
    fields (a refusal on one side only is a difference; a point TRAINED takes no option for is left out, as the
    claim leaves it out: the pixel bounds, semantics §20.4)."""
    served, trained = runs[spec]["plans"], runs["trained"]["plans"]
    return sorted((c.frames, c.fps) for c, s, t in zip(clips(), served, trained, strict=True)
                  if not str(t[option].get("refused", "")).startswith("Unsupported")
                  and part(s[option], claim) != part(t[option], claim))  # fmt: skip


def test_the_path_is_sglangs_own_code_labelled_sglang(runs):
    for spec in (NEWEST, OLDEST):
        rec = runs[spec]
        assert [rec["label"], rec["real_code"], rec["system"]] == ["SGLANG", True, f"sglang-{spec}"]
    assert "glm_sample_and_decode_sync (own)" in runs[NEWEST]["prov"]["sampling"]
    assert "5.19.0" in runs[NEWEST]["prov"]["sampling"] and "5.12.1" in runs[OLDEST]["prov"]["sampling"]
    assert "hands transformers the raw request" in runs[OLDEST]["prov"]["sampling"]


@pytest.mark.parametrize("claim", sorted(FIELDS))
def test_newest_agrees_with_trained_except_where_it_clamps_a_clients_fps(runs, claim):
    """0.5.23: every option set but fps=4 agrees everywhere (the pixel bounds: no option of TRAINED's, left out);
    fps=4 is served as 2."""
    for option in range(len(BASE_OPTION_SETS)):
        found = differing(runs, NEWEST, claim, option)
        if option == FPS4:
            assert found, claim
            assert found[0] == {"C16": (3, 5.0)}.get(claim, (4, 5.0))  # the fragment's smallest clips
            at_two = runs[NEWEST]["plans"]
            assert all(p[FPS4] == p[DEFAULTS] for p in at_two)  # clamped: the plan of the default fps (2)
        else:
            assert found == [], (claim, BASE_OPTION_SETS[option].label(), found[:3])


def test_newest_drops_the_pixel_bounds_and_num_frames(runs):
    plans = runs[NEWEST]["plans"]
    assert all(p[PIXELS] == p[DEFAULTS] == p[BASE_OPTION_SETS.index(VideoRequest(num_frames=8))] for p in plans)
    assert plans[4][PIXELS]["size"] == [112, 84]  # the default budget; TRAINED takes no pixel bounds (§20.4)
    assert runs["trained"]["plans"][4][PIXELS]["refused"].startswith("Unsupported: TRAINED glm-4.1v: the video")


def test_oldest_drops_a_clients_fps_and_gives_a_sub_half_second_clip_no_frame(runs):
    """0.5.17: transformers 5.12.1 samples (n = floor(duration x 2), no floor of one): a clip under 0.5 s is refused
    where TRAINED takes [0, 0]; a client's fps never reaches it."""
    served, trained = runs[OLDEST]["plans"], runs["trained"]["plans"]
    assert "t:0 must be larger than temporal_factor:2" in served[0][DEFAULTS]["refused"]  # 1@5
    assert trained[0][DEFAULTS]["indices"] == [0, 0]
    assert all(p[FPS1] == p[FPS4] == p[DEFAULTS] for p in served)
    for claim in FIELDS:
        found = differing(runs, OLDEST, claim, DEFAULTS)
        assert found and all(frames / fps < 0.5 for frames, fps in found), (claim, found)  # the sub-0.5 s clips
    assert differing(runs, OLDEST, "C16", FPS1)[:2] == [(1, 5.0), (5, 5.0)]  # 5@5: (0, 3) at 2 fps, TRAINED (0, 0)
    assert served[3][FPS1]["indices"] == [0, 3] and trained[3][FPS1]["indices"] == [0, 0]


def test_unknown_rate_is_refused_by_both(runs):
    last = len(NAMED) - 1  # 120@0: no frame rate
    for spec in (NEWEST, OLDEST, "trained"):
        assert "refused" in runs[spec]["plans"][last][DEFAULTS], spec


@pytest.mark.extra("video")
def test_c19_decord_reads_trained_frames_and_refuses_a_rotation_tag(runs):
    """0.5.23 (decord): the kinds both take carry the same source frames, within one level; a rotation tag is
    decord's refusal where TRAINED's PyAV reads the stored frames. 0.5.17 names torchcodec in one line."""
    served, trained, out = runs[NEWEST]["decoded"], runs["trained"]["decoded"], runs["out"]
    if "unsupported" in served:
        pytest.skip(served["unsupported"])
    for kind in ("constant", "short"):
        assert served[kind]["read"] == served[kind]["said"] == trained[kind]["read"], kind
        a, b = np.load(out / f"{NEWEST}-{kind}.npy"), np.load(out / f"trained-{kind}.npy")
        assert a.shape == b.shape and int(np.abs(a.astype(np.int16) - b).max()) <= 1, kind
    assert served["rotation90"]["refused"].startswith("Refused: SGLang's decoder refused a frame: DECORDError")
    assert "read" in trained["rotation90"]
    old = runs[OLDEST]["decoded"]["constant"]["refused"]
    assert old.startswith("Unsupported: ") and "torchcodec" in old


if __name__ == "__main__":
    print(JSON_MARK + json.dumps(child(sys.argv[1], sys.argv[2])))
