# deferlab reproducer (format 1): claim C16 on vllm-0.34.0
# Claim: C16: For every clip and every documented option, the source frames a served video path takes (indices, in
#   order, repeats kept) equal the trained side's.
# System: vllm-0.34.0 (vllm 0.34.0, commit -)
# Spec: 0.34.0
# Model family: qwen2.5-vl (Qwen2.5-VL), the engine's default serving path
# Flaw: the source frames a served video path takes differ from the checkpoint's video processor's
# Recorded failure: ZeroDivisionError: division by zero)
# Counterexample: deferlab's minimal counterexample, from versions.json: ['Clip(frames=1, fps=1.0, width=64,
#   height=48)', 'VideoRequest(fps=None, num_frames=None, min_pixels=None, max_pixels=None, total_pixels=None)']
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --vllm SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no vLLM dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F15 (C16 on qwen2.5-vl:vllm-0.34.0): the source frames a served video path takes differ from the checkpoint's video processor's."""

# Needs the engine, and transformers with torchvision (transformers' video processors use it).
import numpy as np
import vllm.multimodal.video as vllm_video
from vllm.multimodal.media.image import ImageMediaIO
from vllm.multimodal.media.video import VideoMediaIO
import transformers
from transformers.video_utils import VideoMetadata

# The clip deferlab's counterexample names (its metadata only: semantics §20.3, pixel-free)
FRAMES = 1
FPS = 1.0
WIDTH = 64
HEIGHT = 48
# The request's options (VideoRequest's names; semantics §20.4-§20.7 map them to each side)
OPTIONS = {}
MEDIA_IO_KWARGS = {}
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


def test_c16_video_frames_taken_equal_the_checkpoints(monkeypatch):
    """The source frames vLLM's video loader takes for the clip
    (indices in order, the processor's temporal repeats kept) equal the checkpoint's video processor's; a refusal
    on one side only is a difference, on both agreement."""
    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    served = _answer(lambda: _padded(_served_indices(monkeypatch), tps))
    trained = _answer(lambda: _padded(_trained_indices(), tps))
    if isinstance(served, str) and isinstance(trained, str):
        return  # both sides refuse the request: they agree
    assert served == trained, f"frames taken {served} != the checkpoint's {trained}"
