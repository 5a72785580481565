"""vLLM's served video path for Qwen2.5-VL and Qwen3-VL, run for real on a CPU (semantics §20.6).

Why this shape: a client sends a ``video_url``; vLLM picks its loader by the checkpoint's video processor class,
samples frame indices from the container's metadata, reads those frames, and hands them with a metadata dict to the
checkpoint's transformers processor (the release's pinned companion), which resizes, pads and patchifies; vLLM adds
the times (Qwen3-VL's timestamps are its own; Qwen2.5-VL's ``second_per_grid_ts`` is the processor's). Every step
here is that code, imported from the release:

* ``plan`` (pixel-free, for §20.3's grid): the release's ``VideoMediaIO`` and the loader it builds for the
  checkpoint run for real, with one stand-in (`video_standin`): ``vllm.multimodal.video.decode_video`` (the codec
  call inside the loader's ``load_bytes``, 0.29.0 on; before, the OpenCV mixin's methods it calls inline) is
  replaced, for the call, by a reader that reports the `Clip`'s metadata as the OpenCV codec reads it, lets the
  loader's own ``compute_frames_index_to_sample`` choose, and serves each chosen frame once in increasing order
  (OpenCV's ``read_frames``) as a 1x1 frame. The processor then runs for real on black frames of
  the clip's size (memoized by what it depends on: frame count and size, kwargs, and the metadata when it samples).
* ``decode`` (bytes): the release's ``MediaConnector.fetch_video`` on the bytes a client sends, as a ``file:`` URL
  (a data URI's base64 step is ``pybase64``, not installed here; the rest is the same ``load_bytes``), with the
  loader vLLM picks and the OpenCV codec (vLLM's default); the frames the processor keeps (Qwen3-VL resamples a clip read
  whole) are taken by the processor's own ``sample_frames``.

Options: ``fps`` and ``num_frames`` go where vLLM samples, the loader's per-request ``media_io_kwargs["video"]``;
``min_pixels`` / ``max_pixels`` are ``mm_processor_kwargs``; ``total_pixels`` is no vLLM option (`Unsupported`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
from typing import Any

import numpy as np

from deferlab.impl.image_bytes import folder as bytes_folder
from deferlab.impl.vllm import video_checkpoint as checkpoint
from deferlab.impl.vllm import video_geometry as geometry
from deferlab.impl.vllm import video_standin as standin
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.video import Clip, DecodedVideo, Refused, Unsupported, VideoPath, VideoPlan, VideoRequest

LABEL = "VLLM"
VIDEO = "vllm.multimodal.video"
MEDIA = "vllm.multimodal.media.video"
CONNECTOR = "vllm.multimodal.media.connector"
PROCESSOR_NAME = "vllm.transformers_utils.processor"
COMPANIONS = {family: ("transformers", "torchvision") for family in (*checkpoint.FAMILIES, "glm-4.1v", "gemma4")}
# vLLM's codecs (video_decoders._BACKEND_OPTION_DEFAULTS) and what each needs here.
CODECS = {
    "opencv": ("cv2", "opencv-python-headless"),
    "torchcodec": ("torchcodec", "torchcodec"),
    "pynvvideocodec": ("PyNvVideoCodec", "PyNvVideoCodec and an NVIDIA GPU"),
    "deepstream": ("pyds", "NVIDIA DeepStream and a GPU"),
}
# deferlab's other families: whether vLLM serves their video, and why no path is judged (semantics §20.6).
NO_PATH = {
    "kimi-k3": "vLLM's Kimi-K3 path takes images only",
    "mistral3": "vLLM's Mistral 3 takes images only",
    "gemma3": "vLLM's Gemma 3 takes images only",
    "internvl": "vLLM serves InternVL video (generic opencv loader, 32 frames) but deferlab has no trained video "
    "side for InternVL (semantics §20.1 covers the Qwen checkpoints)",
}
_RESAMPLES = {"qwen2.5-vl": False, "qwen3-vl": True}  # vLLM passes the loader's do_sample_frames to the processor


def _hands_metadata(models: Any, family: str) -> bool:
    """Whether the release hands the loader's metadata to the processor (read off the loaded classes, semantics
    §20.6): Qwen3-VL's video loop always does; Qwen2.5-VL's from ``_get_hf_mm_inputs`` (0.31.0) on, before which
    its parser drops the metadata and transformers' ``sampled_fps`` falls back (vLLM #47736)."""
    return family != "qwen2.5-vl" or "_get_hf_mm_inputs" in vars(models.Qwen2_5_VLMultiModalProcessor)


def video_paths(source: Source, family: str) -> list[VideoPath]:
    """vLLM's video paths for ``family`` on the loaded release: the serving default (``VLLM``, the OpenCV codec).
    `Unsupported` ("n/a: ...") for a family with no path here, or a tree loaded without the companions."""
    if family == "glm-4.1v":  # its own loader, processor hand-off and times (`video_glm`, semantics §20.6)
        from deferlab.impl.vllm.video_glm import VLLMGlmVideoPath

        return [VLLMGlmVideoPath(source)]
    if family == "gemma4":  # the generic opencv loader, frames through the image processor (`video_gemma4`, §20.10)
        from deferlab.impl.vllm.video_gemma4 import VLLMGemma4VideoPath

        return [VLLMGemma4VideoPath(source)]
    if family not in checkpoint.FAMILIES:
        why = NO_PATH.get(family, f"no vLLM video path for {family!r} in deferlab")
        raise Unsupported(f"n/a: {why}; accepted: {', '.join((*checkpoint.FAMILIES, 'glm-4.1v', 'gemma4'))}")
    return [VLLMVideoPath(source, family)]


class VLLMVideoPath:
    """vLLM's video path for one Qwen family on one release (`reference.system.video.VideoPath`)."""

    label = LABEL
    real_code = True

    def __init__(self, source: Source, family: str, codec: str = "opencv", exact: bool = False) -> None:
        if family not in checkpoint.FAMILIES:
            raise Unsupported(f"n/a: no vLLM video path for {family!r}; accepted: {', '.join(checkpoint.FAMILIES)}")
        if codec not in CODECS:
            raise Unsupported(f"vLLM has no video codec {codec!r}; accepted: {', '.join(CODECS)}")
        missing = [c for c in COMPANIONS[family] if c not in source.companions]
        if missing:
            raise Unsupported(f"n/a: {source.name} was loaded without {', '.join(missing)}, which its video path runs")
        self.source, self.family, self.codec, self.exact = source, family, codec, exact
        self.spec = checkpoint.FAMILIES[family]
        self.system = source.name
        self.name = f"{self.system} ({family}, video)"
        self._video = source.module(VIDEO)
        self._media = source.module(MEDIA).VideoMediaIO
        self._image_io = source.module("vllm.multimodal.media.image").ImageMediaIO
        models = source.module(self.spec.info_module)
        self._info_cls = getattr(models, self.spec.info_class)
        self._hands_metadata = _hands_metadata(models, family)
        folder = checkpoint.folder(family)
        self.processor_name, self.backend, self._lookup_error = None, None, None
        try:  # the release's own lookup, which a request runs first (fetch_video): a failure refuses every clip
            self.processor_name = source.module(PROCESSOR_NAME).get_video_processor_cls_name_from_config(folder)
            self.backend = self._video.get_video_loader_backend_for_processor(self.processor_name)
        except Exception as exc:  # noqa: BLE001 - vLLM's own refusal (before 0.32.0: transformers' dict mapping)
            self._lookup_error = exc
        self.processor = checkpoint.video_processor(family)
        self._info = object.__new__(self._info_cls)  # only _get_video_second_idx runs: it asks for the processor
        self._info.get_video_processor = lambda **_: self.processor
        self._lock = threading.Lock()
        self._memo: dict[tuple, tuple[tuple[int, int, int], tuple[int, ...] | None, Any]] = {}
        self._ran: dict[str, str] = {}

    # --- the request as vLLM takes it -------------------------------------------------------------------------------
    def _media_kwargs(self, request: VideoRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """``media_io_kwargs["video"]`` for the request, merged by the release (``VideoMediaIO.merge_kwargs``) over
        no server defaults, with the loader ``fetch_video`` picks; and the notes on options vLLM ignores."""
        if not isinstance(request, VideoRequest):
            raise InputTypeError(f"request must be a VideoRequest, got {type(request).__name__}")
        if request.total_pixels is not None:
            raise Unsupported(
                f"{self.system} takes no total_pixels (neither a media_io nor an mm_processor kwarg of its "
                f"{self.spec.display} path); accepted: fps, num_frames, min_pixels, max_pixels"
            )
        if self._lookup_error is not None:  # vLLM's get_video_loader_backend_for_processor refused the checkpoint:
            e = self._lookup_error  # a fresh copy per request, carrying vLLM's own frames for the findings
            raise type(e)(*e.args).with_traceback(e.__traceback__)
        runtime = {k: v for k, v in (("fps", request.fps), ("num_frames", request.num_frames)) if v is not None}
        merged = dict(self._media.merge_kwargs(None, runtime))
        if self.backend:
            merged.setdefault("video_backend", self.backend)
        if self.codec != "opencv":
            merged["backend"] = self.codec
        notes = ()
        if request.num_frames is not None and self.backend in ("qwen2_vl", "qwen3_vl"):
            notes = (f"num_frames={request.num_frames}: accepted by VideoMediaIO, ignored by vLLM's {self.backend} "
                     "loader (it samples by fps; semantics §20.6)",)  # fmt: skip
        return merged, notes

    def _processor_kwargs(self, request: VideoRequest) -> dict[str, Any]:
        """The video kwargs vLLM hands the processor for ``min_pixels`` / ``max_pixels`` (``mm_processor_kwargs``).
        From 0.32.0 (``_complete_mm_processor_size_aliases`` on the info class): the size aliases completed by the
        release, and Qwen3-VL folds them into ``size`` and drops the flat keys. Before: Qwen2.5-VL hands the flat
        keys on as given; Qwen3-VL's video loop folds them into a copy of the processor's ``size`` and keeps them
        (semantics §20.6, older releases)."""
        given = {k: v for k, v in (("min_pixels", request.min_pixels), ("max_pixels", request.max_pixels)) if v}
        if not given:
            return {}
        where = f"{self.spec.info_module}.{self.spec.info_class}"
        if not hasattr(self._info_cls, "_complete_mm_processor_size_aliases"):
            kwargs = dict(given)
            if _RESAMPLES[self.family]:
                edges = {"shortest_edge": given.get("min_pixels"), "longest_edge": given.get("max_pixels")}
                size = dict(self.processor.size)
                kwargs["size"] = size | {k: v for k, v in edges.items() if v is not None}
            self._ran["processor kwargs"] = (
                "restated: the release's inline size fold (Qwen3-VL's video loop: size edges from min_pixels / "
                "max_pixels, flat keys kept)" if _RESAMPLES[self.family] else "the flat kwargs as given (no fold)"
            )  # fmt: skip
            return kwargs
        kwargs = dict(self._info_cls._complete_mm_processor_size_aliases(given))
        if _RESAMPLES[self.family]:
            kwargs["size"] = self._info_cls._get_vision_size(kwargs, default_size=self.processor.size)
            kwargs.pop("min_pixels", None)
            kwargs.pop("max_pixels", None)
        self._ran["processor kwargs"] = f"real: {where}._complete_mm_processor_size_aliases" + (
            " and _get_vision_size" if _RESAMPLES[self.family] else ""
        )
        return kwargs

    # --- the loader, on metadata only -----------------------------------------------------------------------------
    def _load(self, clip: Clip, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The loader's metadata for ``clip`` (``VideoMediaIO.load_bytes`` -> the loader's ``load_bytes``), with
        the container read stood in for (`video_standin`: ``decode_video``, or the OpenCV mixin before 0.29.0)."""
        metadata, loader = standin.load(self, clip, kwargs)
        self._ran["sampling"] = (
            f"real: {VIDEO}.{loader.__qualname__}.compute_frames_index_to_sample via {MEDIA}.VideoMediaIO.load_bytes "
            f"(stand-in: {standin.where(self._video)} report the Clip's metadata and serve 1x1 frames)"
        )
        return metadata

    # --- the processor --------------------------------------------------------------------------------------------
    def _process(self, n: int, clip: Clip, metadata: dict[str, Any], kwargs: dict[str, Any]) -> tuple:
        """(grid, the processor's own indices into the frames handed or None, its output metadata), memoized by
        what they depend on (`video_geometry`: ``exact`` runs the processor's call, ``fast`` its own functions)."""
        call = dict(kwargs)
        sampling = bool(self.processor.do_sample_frames)
        if _RESAMPLES[self.family]:
            call["do_sample_frames"] = sampling = bool(metadata["do_sample_frames"])
        whole = (metadata["total_num_frames"], metadata["fps"]) if sampling else None
        key = (n, clip.width, clip.height, json.dumps(call, sort_keys=True, default=str), whole)
        if key not in self._memo:
            run = geometry.exact if self.exact else geometry.fast
            self._memo[key] = run(self.processor, n, clip.width, clip.height, self._metadata(metadata), call)
        return self._memo[key]

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """vLLM's frames, geometry, tokens and times for ``clip`` (semantics §20.6), nothing decoded."""
        if not isinstance(clip, Clip):
            raise InputTypeError(f"clip must be a Clip, got {type(clip).__name__}")
        kwargs, notes = self._media_kwargs(request)
        pkw = self._processor_kwargs(request)
        metadata = self._load(clip, kwargs)
        valid = list(metadata["frames_indices"])
        grid, chosen, got = self._process(len(valid), clip, metadata, pkw)
        if chosen is None:  # the processor kept the frames as read: this clip's own metadata (the memo's is another's)
            taken, got = tuple(valid), self._metadata(metadata if self._hands_metadata else None, len(valid))
        else:
            taken = tuple(valid[i] for i in chosen)
        vp = self.processor
        t, h, w = grid
        if _RESAMPLES[self.family]:
            md = self._metadata(metadata)
            times = tuple(float(x) for x in self._info._get_video_second_idx(
                metadata=md, do_sample_frames=bool(metadata["do_sample_frames"]),
                sampled_fps=pkw.get("fps"), sampled_num_frames=pkw.get("num_frames")))  # fmt: skip
            self._ran["times"] = f"real: {self.spec.info_module}.{self.spec.info_class}._get_video_second_idx"
        else:
            step = vp.temporal_patch_size / got.sampled_fps
            times = tuple(k * step for k in range(t))
            self._ran["times"] = ("restated: second_per_grid_ts = temporal_patch_size / transformers VideoMetadata."
                                  "sampled_fps (Qwen2_5_VLProcessor._process_videos' line), x t")  # fmt: skip
        pad = t * vp.temporal_patch_size - len(taken)  # patchify repeats the last frame: kept in the indices
        return VideoPlan(
            indices=taken + taken[-1:] * pad,
            size=(w * vp.patch_size, h * vp.patch_size),
            grid=grid,
            tokens=t * h * w // vp.merge_size**2,
            times=times,
            padded=pad,
            notes=notes,
        )

    @staticmethod
    def _metadata(metadata: dict[str, Any] | None, n: int = 0) -> Any:
        """The ``VideoMetadata`` vLLM builds from the loader's dict (``do_sample_frames`` left out); None: a release
        that hands the processor no metadata, which then makes its own for the ``n`` frames (transformers'
        ``make_batched_metadata``: no fps, so ``sampled_fps`` falls back to 24)."""
        from transformers.video_utils import VideoMetadata

        if metadata is None:
            return VideoMetadata(total_num_frames=n, fps=None, duration=None, frames_indices=list(range(n)))
        return VideoMetadata(**{k: v for k, v in metadata.items() if k != "do_sample_frames"})

    # --- bytes ----------------------------------------------------------------------------------------------------
    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """The frames vLLM's own loader reads from ``data`` sent as a file (a ``file:`` URL under the server's
        ``--allowed-local-media-path``: a data URI's base64 step is ``pybase64``, not installed here), and those its
        processor keeps."""
        if not isinstance(data, bytes | bytearray):
            raise InputTypeError(f"data must be the encoded video's bytes, got {type(data).__name__}")
        module, install = CODECS[self.codec]
        if importlib.util.find_spec(module) is None:
            raise Unsupported(f"vLLM's {self.codec!r} video codec needs {install}: install it to decode here")
        kwargs, _ = self._media_kwargs(request)
        video_backend = kwargs.pop("video_backend", None)
        connector = self.source.module(CONNECTOR).MediaConnector(
            media_io_kwargs={"video": kwargs}, allowed_local_media_path=str(bytes_folder())
        )
        path = bytes_folder() / (hashlib.sha256(bytes(data)).hexdigest()[:24] + ".video")
        if not path.exists():
            path.write_bytes(bytes(data))
        processor = self.processor_name if video_backend == self.backend else None
        frames, metadata = connector.fetch_video(path.as_uri(), video_processor=processor).media
        frames = np.asarray(frames)
        indices = list(metadata["frames_indices"])
        if _RESAMPLES[self.family] and metadata["do_sample_frames"]:
            kept = [int(i) for i in self.processor.sample_frames(self._metadata(metadata))]
            frames, indices = frames[kept], [indices[i] for i in kept]
            self._ran["decode resample"] = f"real: transformers {type(self.processor).__name__}.sample_frames"
        self._ran["decode"] = f"real: {CONNECTOR}.MediaConnector.fetch_video (a file: URL, codec {self.codec})"
        read = Clip(int(metadata["total_num_frames"]), float(metadata["fps"]), frames.shape[2], frames.shape[1])
        try:  # the request goes on to the processor, which refuses some counts (one frame): as `plan` does
            self._process(len(metadata["frames_indices"]), read, metadata, self._processor_kwargs(request))
        except (ValueError, ZeroDivisionError) as exc:
            raise Refused(
                f"vLLM's processor refuses the {len(frames)} frame(s) its loader kept: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        return DecodedVideo(frames, tuple(indices), float(metadata["fps"]), int(metadata["total_num_frames"]))

    def provenance(self) -> dict[str, str]:
        vp = type(self.processor)
        steps = {
            "loader": f"real: {VIDEO}.get_video_loader_backend_for_processor({self.processor_name!r}) -> "
            + (
                f"{self.backend!r}"
                if self._lookup_error is None
                else f"{type(self._lookup_error).__name__}: {self._lookup_error} (every request refused)"
            )
            + f", from {PROCESSOR_NAME}.get_video_processor_cls_name_from_config on the checkpoint "
            f"files ({checkpoint.SOURCES[self.family]})",
            "geometry": (
                f"real: transformers {vp.__module__}.{vp.__qualname__}.__call__ on black frames of the clip's size "
                "with vLLM's metadata and kwargs"
                if self.exact
                else f"real: transformers {vp.__module__}.{vp.__qualname__}._standardize_kwargs and sample_frames, "
                f"{vp.__module__}.smart_resize (restated: the arguments its resize passes, patchify's temporal "
                "padding; held to the processor's call by tests/impl/vllm/test_video.py)"
            )
            + " (memoized by frame count, size, kwargs and, when it samples, the metadata)",
            "tokens": "restated: grid product // merge_size**2 (vLLM's prompt replacement, qwen2_vl.py)",
            "options": "fps, num_frames: media_io_kwargs['video'] (the loader); min_pixels, max_pixels: "
            "mm_processor_kwargs; the processor wrapper and tokenizer are not built",
            **self._ran,
        }
        for name, companion in self.source.companions.items():
            steps[f"companion {name}"] = f"{name} {companion.version} ({companion.how})"
        return steps
