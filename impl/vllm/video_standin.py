"""The codec stand-ins `impl.vllm.video`'s pixel-free ``plan`` puts in for the one step it does not run: reading a
container (semantics §20.6).

Why two: the step moved. From 0.29.0 the loader's ``load_bytes`` calls ``vllm.multimodal.video.decode_video`` (the
``video_decoders`` package), which opens the bytes, reads the metadata, lets the loader's own
``compute_frames_index_to_sample`` choose and reads the chosen frames; 0.27.0-0.28.0 do the same inline in
``VideoBackend.load_bytes`` through ``OpenCVVideoBackendMixin``'s ``open_video_capture``, ``get_video_metadata`` and
``read_frames``. Which one a release has is read off its module (`standin`), never off its version number. Either
way the stand-in reports the `Clip`'s metadata as OpenCV reads it, leaves the choice to the loader's own code, and
serves each chosen frame once in increasing order (OpenCV's ``read_frames``) as a 1x1 black frame.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np

from deferlab.reference.system.video import Clip

MIXIN = "OpenCVVideoBackendMixin"
_ABSENT = object()


def decoder(video: ModuleType, clip: Clip) -> Callable[..., Any]:
    """The stand-in for ``decode_video`` (0.29.0 on): the clip's metadata, the loader's own choice."""

    def decode_video(backend, loader_cls, data, target, sampling_kwargs, backend_kwargs, *, frame_recovery):
        meta = video.VideoSourceMetadata(clip.frames, clip.fps, clip.duration)
        source = loader_cls._prepare_source(meta)
        frame_idx = loader_cls.compute_frames_index_to_sample(source=source, target=target, **sampling_kwargs)
        valid = sorted(set(frame_idx))  # OpenCV's read_frames: each chosen frame once, in increasing order
        return np.zeros((len(valid), 1, 1, 3), np.uint8), source, frame_idx, valid

    return decode_video


class _Capture:
    """What ``load_bytes`` asks of the ``cv2.VideoCapture`` it opened before the metadata: the frame size (its
    pixel-limit check); the rest goes through the stood-in methods."""

    def __init__(self, clip: Clip) -> None:
        self.clip = clip

    def get(self, prop: int) -> float:
        import cv2

        sizes = {cv2.CAP_PROP_FRAME_WIDTH: self.clip.width, cv2.CAP_PROP_FRAME_HEIGHT: self.clip.height}
        return float(sizes.get(prop, 0))


def _inline(video: ModuleType, clip: Clip) -> dict[str, Any]:
    """The mixin's three methods, standing in for OpenCV (0.27.0-0.28.0)."""

    def open_video_capture(cls: type, data: bytes) -> _Capture:
        return _Capture(clip)

    def get_video_metadata(cap: Any) -> Any:
        return video.VideoSourceMetadata(clip.frames, clip.fps, clip.duration)

    def read_frames(cls: type, cap: Any, frame_idx: list[int], total_frames_num: int, *, frame_recovery=False):
        valid = sorted(set(frame_idx))
        return np.zeros((len(valid), 1, 1, 3), np.uint8), valid

    return {
        "open_video_capture": classmethod(open_video_capture),
        "get_video_metadata": staticmethod(get_video_metadata),
        "read_frames": classmethod(read_frames),
    }


def where(video: ModuleType) -> str:
    """Which step the release reads a container with: ``decode_video`` (0.29.0 on) or the OpenCV mixin's methods."""
    if hasattr(video, "decode_video"):
        return f"{video.__name__}.decode_video"
    if hasattr(video, MIXIN):
        return f"{video.__name__}.{MIXIN}.open_video_capture, get_video_metadata and read_frames"
    raise RuntimeError(f"{video.__name__} has neither decode_video nor {MIXIN}: a vLLM video loader not read here")


@contextlib.contextmanager
def standin(video: ModuleType, clip: Clip) -> Iterator[None]:
    """Put the stand-in in for ``clip`` for the duration (the caller holds the lock), and the real code back."""
    if hasattr(video, "decode_video"):
        owner, replaced = video, {"decode_video": decoder(video, clip)}
    else:
        where(video)  # refuses a module with neither
        owner, replaced = getattr(video, MIXIN), _inline(video, clip)
    real = {name: vars(owner).get(name, _ABSENT) for name in replaced}  # an inherited one: removed again after
    try:
        for name, value in replaced.items():
            setattr(owner, name, value)
        yield
    finally:
        for name, value in real.items():
            if value is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def load(path: Any, clip: Clip, kwargs: dict[str, Any]) -> tuple[dict[str, Any], type]:
    """(the loader's metadata, the loader class) for ``clip``: ``VideoMediaIO.load_bytes`` of the path's release
    with ``kwargs``, the container read stood in (`standin`) under the path's lock; both of deferlab's vLLM video
    paths (Qwen's and GLM-4.1V's) load so."""
    with path._lock, standin(path._video, clip):
        io = path._media(path._image_io(), **kwargs)
        media = io.load_bytes(b"")
    _, metadata = media.media
    return metadata, io.video_loader if isinstance(io.video_loader, type) else type(io.video_loader)
