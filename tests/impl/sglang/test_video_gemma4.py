"""`impl.sglang.video_gemma4`: SGLang's Gemma 4 video path against TRAINED (semantics §20.10(b), SGLang).

What is checked against what: SGLang's plans (its own ``_video_decoder_to_tensor`` on a stand-in reader, then the
pinned transformers' metadata, size and prompt text) on 0.5.23 and 0.5.17 against the trained side run for real
(transformers 5.24.0's ``Gemma4VideoProcessor``, `properties.video_trained.trained_paths`), on named clips and a
subset of the grid, with the verdicts the fragment predicted: N >= 32 the same frames and size, N < 32 taken by SGLang
and refused by TRAINED, the options read by nothing, the times position / 24. The plan's modelled size and token
step is checked against the pinned processor's own ``preprocess`` on frames of the clip's size, handed over as SGLang
hands them (``do_sample_frames=False``, a deployment's ``fps`` beside it). C19: SGLang's decord decode of encoded
kinds, frames read back from their pixels. Each side runs in a child of its own (this module as
``python -m tests.impl.sglang.test_video_gemma4 SPEC OUT``, ``SPEC`` "trained" for the trained side).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from deferlab.reference.system.video import Clip, VideoRequest, grid_clips
from tests.impl.sglang import video_support
from tests.impl.sglang.support import JSON_MARK
from tests.impl.sglang.video_support import record

FAMILY = "gemma4"
NEWEST, OLDEST = "0.5.23", "0.5.17"
NAMED = ((1, 1.0), (31, 1.0), (32, 1.0), (33, 1.0), (32, 24.0), (33, 24.0), (8, 1.0), (9, 1.0), (120, 30.0),
         (64, 0.0), (36000, 60.0))  # fmt: skip
OPTIONS = (VideoRequest(), VideoRequest(fps=1.0), VideoRequest(num_frames=8))
KINDS = ("constant", "short", "rotation90")  # C19: agreement, TRAINED's refusal, decord's known refusal


def clips() -> list[Clip]:
    return [Clip(f, fps) for f, fps in NAMED] + list(grid_clips()[::150])


# --- the children ---------------------------------------------------------------------------------------------------
def _processor_check(path: Any) -> dict[str, Any]:
    """The pinned processor's own ``preprocess`` on 33 frames of 64x48, as SGLang hands them over (a deployment's
    fps beside ``do_sample_frames=False``, ``return_metadata`` as Gemma4Processor's defaults set it)."""
    import torch

    frames = torch.zeros((33, 3, 48, 64), dtype=torch.uint8)
    out = path.vp(videos=[frames], do_sample_frames=False, fps=1.0, return_metadata=True, return_tensors="pt")
    pos = out["video_position_ids"].reshape(-1, out["video_position_ids"].shape[-2], 2)[0]
    real = pos[pos[:, 0] >= 0]
    meta = out["video_metadata"][0]
    return {"soft": int(out["num_soft_tokens_per_video"][0]), "grid": [int(real[:, 1].max()) + 1,
            int(real[:, 0].max()) + 1], "fps": meta.fps, "indices": list(meta.frames_indices)}  # fmt: skip


def _served(path: Any) -> dict[str, Any]:
    """What SGLang's side records beside its plans: the processor's own step, and the pixel bounds' refusal."""
    return {"processor": _processor_check(path), "pixels": record(path, Clip(40, 1.0), VideoRequest(min_pixels=50176))}


def child(spec: str, out: str) -> dict[str, Any]:
    return video_support.child(spec, out, FAMILY, (clips(), OPTIONS, KINDS), _served)


# --- the tests ------------------------------------------------------------------------------------------------------
pytestmark = pytest.mark.extra("transformers")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return video_support.run_sides(
        "tests.impl.sglang.test_video_gemma4", tmp_path_factory.mktemp("gemma4-video"), (NEWEST, OLDEST)
    )


def plans(runs: dict[str, Any], side: str, option: int) -> dict[tuple[int, float], dict[str, Any]]:
    return {(c.frames, c.fps): p[option] for c, p in zip(clips(), runs[side]["plans"], strict=True)}


def test_the_path_is_sglangs_own_code_labelled_sglang(runs):
    for spec in (NEWEST, OLDEST):
        rec = runs[spec]
        assert [rec["label"], rec["real_code"], rec["system"]] == ["SGLANG", True, f"sglang-{spec}"]
        assert "_video_decoder_to_tensor (own" in rec["prov"]["sampling"]
        assert rec["pixels"]["refused"].startswith("Unsupported: n/a: min_pixels")


@pytest.mark.parametrize("spec", [NEWEST, OLDEST])
def test_the_modelled_size_and_tokens_are_the_processors_own(runs, spec):
    """33 frames of 64x48 through the pinned processor: 27 x 21 patches, 63 soft tokens a frame, fps None and the
    positions as indices (the fps kwarg read by nothing), as the plan of `[33@1 64x48]` says."""
    got, plan = runs[spec]["processor"], plans(runs, spec, 0)[(33, 1.0)]
    assert got == {"soft": 63, "grid": [21, 27], "fps": None, "indices": list(range(33))}
    assert plan["size"] == [432, 336] and plan["grid"] == [32, 21, 27] and plan["tokens"] == 32 * 63


@pytest.mark.parametrize("spec", [NEWEST, OLDEST])
def test_defaults_agree_on_frames_from_32_and_sglang_takes_what_trained_refuses_below(runs, spec):
    served, trained = plans(runs, spec, 0), plans(runs, "trained", 0)
    for key, t in trained.items():
        s = served[key]
        assert "refused" not in s, (key, s)
        if key[0] < 32:
            assert t["refused"].startswith("Refused") and s["indices"] == list(range(key[0])), key
        else:
            assert [s[k] for k in ("indices", "size", "grid", "tokens")] == [
                t[k] for k in ("indices", "size", "grid", "tokens")
            ], key
    assert served[(36000, 60.0)]["indices"][:3] == [0, 1125, 2250]


@pytest.mark.parametrize("spec", [NEWEST, OLDEST])
def test_the_times_are_position_over_24(runs, spec):
    served, trained = plans(runs, spec, 0), plans(runs, "trained", 0)
    for key, s in served.items():
        assert s["times"] == [float(i // 24) for i in range(len(s["indices"]))], key
    assert served[(32, 1.0)]["times"][1] == 0.0 and trained[(32, 1.0)]["times"][1] == 1.0  # the smallest
    assert served[(32, 24.0)]["times"] == trained[(32, 24.0)]["times"]  # N / F = 32 / 24: agree
    assert served[(33, 24.0)]["times"] == trained[(33, 24.0)]["times"]


@pytest.mark.parametrize("spec", [NEWEST, OLDEST])
def test_the_options_change_nothing_of_sglangs_frames(runs, spec):
    defaults, fps1, eight = (plans(runs, spec, o) for o in range(3))
    assert fps1 == defaults and eight == defaults
    trained_fps, trained_eight = plans(runs, "trained", 1), plans(runs, "trained", 2)
    assert all("mutually exclusive" in p["refused"] for p in trained_fps.values())
    assert trained_eight[(8, 1.0)]["indices"] == eight[(8, 1.0)]["indices"] == list(range(8))
    assert len(trained_eight[(9, 1.0)]["indices"]) == 8 and len(eight[(9, 1.0)]["indices"]) == 9


def test_c19_decord_reads_the_trained_frames_and_refuses_a_rotation_tag(runs):
    got, want = runs[NEWEST]["decoded"], runs["trained"]["decoded"]
    if "unsupported" in got or "unsupported" in want:
        pytest.skip(f"video extra not installed: {got.get('unsupported') or want.get('unsupported')}")
    assert got["constant"]["read"] == got["constant"]["said"] == want["constant"]["read"]
    assert got["constant"]["said"] == [i * 120 // 32 for i in range(32)]
    assert got["short"]["read"] == [0, 1, 2] and want["short"]["refused"].startswith("Refused")
    assert got["rotation90"]["refused"].startswith("Refused: SGLang's decoder refused a frame")
    assert "refused" not in want["rotation90"]


if __name__ == "__main__":  # the child: python -m tests.impl.sglang.test_video_gemma4 SPEC OUT
    print(JSON_MARK + json.dumps(child(sys.argv[1], sys.argv[2])))
