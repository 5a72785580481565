"""LMDeploy's served video path (`video_paths`): what ``lmdeploy serve api_server`` makes of a video a client sends,
run from the release's own code (semantics §20.7).

Why these steps: LMDeploy samples the frames itself, in its media loader (``VideoMediaIO``, 32 frames unless the
request's ``media_io_kwargs`` say otherwise; ``VideoLoader.smart_nframes``), then hands exactly those frames to the
checkpoint's transformers processor with ``do_sample_frames=False`` (``VisionModel.preprocess``), which resizes,
pads, patchifies and writes the prompt's timestamps. So a plan runs LMDeploy's sampler on the clip's metadata, then
LMDeploy's ``preprocess`` (with a recording stand-in processor: it only reveals the kwargs LMDeploy passes), then the
processor of the release's pinned transformers (a loader companion, never deferlab's installed one) with those
kwargs. Only Qwen3-VL has a video path: Qwen2.5-VL's ``Qwen2VLModel`` refuses a video item and InternVL's model
takes images only (`video.Unsupported`, ``n/a``).
"""

from __future__ import annotations

import base64
import importlib.util
import inspect
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from deferlab.impl.lmdeploy.sources import Source
from deferlab.impl.lmdeploy.video_qwen3 import Qwen3Processor
from deferlab.reference.system.video import Clip, DecodedVideo, Refused, Unsupported, VideoPlan, VideoRequest

__all__ = ["COMPANIONS", "FAMILIES", "LABEL", "Qwen3VideoPath", "backend_path", "video_paths"]

LABEL = "LMDEPLOY"
FAMILIES = ("qwen3-vl",)
# Qwen3-VL's frames go to transformers' video processor (torchvision's resize under it): the release's pins.
COMPANIONS = {"qwen3-vl": ("torchvision", "transformers")}
LOADER = "lmdeploy.vl.media.video_loader"
MEDIA = "lmdeploy.vl.media.video"
CONNECTION = "lmdeploy.vl.media.connection"
IMAGE = "lmdeploy.vl.media.image"
# LMDeploy's backends (``VideoMediaIO._get_video_loader_backend``) and the package each needs installed.
BACKENDS = {
    "cv2": "opencv-python-headless",
    "decord": "decord",
    "torchcodec": "torchcodec",
    "torchvision": "torchvision",
}
NO_VIDEO = {
    "qwen2.5-vl": "LMDeploy's Qwen2VLModel preprocesses images only and its proc_messages raises "
    "'Unsupported message type: video' (every release 0.14.0-0.18.0, semantics §20.7)",
    "internvl": "LMDeploy's InternVLChatModel (lmdeploy/vl/model/internvl.py) takes images only: no video path "
    "(semantics §20.7)",
    "glm-4.1v": "LMDeploy's GLM4_1_VisionModel registers no video token, so VisionModel.preprocess fails on a video "
    "item (TypeError in get_mm_items_offset), and its PyTorch model's preprocess_input reads image items only: no "
    "video path (every release 0.14.0-0.18.0, semantics §20.7)",
}


def video_paths(source: Source, family: str) -> list[Qwen3VideoPath]:
    """LMDeploy's video path for ``family`` at its default serving setting (``LMDEPLOY``: OpenCV, the first backend
    LMDeploy finds, with ``LMDEPLOY_VIDEO_BACKEND`` unset); `video.Unsupported` ``n/a`` for a family with none."""
    if family in NO_VIDEO:
        raise Unsupported(f"n/a: {NO_VIDEO[family]}")
    if family not in FAMILIES:
        raise Unsupported(f"n/a: no LMDeploy video path for model family {family!r}; deferlab checks: qwen3-vl")
    return [Qwen3VideoPath(source)]


def backend_path(source: Source, family: str, backend: str) -> Qwen3VideoPath:
    """The same path with ``LMDEPLOY_VIDEO_BACKEND=backend`` (one of `BACKENDS`) for its decode."""
    video_paths(source, family)  # the family's n/a, if any
    if backend not in BACKENDS:
        raise Unsupported(
            f"LMDeploy video backend {backend!r} is not one LMDeploy accepts; accepted: {', '.join(BACKENDS)}"
        )
    return Qwen3VideoPath(source, backend=backend)


class Qwen3VideoPath:
    """LMDeploy's Qwen3-VL video path (`reference.system.video.VideoPath`)."""

    family = "qwen3-vl"
    label = LABEL
    real_code = True

    def __init__(self, source: Source, backend: str | None = None, config: Mapping[str, Any] | None = None) -> None:
        missing = [c for c in COMPANIONS[self.family] if c not in source.companions]
        if missing:
            raise Unsupported(
                f"n/a: {source.name} was loaded without its {', '.join(missing)} companion(s), which LMDeploy's "
                f"Qwen3-VL video path computes with; load it with companions={COMPANIONS[self.family]!r} in a "
                "process that has not imported transformers"
            )
        self.source = source
        self.system = source.name
        self.backend = backend
        self.name = f"{self.system} (qwen3-vl, video{'' if backend is None else ', ' + backend})"
        self._loader = source.module(LOADER)
        self._media = source.module(MEDIA)
        # The defaults a request without options gets: VideoMediaIO's num_frames, the loader's fps.
        self.default_num_frames = inspect.signature(self._media.VideoMediaIO).parameters["num_frames"].default
        self.default_fps = inspect.signature(self._loader.OpenCVVideoLoader.load_bytes).parameters["fps"].default
        self.processor = Qwen3Processor(source, config)
        self._ran: dict[str, str] = {}

    # --- the request's options, as LMDeploy's server takes them ------------------------------------------------
    def media_io_kwargs(self, request: VideoRequest) -> dict[str, Any]:
        """``media_io_kwargs["video"]``: what reaches ``VideoMediaIO`` (``fps``, ``num_frames``)."""
        if request.total_pixels is not None:
            raise Unsupported(
                "LMDeploy takes no total_pixels for a video: media_io_kwargs reach the loader (fps, num_frames), "
                "mm_processor_kwargs['video'] only min_pixels / max_pixels (semantics §20.7)"
            )
        return {k: v for k, v in (("fps", request.fps), ("num_frames", request.num_frames)) if v is not None}

    @staticmethod
    def mm_processor_kwargs(request: VideoRequest) -> dict[str, Any]:
        """``mm_processor_kwargs["video"]``: what reaches ``get_override_size`` (``min_pixels``, ``max_pixels``)."""
        return {k: v for k, v in (("min_pixels", request.min_pixels), ("max_pixels", request.max_pixels)) if v}

    # --- pixel-free -----------------------------------------------------------------------------------------
    def sample(self, clip: Clip, request: VideoRequest) -> list[int]:
        """LMDeploy's ``VideoLoader.smart_nframes`` on the clip's metadata, with the loader's arguments: the count
        and rate from the request (else ``VideoMediaIO``'s 32 and the loader's -1), ``duration = N / fps`` (0 when
        the rate is unknown) as ``OpenCVVideoLoader.load_bytes`` computes it."""
        media = self.media_io_kwargs(request)
        num_frames = media.pop("num_frames", self.default_num_frames)
        fps = media.get("fps", self.default_fps)
        duration = clip.frames / clip.fps if clip.fps > 0 else 0
        _, indices = self._loader.VideoLoader.smart_nframes(clip.frames, num_frames, fps, duration)
        self._ran["sample"] = f"{LOADER}.VideoLoader.smart_nframes"
        return [int(i) for i in indices]

    def metadata(self, clip: Clip, indices: list[int]) -> dict[str, Any]:
        """The metadata dict ``OpenCVVideoLoader.load_bytes`` returns beside the frames (its keys and values)."""
        duration = clip.frames / clip.fps if clip.fps > 0 else 0
        return {"total_num_frames": clip.frames, "fps": clip.fps, "duration": duration, "video_backend": "opencv",
                "frames_indices": list(indices)}  # fmt: skip

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """Frames by LMDeploy's sampler, then the pinned processor with the kwargs LMDeploy's ``preprocess`` passes:
        size, padding, ``video_grid_thw``, tokens and the prompt's timestamps (semantics §20.7). A refusal of
        LMDeploy's or the processor's code (one frame; no frame rate) is `video.Refused` naming it."""
        indices = self.sample(clip, request)
        try:
            size, grid, tokens, padded = self.processor.geometry(
                len(indices), clip.width, clip.height, self.mm_processor_kwargs(request)
            )
            times = self.processor.times(indices, clip.fps)
        except (ValueError, ZeroDivisionError) as exc:
            raise Refused(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
        notes = tuple(
            f"{name} {{'video': {given}}}"
            for name, given in (("media_io_kwargs", self.media_io_kwargs(request)),
                                ("mm_processor_kwargs", self.mm_processor_kwargs(request)))
            if given
        )  # fmt: skip
        # The processor's patchify repeats the last frame to fill the temporal patch: the plan keeps the repeats.
        taken = tuple(indices) + (indices[-1],) * padded
        return VideoPlan(taken, size, grid, tokens, tuple(times), padded, notes)

    # --- on encoded bytes ---------------------------------------------------------------------------------------
    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """LMDeploy's connector on the bytes as a client sends them (a ``data:video/...;base64`` URI): ``load_from_url``
        -> ``VideoMediaIO.load_base64`` -> the backend LMDeploy picks (or ``self.backend``) -> its ``load_bytes``."""
        backend = self.backend or next((b for b in BACKENDS if importlib.util.find_spec(b) is not None), None)
        if backend is None or importlib.util.find_spec(backend) is None:
            wanted = BACKENDS.get(backend or "cv2", backend)
            raise Unsupported(
                f"LMDeploy's video backend {backend or 'cv2'!r} is not installed here: pip install {wanted}"
            )
        kind = "webm" if data[:4] == b"\x1aE\xdf\xa3" else "mp4"
        url = f"data:video/{kind};base64," + base64.b64encode(data).decode("ascii")
        media_io = self._media_io(self.media_io_kwargs(request))
        frames, meta = self.source.module(CONNECTION).load_from_url(url, media_io)
        self._ran["decode"] = (
            f"{CONNECTION}.load_from_url -> {MEDIA}.VideoMediaIO.load_base64 -> "
            f"{type(media_io.video_loader).__module__}.{type(media_io.video_loader).__qualname__}.load_bytes"
        )
        frames = np.asarray(frames.numpy() if hasattr(frames, "numpy") else frames)
        try:  # the request goes on to the processor, which refuses some kept counts (one frame): as `plan` does
            self.processor.geometry(len(frames), frames.shape[2], frames.shape[1], self.mm_processor_kwargs(request))
        except (ValueError, ZeroDivisionError) as exc:
            raise Refused(
                f"LMDeploy's processor refuses the {len(frames)} frame(s) its loader kept: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        indices = meta.get("frames_indices")
        return DecodedVideo(
            frames=frames,
            indices=None if indices is None else tuple(int(i) for i in indices),
            fps=float(meta.get("fps") or 0.0),
            total=int(meta.get("total_num_frames") or 0),
        )

    def _media_io(self, kwargs: dict[str, Any]) -> Any:
        """``VideoMediaIO(image_io=ImageMediaIO(), **media_io_kwargs['video'])`` as the server builds it; a chosen
        backend through ``LMDEPLOY_VIDEO_BACKEND``, the variable LMDeploy reads (restored after)."""
        image_io = self.source.module(IMAGE).ImageMediaIO()
        if self.backend is None:
            return self._media.VideoMediaIO(image_io=image_io, **kwargs)
        before = os.environ.get("LMDEPLOY_VIDEO_BACKEND")
        os.environ["LMDEPLOY_VIDEO_BACKEND"] = self.backend
        try:
            return self._media.VideoMediaIO(image_io=image_io, **kwargs)
        finally:
            if before is None:
                os.environ.pop("LMDEPLOY_VIDEO_BACKEND", None)
            else:
                os.environ["LMDEPLOY_VIDEO_BACKEND"] = before

    def provenance(self) -> dict[str, str]:
        """Per step, the function that ran (``module.qualname``) or ``modelled: why``."""
        steps = {
            "sample": f"{LOADER}.VideoLoader.smart_nframes",
            "sample arguments": "modelled: duration = frames / fps (0 when unknown) and the metadata dict, as "
            "OpenCVVideoLoader.load_bytes computes them inline while it decodes; num_frames and fps defaults read "
            "off VideoMediaIO's and the loader's signatures",
            "decode": self._ran.get("decode", f"{CONNECTION}.load_from_url -> {MEDIA}.VideoMediaIO (not run yet)"),
            **self.processor.provenance(),
        }
        for name, companion in self.source.companions.items():
            steps[f"companion {name}"] = f"{name} {companion.version} ({companion.how})"
        return steps
