# deferlab reproducer (format 1): claim C17 on lmdeploy-0.18.0
# Claim: C17: For every clip and option, the served per-frame resize target, temporal padding, video_grid_thw and
#   video tokens equal the trained side's.
# System: lmdeploy-0.18.0 (lmdeploy 0.18.0, commit -)
# Spec: 0.18.0
# Model family: qwen3-vl (Qwen3-VL), the engine's default serving path
# Flaw: the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's
# Recorded failure: AssertionError: [5@5 64x48; defaults] geometry differs from the trained side's: padded 1 != 0
# Counterexample: deferlab's minimal counterexample, from versions.json: ['Clip(frames=5, fps=5.0, width=64,
#   height=48)', 'VideoRequest(fps=None, num_frames=None, min_pixels=None, max_pixels=None, total_pixels=None)']
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --lmdeploy SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no LMDeploy dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F4 (C17 on qwen3-vl:lmdeploy-0.18.0): the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's."""

# Needs the engine, and transformers with torchvision (transformers' video processors use it).
import inspect

import numpy as np
from lmdeploy.vl.media.video import VideoMediaIO
from lmdeploy.vl.media.video_loader import OpenCVVideoLoader, VideoLoader
import transformers
from transformers.video_utils import VideoMetadata

# The clip deferlab's counterexample names (its metadata only: semantics §20.3, pixel-free)
FRAMES = 5
FPS = 5.0
WIDTH = 64
HEIGHT = 48
# The request's options (VideoRequest's names; semantics §20.4-§20.7 map them to each side)
OPTIONS = {}
# The checkpoint's video processor (qwen3-vl) and its config (semantics §20.4)
PROCESSOR = 'Qwen3VLVideoProcessor'
VIDEO_CONFIG = {
    'size': {
        'longest_edge': 25165824,
        'shortest_edge': 4096,
    },
    'patch_size': 16,
    'merge_size': 2,
    'temporal_patch_size': 2,
    'image_mean': [0.5, 0.5, 0.5],
    'image_std': [0.5, 0.5, 0.5],
    'processor_class': 'Qwen3VLProcessor',
    'video_processor_type': 'Qwen3VLVideoProcessor',
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


def _served_indices(monkeypatch):
    """LMDeploy's frames: VideoLoader.smart_nframes with the arguments OpenCVVideoLoader.load_bytes hands it (the
    request's media_io_kwargs['video'] num_frames, else VideoMediaIO's default, and fps, else the loader's;
    duration = frames / fps, 0 when unknown), its processor keeps them as taken (do_sample_frames=False). A single frame, which the processor then refuses, is kept as one frame here."""
    num_frames = OPTIONS.get("num_frames", inspect.signature(VideoMediaIO).parameters["num_frames"].default)
    fps = OPTIONS.get("fps", inspect.signature(OpenCVVideoLoader.load_bytes).parameters["fps"].default)
    duration = FRAMES / FPS if FPS > 0 else 0
    _, indices = VideoLoader.smart_nframes(FRAMES, num_frames, fps, duration)
    return [int(i) for i in indices]


def _served_geometry(monkeypatch):
    """(grid, temporal padding) of the pinned processor on LMDeploy's frames, with the videos_kwargs LMDeploy's
    VisionModel.preprocess passes (vl/model/base.py, preprocess_utils.get_override_size): the loader's metadata,
    do_resize=True, do_sample_frames=False, and min/max pixels as the processor's size."""
    indices = _served_indices(monkeypatch)
    frames = np.zeros((len(indices), HEIGHT, WIDTH, 3), np.uint8)
    meta = {"total_num_frames": FRAMES, "fps": FPS, "duration": FRAMES / FPS if FPS > 0 else 0,
            "video_backend": "opencv", "frames_indices": indices}
    grid = _grid(frames, video_metadata=[meta], do_resize=True, do_sample_frames=False, **_size_kwargs())
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
