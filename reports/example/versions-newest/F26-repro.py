# deferlab reproducer (format 1): claim C17 on sglang-0.5.23
# Claim: C17: For every clip and option, the served per-frame resize target, temporal padding, video_grid_thw and
#   video tokens equal the trained side's.
# System: sglang-0.5.23 (sglang 0.5.23, commit -)
# Spec: 0.5.23
# Model family: qwen2.5-vl (Qwen2.5-VL), the engine's default serving path
# Flaw: the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's
# Recorded failure: AssertionError: [1@1 64x48; defaults] the served side refused what the trained side takes
#   (Refused: SGLang refused 1@1 with {}: ValueError: nframes should in interval [2, 1], but got 0.)
# Counterexample: deferlab's minimal counterexample, from versions.json: ['Clip(frames=1, fps=1.0, width=64,
#   height=48)', 'VideoRequest(fps=None, num_frames=None, min_pixels=None, max_pixels=None, total_pixels=None)']
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F26 (C17 on qwen2.5-vl:0.5.23): the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's."""

# Needs the engine, and transformers with torchvision (transformers' video processors use it).
import asyncio

import numpy as np
import torch
from sglang.srt.multimodal.processors import qwen_vl
from sglang.srt.utils.video_decoder import VideoDecoderWrapper
import transformers
from transformers.video_utils import VideoMetadata

# The clip deferlab's counterexample names (its metadata only: semantics §20.3, pixel-free)
FRAMES = 1
FPS = 1.0
WIDTH = 64
HEIGHT = 48
# The request's options (VideoRequest's names; semantics §20.4-§20.7 map them to each side)
OPTIONS = {}
SERVER_VIDEO_CONFIG = {}
# The checkpoint's video processor (qwen2.5-vl) and its config (semantics §20.4)
PROCESSOR = 'Qwen2VLVideoProcessor'
VIDEO_CONFIG = {
    'min_pixels': 3136,
    'max_pixels': 12845056,
    'patch_size': 14,
    'temporal_patch_size': 2,
    'merge_size': 2,
    'image_mean': [0.48145466, 0.4578275, 0.40821073],
    'image_std': [0.26862954, 0.26130258, 0.27577711],
    'image_processor_type': 'Qwen2VLImageProcessor',
    'processor_class': 'Qwen2_5_VLProcessor',
}

REFUSALS = (ValueError, AssertionError, ZeroDivisionError, TypeError, IndexError)


def _padded(indices, temporal_patch_size):
    """The frames after the processor's temporal padding: the last frame repeated to a multiple of the temporal
    patch (semantics §20.2: C16 compares the frames taken, repeats kept)."""
    indices = [int(i) for i in indices]
    return indices + indices[-1:] * (-len(indices) % temporal_patch_size)


def _answer(side):
    """A side's frames, or its refusal as one line: a request that fails there (two refusals agree)."""
    try:
        return side()
    except REFUSALS as e:
        return f"refused ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"


def _sample(proc, meta, given):
    """The processor's own sample_frames on ``meta``, its kwargs filled as BaseVideoProcessor.preprocess fills
    them: ``given`` (fps / num_frames), every other one from the processor's attributes."""
    kw = {name: given.get(name, getattr(proc, name, None)) for name in proc.valid_kwargs.__annotations__}
    for name in ("input_data_format", "do_convert_rgb", "do_sample_frames", "device", "video_metadata"):
        kw.pop(name, None)
    return [int(i) for i in proc.sample_frames(meta, **kw)]


def _trained_indices():
    """The checkpoint's video processor (transformers, built by from_dict from its video config as
    from_pretrained builds it): it samples when its config says so or the request names fps / num_frames
    (apply_chat_template's rule), with every other sample_frames kwarg filled from the processor's own
    attributes, as BaseVideoProcessor.preprocess fills them (semantics §20.4); otherwise it takes every frame."""
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    given = {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}
    if not (proc.do_sample_frames or given):
        return list(range(FRAMES))
    meta = VideoMetadata(total_num_frames=FRAMES, fps=FPS if FPS > 0 else None, width=WIDTH, height=HEIGHT)
    indices = _sample(proc, meta, given)
    if max(indices) >= FRAMES:  # the processor's video[indices] on FRAMES decoded frames
        raise IndexError(f"index {max(indices)} is out of bounds for {FRAMES} frames (video[indices])")
    return indices


class ClipReader(VideoDecoderWrapper):
    """The clip's metadata as SGLang's decoder wrapper reports it (frame count, average fps); black frames of its
    size; records the indices preprocess_video asks for. No decoder is opened."""

    def __init__(self):
        self.asked = None

    def __len__(self):
        return FRAMES

    @property
    def avg_fps(self):
        return FPS

    def get_frames_as_tensor(self, indices):
        self.asked = [int(i) for i in indices]
        return torch.zeros((len(self.asked), HEIGHT, WIDTH, 3), dtype=torch.uint8)

    def close(self):
        return None


def _preprocess(monkeypatch):
    """SGLang's own preprocess_video (smart_nframes, the indices it computes inline, its own resize) with the
    server's video config, on the clip's reader: (the frames it hands on, its metadata, the indices it asked
    for). is_cpu answers True: no pin_memory on a machine without CUDA."""
    monkeypatch.setattr(qwen_vl, "is_cpu", lambda: True)
    reader = ClipReader()
    video, metadata = asyncio.run(qwen_vl.preprocess_video(reader, video_config=dict(SERVER_VIDEO_CONFIG)))
    return video, metadata, [int(i) for i in reader.asked]


def _served_indices(monkeypatch):
    """SGLang's frames: those preprocess_video asked the reader for; its processor keeps them
    (do_sample_frames=False)."""
    return _preprocess(monkeypatch)[2]


def _served_geometry(monkeypatch):
    """(grid, temporal padding) of the pinned processor on SGLang's resized frames, as _process_mm_data_uncached
    hands them: Qwen3-VL with SGLang's metadata and do_sample_frames=False, Qwen2.5-VL with neither (semantics
    §20.5)."""
    video, metadata, indices = _preprocess(monkeypatch)
    qwen3 = PROCESSOR == "Qwen3VLVideoProcessor"
    grid = _grid(video, **({"video_metadata": [metadata], "do_sample_frames": False} if qwen3 else {}))
    return grid, grid[0] * int(VIDEO_CONFIG["temporal_patch_size"]) - len(indices)


def _grid(frames, **kwargs):
    """The checkpoint's video processor run on ``frames`` (uint8 black frames of the clip's size): its
    video_grid_thw, from which the per-frame size (h, w x patch_size) and the tokens (t h w / merge_size**2)
    follow (semantics §20.4)."""
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    return [int(v) for v in proc(videos=[frames], return_tensors="np", **kwargs)["video_grid_thw"][0]]


def _size_kwargs():
    """min_pixels / max_pixels as the processor's size (the other edge its own), as both sides pass them."""
    low, high = OPTIONS.get("min_pixels"), OPTIONS.get("max_pixels")
    if low is None and high is None:
        return {}
    size = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG)).size
    return {"size": {"shortest_edge": size["shortest_edge"] if low is None else low,
                     "longest_edge": size["longest_edge"] if high is None else high}}


def _trained_geometry():
    """(grid, temporal padding) of the checkpoint's processor on the whole clip, sampling as it samples (its
    config, or fps / num_frames named by the request), with the clip's metadata."""
    frames = np.zeros((FRAMES, HEIGHT, WIDTH, 3), np.uint8)
    meta = VideoMetadata(total_num_frames=FRAMES, fps=FPS if FPS > 0 else None, width=WIDTH, height=HEIGHT)
    given = {k: v for k, v in OPTIONS.items() if k in ("fps", "num_frames")}
    grid = _grid(frames, video_metadata=[meta], **given, **({"do_sample_frames": True} if given else {}),
                 **_size_kwargs())
    return grid, grid[0] * int(VIDEO_CONFIG["temporal_patch_size"]) - len(_trained_indices())


def test_c17_video_geometry_equals_the_checkpoints(monkeypatch):
    """The served video_grid_thw (so the per-frame size and the tokens) and the temporal padding equal the
    checkpoint's (semantics §20.2, C17); a refusal on one side only is a difference, on both agreement."""
    served = _answer(lambda: _served_geometry(monkeypatch))
    trained = _answer(_trained_geometry)
    if isinstance(served, str) and isinstance(trained, str):
        return
    assert served == trained, f"(grid, padded) {served} != the checkpoint's {trained}"
