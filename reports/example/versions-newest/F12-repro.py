# deferlab reproducer (format 1): claim C17 on vllm-0.34.0
# Claim: C17: For every clip and option, the served per-frame resize target, temporal padding, video_grid_thw and
#   video tokens equal the trained side's.
# System: vllm-0.34.0 (vllm 0.34.0, commit -)
# Spec: 0.34.0
# Model family: qwen3-vl (Qwen3-VL), the engine's default serving path
# Flaw: the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's
# Recorded failure: AssertionError: [2@1 64x48; num_frames=8] the served side took what the trained side refuses
#   (Refused: `num_frames` and `fps` are mutually exclusive arguments (ValueError in sample_frames: preprocess
#   filled the processor's fps=2))
# Counterexample: deferlab's minimal counterexample, from versions.json: ['Clip(frames=2, fps=1.0, width=64,
#   height=48)', 'VideoRequest(fps=None, num_frames=8, min_pixels=None, max_pixels=None, total_pixels=None)']
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --vllm SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no vLLM dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F12 (C17 on qwen3-vl:vllm-0.34.0): the served per-frame size, temporal padding, video_grid_thw or tokens differ from the checkpoint's."""

# Needs the engine, and transformers with torchvision (transformers' video processors use it).
import importlib

import numpy as np
import vllm.multimodal.video as vllm_video
from vllm.multimodal.media.image import ImageMediaIO
from vllm.multimodal.media.video import VideoMediaIO
import transformers
from transformers.video_utils import VideoMetadata

# The clip deferlab's counterexample names (its metadata only: semantics §20.3, pixel-free)
FRAMES = 2
FPS = 1.0
WIDTH = 64
HEIGHT = 48
# The request's options (VideoRequest's names; semantics §20.4-§20.7 map them to each side)
OPTIONS = {'num_frames': 8}
MEDIA_IO_KWARGS = {'num_frames': 8}
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
INFO = ('vllm.model_executor.models.qwen3_vl', 'Qwen3VLProcessingInfo')

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


def _loaded(monkeypatch):
    """vLLM's loader metadata: VideoMediaIO.load_bytes with the request's media_io_kwargs['video'] and the loader
    vLLM picks for the checkpoint's video processor class; its loader's own compute_frames_index_to_sample
    chooses. One stand-in, the codec call (vllm.multimodal.video.decode_video): it reports the clip's metadata as
    OpenCV reads it and serves each chosen frame once, in increasing order, as a 1x1 frame (OpenCV's read_frames)."""

    def decode_video(backend, loader_cls, data, target, sampling_kwargs, backend_kwargs, *, frame_recovery):
        duration = FRAMES / FPS if FPS > 0 else 0.0
        source = loader_cls._prepare_source(vllm_video.VideoSourceMetadata(FRAMES, FPS, duration))
        chosen = loader_cls.compute_frames_index_to_sample(source=source, target=target, **sampling_kwargs)
        valid = sorted(set(chosen))
        return np.zeros((len(valid), 1, 1, 3), np.uint8), source, chosen, valid

    monkeypatch.setattr(vllm_video, "decode_video", decode_video)
    kwargs = dict(VideoMediaIO.merge_kwargs(None, dict(MEDIA_IO_KWARGS)))
    kwargs.setdefault("video_backend", vllm_video.get_video_loader_backend_for_processor(PROCESSOR))
    return VideoMediaIO(ImageMediaIO(), **kwargs).load_bytes(b"").media[1]


def _served_indices(monkeypatch):
    """vLLM's frames: those its loader read (`_loaded`); Qwen2.5-VL's processor keeps them as they come, Qwen3-VL's
    resamples a clip read whole (semantics §20.6)."""
    metadata = _loaded(monkeypatch)
    read = [int(i) for i in metadata["frames_indices"]]
    if PROCESSOR != "Qwen3VLVideoProcessor" or not metadata["do_sample_frames"]:
        return read
    # Qwen3-VL: vLLM hands the processor the loader's do_sample_frames (True for a clip read whole), and the
    # processor samples the frames read with its own sample_frames on the loader's metadata (its defaults: the
    # request's fps / num_frames went to the loader, not to the processor)
    proc = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG))
    meta = VideoMetadata(**{k: v for k, v in metadata.items() if k != "do_sample_frames"})
    return [read[i] for i in _sample(proc, meta, {})]


def _info():
    """The release's processing-info class of the family (INFO: module, class): vLLM's own size and time rules."""
    return getattr(importlib.import_module(INFO[0]), INFO[1])


def _processor_kwargs():
    """min_pixels / max_pixels as vLLM hands them to the processor (mm_processor_kwargs): completed by the
    release's _complete_mm_processor_size_aliases; Qwen3-VL folds them into size (_get_vision_size over the
    processor's size) and drops the flat keys (semantics §20.6)."""
    given = {k: v for k, v in OPTIONS.items() if k in ("min_pixels", "max_pixels") and v}
    if not given:
        return {}
    kwargs = dict(_info()._complete_mm_processor_size_aliases(given))
    if PROCESSOR == "Qwen3VLVideoProcessor":
        default = getattr(transformers, PROCESSOR).from_dict(dict(VIDEO_CONFIG)).size
        kwargs["size"] = _info()._get_vision_size(kwargs, default_size=default)
        kwargs.pop("min_pixels", None)
        kwargs.pop("max_pixels", None)
    return kwargs


def _metadata(loaded):
    """The VideoMetadata vLLM builds of its loader's dict (do_sample_frames left out)."""
    return VideoMetadata(**{k: v for k, v in loaded.items() if k != "do_sample_frames"})


def _served_geometry(monkeypatch):
    """(grid, temporal padding) of the processor as vLLM calls it: on the frames its loader read (black, the clip's
    size), with the loader's metadata and vLLM's processor kwargs; Qwen3-VL also with the loader's
    do_sample_frames, so a clip read whole is resampled by the processor (semantics §20.6)."""
    loaded = _loaded(monkeypatch)
    call = _processor_kwargs()
    if PROCESSOR == "Qwen3VLVideoProcessor":
        call["do_sample_frames"] = bool(loaded["do_sample_frames"])
    frames = np.zeros((len(loaded["frames_indices"]), HEIGHT, WIDTH, 3), np.uint8)
    grid = _grid(frames, video_metadata=[_metadata(loaded)], **call)
    return grid, grid[0] * int(VIDEO_CONFIG["temporal_patch_size"]) - len(_served_indices(monkeypatch))


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
