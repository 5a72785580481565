"""The reproducer texts of the video claims (C16, C17, C18; semantics §20): the trained side's call, each engine's
call, and the tests, joined into the templates `reports.repro.video` fills (C20's are `reports.repro.bytes_texts`).

Why these calls: C16-C18 are pixel-free (semantics §20.3), so a video reproducer builds only the clip's metadata
(frame count, frame rate, size) and hands it to the engine's own sampling code (the function deferlab runs, with
the same single stand-in where the engine reads the metadata off a decoder) and to the checkpoint's transformers
video processor (``sample_frames``, as ``BaseVideoProcessor.preprocess`` fills its kwargs). C20's reproducer builds
its image bytes with Pillow in the file (`properties.strategies.encoded`'s recipe, restated; a test checks the bytes
are the same), and hands them to the engine's own loader and to transformers' ``load_image``. Nothing here is an
engine's or transformers' code: the texts only call it.
"""

import string

# --- video (C16, C17, C18) ---------------------------------------------------------------------------------------------
VIDEO_NEEDS = "# Needs the engine, and transformers with torchvision (transformers' video processors use it).\n"
VIDEO_IMPORTS = """import transformers
from transformers.video_utils import VideoMetadata
"""

VIDEO_ANSWER = '''
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
'''

_QWEN_TRAINED = '''

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
'''
_VIDEO_COMMON = VIDEO_ANSWER + _QWEN_TRAINED

VIDEO_C16_TEST = '''

def test_${cid}_video_frames_taken_equal_the_checkpoints(monkeypatch):
    """The source frames $served takes for the clip
    (indices in order, the processor's temporal repeats kept) equal the checkpoint's video processor's; a refusal
    on one side only is a difference, on both agreement."""
    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    served = _answer(lambda: _padded(_served_indices(monkeypatch), tps))
    trained = _answer(lambda: _padded(_trained_indices(), tps))
    if isinstance(served, str) and isinstance(trained, str):
        return  # both sides refuse the request: they agree
    assert served == trained, f"frames taken {served} != the checkpoint's {trained}"
'''

VIDEO_C18_TEST = '''

def _times(indices, fps):
    """The prompt's timestamps of the frames taken: Qwen3VLProcessor's own _calculate_timestamps of the indices at
    ``fps``, what both sides' processors compute (each pairs the frames of a temporal patch and averages)."""
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor

    tps = int(VIDEO_CONFIG["temporal_patch_size"])
    return [float(t) for t in Qwen3VLProcessor._calculate_timestamps(None, list(indices), fps, tps)]


def test_${cid}_video_times_equal_the_checkpoints(monkeypatch):
    """The times the model is told each temporal grid step sits at equal the checkpoint's within 1e-6 s (semantics
    §20.2, C18); a refusal on one side only is a difference, on both agreement."""
    # the served metadata carries the container's rate as read (0.0 when unknown); the checkpoint's processor
    # falls back to 24 for an unknown rate (replace_video_token)
    served = _answer(lambda: _times(_served_indices(monkeypatch), FPS))
    trained = _answer(lambda: _times(_trained_indices(), FPS if FPS > 0 else 24))
    if isinstance(served, str) and isinstance(trained, str):
        return
    assert not isinstance(served, str) and not isinstance(trained, str), f"times {served} != {trained}"
    assert len(served) == len(trained), f"{len(served)} times {served} != the checkpoint's {len(trained)} {trained}"
    assert all(abs(a - b) <= 1e-6 for a, b in zip(served, trained)), f"times {served} != {trained}"
'''

_QWEN_GEOMETRY = '''

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
'''

GEOMETRY_TEST = '''

def test_${cid}_video_geometry_equals_the_checkpoints(monkeypatch):
    """The served video_grid_thw (so the per-frame size and the tokens) and the temporal padding equal the
    checkpoint's (semantics §20.2, C17); a refusal on one side only is a difference, on both agreement."""
    served = _answer(lambda: _served_geometry(monkeypatch))
    trained = _answer(_trained_geometry)
    if isinstance(served, str) and isinstance(trained, str):
        return
    assert served == trained, f"(grid, padded) {served} != the checkpoint's {trained}"
'''
VIDEO_C17_TEST = _QWEN_GEOMETRY + GEOMETRY_TEST

LMDEPLOY_VIDEO_IMPORTS = (
    "import inspect\n",
    """import numpy as np
from lmdeploy.vl.media.video import VideoMediaIO
from lmdeploy.vl.media.video_loader import OpenCVVideoLoader, VideoLoader
""",
)

LMDEPLOY_VIDEO = (
    _VIDEO_COMMON
    + '''

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
'''
)

VLLM_VIDEO_IMPORTS = (
    "",
    """import numpy as np
import vllm.multimodal.video as vllm_video
from vllm.multimodal.media.image import ImageMediaIO
from vllm.multimodal.media.video import VideoMediaIO
""",
)

VLLM_LOADED = '''

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
'''

_VLLM_QWEN = '''

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
'''
VLLM_VIDEO = _VIDEO_COMMON + VLLM_LOADED + _VLLM_QWEN

SGLANG_VIDEO_IMPORTS = (
    "import asyncio\n",
    """import numpy as np
import torch
from sglang.srt.multimodal.processors import qwen_vl
from sglang.srt.utils.video_decoder import VideoDecoderWrapper
""",
)

_SGLANG_READER = '''

class ClipReader(VideoDecoderWrapper):
    """The clip's metadata as SGLang's decoder wrapper reports it (frame count, average fps); black frames of its
    $said"""

    def __init__(self):
        self.asked = None

    def __len__(self):
        return FRAMES

    @property
    def avg_fps(self):
        return FPS

    def $fetch(self, indices):
        self.asked = [int(i) for i in indices]
        return $frames

    def close(self):
        return None
'''


def sglang_reader(said: str, fetch: str, frames: str) -> str:
    """The scripts' ClipReader: SGLang's decoder wrapper reporting the clip's frame count and average fps, with no
    decoder opened; its method ``fetch`` (the one the engine's sampler calls) records the indices asked for and
    gives ``frames`` (an expression: black frames of the clip's size). ``said`` ends its docstring.

    Why one text: every SGLang video script stands its reader in for the decoder the same way; only the fetch its
    sampler calls differs (the Qwen path's get_frames_as_tensor, Gemma 4's get_frames_at)."""
    return string.Template(_SGLANG_READER).substitute(said=said, fetch=fetch, frames=frames)


SGLANG_READER = sglang_reader(
    "size; records the indices preprocess_video asks for. No decoder is opened.",
    "get_frames_as_tensor",
    "torch.zeros((len(self.asked), HEIGHT, WIDTH, 3), dtype=torch.uint8)",
)

_SGLANG_QWEN = '''

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
'''
SGLANG_VIDEO = _VIDEO_COMMON + SGLANG_READER + _SGLANG_QWEN
