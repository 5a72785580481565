"""vLLM's served video path (semantics §20.6) on the in-process release (0.32.0-0.34.0 share the code), run for real
with the transformers and torchvision it pins: the paths it gives per family, plans on worked clips against what
§20.6 derives by hand, the pixel-free geometry held to the processor's own call, the grid's count rules, and the
frames its own loader decodes from generated clips, read back from their pixels."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from deferlab.reference.system.video import Clip, Unsupported, VideoPath, VideoRequest, grid_clips

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("DEFERLAB_VLLM", "0.34.0") not in ("0.32.0", "0.33.0", "0.34.0"),
        reason="semantics §20.6's facts are 0.32.0-0.34.0's",
    ),
    pytest.mark.extra("vllm"),
    pytest.mark.extra("transformers"),
]
VIDEO = pytest.mark.extra("video")  # PyAV encodes the clips, OpenCV is vLLM's default codec
FAMILIES = ("qwen2.5-vl", "qwen3-vl")


@pytest.fixture(scope="module")
def paths(vllm_source):
    from deferlab.impl.vllm.video import video_paths

    return {family: video_paths(vllm_source, family)[0] for family in FAMILIES}


def test_one_default_path_per_qwen_family_and_the_loader_vllm_picks(paths, vllm_source):
    from deferlab.impl.vllm.video import video_paths

    for family, loader in (("qwen2.5-vl", "qwen2_vl"), ("qwen3-vl", "qwen3_vl")):
        found = video_paths(vllm_source, family)
        assert len(found) == 1 and isinstance(found[0], VideoPath)
        path = found[0]
        assert (path.label, path.family, path.real_code, path.system) == ("VLLM", family, True, vllm_source.name)
        assert path.backend == loader  # picked by the checkpoint's video processor class (semantics §20.6)
        assert loader in path.provenance()["loader"]
    for family in ("kimi-k3", "internvl", "mistral3", "gemma3", "nope"):  # gemma4: test_video_gemma4.py
        with pytest.raises(Unsupported, match=r"^n/a: .*accepted: qwen2.5-vl, qwen3-vl, glm-4.1v, gemma4"):
            video_paths(vllm_source, family)


# Worked clips, derived by hand from semantics §20.6 (64x48 frames unless said).
# Qwen2.5-VL: n = floor(min(max(N / F x fps, 4), floor(min(768, N) / 2) x 2, N) / 2) x 2, indices
# trunc(arange(0, N, N / n)); per frame smart_resize(48, 64, 28, 3136, 12845056) = 56x56; times t x 2 / (n / N x F).
# Qwen3-VL: n = min(max(int(N / F x fps), 4), 768, N), indices round(linspace(0, N - 1, n)); 3-D smart_resize
# (t_bar x 64 x 64 within 4096..25165824) = 64x64; times: pair means of index / F after padding with the last.
WORKED = [
    ("qwen2.5-vl", Clip(10, 30.0), VideoRequest(), (0, 2, 5, 7), (56, 56), (2, 4, 4), 8, (0.0, 2 / 12), 0),
    ("qwen2.5-vl", Clip(3, 30.0), VideoRequest(), (0, 1), (56, 56), (1, 4, 4), 4, (0.0,), 0),
    ("qwen2.5-vl", Clip(120, 30.0), VideoRequest(fps=4.0),
     (0, 7, 15, 22, 30, 37, 45, 52, 60, 67, 75, 82, 90, 97, 105, 112), (56, 56), (8, 4, 4), 32,
     tuple(t * 0.5 for t in range(8)), 0),
    # min 50176 > 56 x 56: beta = sqrt(50176 / 3072), h = ceil(48 beta / 28) x 28 = 196, w = ceil(64 beta / 28) x 28 = 280
    ("qwen2.5-vl", Clip(10, 30.0), VideoRequest(min_pixels=50176, max_pixels=200704), (0, 2, 5, 7), (280, 196),
     (2, 14, 20), 140, (0.0, 2 / 12), 0),
    ("qwen3-vl", Clip(120, 30.0), VideoRequest(), (0, 17, 34, 51, 68, 85, 102, 119), (64, 64), (4, 4, 4), 16,
     (17 / 60, 85 / 60, 153 / 60, 221 / 60), 0),
    # read whole (3 < 4 frames), so the processor samples again: the same 3, padded with the last
    ("qwen3-vl", Clip(3, 30.0), VideoRequest(), (0, 1, 2, 2), (64, 64), (2, 4, 4), 8, (1 / 60, 4 / 60), 1),
    # off the grid: fps=4 reads all 30 frames, the processor resamples at its own fps 2: int(30 / 3 x 2) = 20
    ("qwen3-vl", Clip(30, 3.0), VideoRequest(fps=4.0),
     tuple(int(v) for v in np.round(np.linspace(0, 29, 20))), (64, 64), (10, 4, 4), 40, None, 0),
]  # fmt: skip


@pytest.mark.parametrize(("family", "clip", "request_", "indices", "size", "grid", "tokens", "times", "padded"), WORKED)
def test_plan_on_worked_clips_is_what_semantics_derives(paths, family, clip, request_, indices, size, grid, tokens,
                                                       times, padded):  # fmt: skip
    plan = paths[family].plan(clip, request_)
    assert plan.indices == indices
    assert (plan.size, plan.grid, plan.tokens, plan.padded) == (size, grid, tokens, padded)
    assert len(plan.times) == grid[0]
    if times is not None:
        assert np.abs(np.asarray(plan.times) - np.asarray(times)).max() <= 1e-9
    else:  # pair means of the (padded) indices / 3 fps
        want = [(a + b) / 2 / 3.0 for a, b in zip(indices[::2], indices[1::2], strict=True)]
        assert np.abs(np.asarray(plan.times) - want).max() <= 1e-9


def test_what_vllm_refuses_ignores_and_does_not_take(paths):
    with pytest.raises(ZeroDivisionError):  # one frame: n = 0, total / n (semantics §20.6)
        paths["qwen2.5-vl"].plan(Clip(1, 1.0), VideoRequest())
    with pytest.raises(ValueError, match="t:1 must be larger than temporal_factor:2"):
        paths["qwen3-vl"].plan(Clip(1, 1.0), VideoRequest())
    for path in paths.values():
        clip = Clip(120, 30.0)
        asked = path.plan(clip, VideoRequest(num_frames=8))
        assert asked == path.plan(clip, VideoRequest())  # num_frames accepted and ignored by the fps-driven loader
        assert any("num_frames=8" in note and "ignored" in note for note in asked.notes)
        with pytest.raises(Unsupported, match="total_pixels"):
            path.plan(clip, VideoRequest(total_pixels=1 << 20))


def test_pixel_free_geometry_equals_the_processors_call(vllm_source):
    """`video_geometry.fast` (the processor's own functions) against its ``__call__`` on frames, clip by clip."""
    from deferlab.impl.vllm.video import VLLMVideoPath

    clips = [Clip(1, 1.0), Clip(3, 30.0), Clip(9, 2.0), Clip(30, 3.0), Clip(61, 8.0), Clip(97, 24.0),
             Clip(5, 24.0, 63, 47), Clip(12, 10.0, 17, 600), Clip(9, 2.0, 1280, 720), Clip(40, 1.0, 20, 20)]  # fmt: skip
    requests = [VideoRequest(), VideoRequest(fps=4.0), VideoRequest(min_pixels=50176, max_pixels=200704),
                VideoRequest(min_pixels=50176), VideoRequest(max_pixels=200704)]  # one edge: the call refuses it  # fmt: skip
    for family in FAMILIES:
        fast, exact = VLLMVideoPath(vllm_source, family), VLLMVideoPath(vllm_source, family, exact=True)
        for clip in clips:
            for request in requests:
                got = [_answer(p, clip, request) for p in (fast, exact)]
                assert got[0] == got[1], (family, clip, request)


def _answer(path, clip, request):
    try:
        plan = path.plan(clip, request)
        return plan, plan.times
    except Exception as e:  # noqa: BLE001 - both sides must refuse alike
        return f"{type(e).__name__}: {e}"


def test_the_grid_follows_the_count_rules_fast(paths):
    """Every clip of §20.3's grid at the defaults: the counts §20.6 states (restated here in NumPy), 20 one-frame
    clips refused, and the 12,000 plans within the claim sweep's budget."""
    clips = grid_clips()
    started = time.perf_counter()
    for family, path in paths.items():
        refused = 0
        for clip in clips:
            try:
                plan = path.plan(clip, VideoRequest())
            except (ZeroDivisionError, ValueError):
                refused += 1
                assert clip.frames == 1
                continue
            taken = plan.indices[: len(plan.indices) - plan.padded]
            n, f = clip.frames, clip.fps
            if family == "qwen2.5-vl":
                cap = math.floor(min(768, n) / 2) * 2
                want = math.floor(min(max(n / f * 2, 4), cap, n) / 2) * 2
            else:
                want = min(max(int(n / f * 2), 4), 768, n)
            assert len(taken) == want or len(taken) == want + 1, (family, clip)  # arange's n + 1 (semantics §20.4)
            assert plan.padded == len(taken) % 2
            assert list(taken) == sorted(set(taken)) and taken[-1] < n
            assert (
                plan.grid[0] * 2 == len(plan.indices) and plan.tokens == plan.grid[0] * plan.grid[1] * plan.grid[2] // 4
            )
        assert refused == 20
    assert time.perf_counter() - started < 120


@VIDEO
@pytest.mark.parametrize("family", FAMILIES)
def test_decoded_frames_are_the_planned_ones_read_back_from_their_pixels(paths, family):
    from deferlab.properties import clips
    from deferlab.reference.oracle.video import read_index

    path = paths[family]
    for kind in ("constant", "short", "webm"):
        spec = clips.KINDS[kind]
        if not clips.codec_available(spec):
            continue
        data = clips.encode(spec)
        started = time.perf_counter()
        got = path.decode(data, VideoRequest())
        took = time.perf_counter() - started
        plan = path.plan(clips.clip_of(spec), VideoRequest())
        read = [read_index(frame) for frame in got.frames]
        assert read == list(plan.indices[: len(plan.indices) - plan.padded]) == list(got.indices), kind
        assert got.frames.dtype == np.uint8 and got.frames.shape[1:] == (spec.height, spec.width, 3)
        assert (got.total, got.fps) == (spec.frames, spec.fps)
        assert took < 5.0, f"decoding a {kind} clip took {took:.1f} s"


@VIDEO
def test_opencv_turns_a_rotated_clip_and_other_codecs_say_what_to_install(paths, vllm_source):
    from deferlab.impl.vllm.video import VLLMVideoPath
    from deferlab.properties import clips

    spec = clips.KINDS["rotation90"]
    got = paths["qwen3-vl"].decode(clips.encode(spec), VideoRequest())
    assert got.frames.shape[1:3] == (spec.width, spec.height)  # turned by the display matrix (semantics §20.6)
    import importlib.util

    if importlib.util.find_spec("torchcodec") is None:
        with pytest.raises(Unsupported, match="torchcodec.*install"):
            VLLMVideoPath(vllm_source, "qwen3-vl", codec="torchcodec").decode(b"\0", VideoRequest())
    with pytest.raises(Unsupported, match="no video codec 'pyav'"):
        VLLMVideoPath(vllm_source, "qwen3-vl", codec="pyav")


def test_the_release_pieces_are_read_off_the_loaded_code():
    """Which Qwen2.5-VL hand-off and which container step a release has are read off its classes and module, not
    its version (semantics §20.6, older releases): ``_get_hf_mm_inputs`` defined by the processor itself (0.31.0 on),
    ``decode_video`` (0.29.0 on) or the OpenCV mixin's methods (0.27.0-0.28.0), neither refused in one line."""
    from types import ModuleType, SimpleNamespace

    from deferlab.impl.vllm import video_standin
    from deferlab.impl.vllm.video import _hands_metadata

    class Old:
        pass

    class New:
        def _get_hf_mm_inputs(self):
            pass

    class Child(New):  # inherited, not its own: the releases that hand the metadata on define it themselves
        pass

    assert _hands_metadata(SimpleNamespace(Qwen2_5_VLMultiModalProcessor=New), "qwen2.5-vl")
    assert not _hands_metadata(SimpleNamespace(Qwen2_5_VLMultiModalProcessor=Old), "qwen2.5-vl")
    assert not _hands_metadata(SimpleNamespace(Qwen2_5_VLMultiModalProcessor=Child), "qwen2.5-vl")
    assert _hands_metadata(None, "qwen3-vl")

    class Mixin:
        @classmethod
        def open_video_capture(cls, data):
            raise AssertionError("the real capture ran")

    inline = ModuleType("vllm.multimodal.video")
    inline.OpenCVVideoBackendMixin = Mixin
    inline.VideoSourceMetadata = lambda *a: a
    real = vars(Mixin)["open_video_capture"]
    with video_standin.standin(inline, Clip(7, 5.0, 64, 48)):
        cap = Mixin.open_video_capture(b"")
        assert (cap.clip.frames, Mixin.get_video_metadata(cap)) == (7, (7, 5.0, 7 / 5.0))
        frames, valid = Mixin.read_frames(cap, [4, 0, 4], 7)
        assert valid == [0, 4] and frames.shape == (2, 1, 1, 3)  # each chosen frame once, in increasing order
    assert vars(Mixin)["open_video_capture"] is real and "read_frames" not in vars(Mixin)  # put back
    assert "OpenCVVideoBackendMixin" in video_standin.where(inline)
    with pytest.raises(RuntimeError, match="neither decode_video nor OpenCVVideoBackendMixin"):
        video_standin.where(ModuleType("vllm.multimodal.video"))


@VIDEO
def test_decode_refuses_what_its_processor_refuses(paths):
    """One frame read: vLLM's Qwen3-VL request fails in the processor (t:1 under the temporal patch of 2), so the
    decode refuses it as its plan does (semantics §20.6, "C19's served refusal on vLLM")."""
    from deferlab.properties import clips
    from deferlab.reference.system.video import Refused

    spec = clips.KINDS["one"]
    with pytest.raises(
        Refused, match=r"vLLM's processor refuses the 1 frame\(s\) its loader kept: ValueError: .*temporal"
    ):
        paths["qwen3-vl"].decode(clips.encode(spec), VideoRequest())
    with pytest.raises(Exception):  # noqa: B017 - the plan refuses the same clip, whatever its exception
        paths["qwen3-vl"].plan(clips.clip_of(spec), VideoRequest())
