"""SGLang's served video path for the Qwen families, as `reference.system.video.VideoPath`s (semantics §20.5).

Why these functions: SGLang samples and pre-resizes a Qwen video itself (``processors/qwen_vl.py``:
``smart_nframes``, then ``preprocess_video``, which computes the indices inline, fetches the frames from a
``VideoDecoderWrapper`` and resizes them with torchvision), then hands the frames to the checkpoint's transformers
processor (the release's pinned transformers, a loader companion), which resizes again, patchifies and gives
the grid and the times. The plan runs SGLang's own two functions on a stand-in reader (the clip's frame count and
frame rate, stride-0 frames of its size, the indices it was asked for recorded) with torchvision's resize answered
by a recorder of its target, then the pinned transformers' own pixel-free functions for the grid and the times:
nothing is decoded, so the 6,000-clip grid stays cheap. ``decode`` runs SGLang's own loader (``load_video``: a data
URI to bytes, torchcodec or decord) and the same ``preprocess_video`` on the frames it decodes.

The options a user passes reach SGLang's Qwen path only as the server's ``--mm-process-config`` video dict
(``fps``, ``nframes``, ``min_pixels``, ``max_pixels``, ``total_pixels``); a request's own ``video_url.fps`` is read
by the GLM-4V processor only. Each plan's notes say so (semantics §20.5).
"""

from __future__ import annotations

import logging
import types
from typing import Any

import torch

from deferlab.impl.sglang.families import common
from deferlab.impl.sglang.runtime import capture_locals, run_with_globals
from deferlab.impl.sglang.sources import SGLangSourceError
from deferlab.impl.sglang.video_reader import DECODER, opened, reader_class
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.video import Clip, DecodedVideo, Refused, Unsupported, VideoPlan, VideoRequest

MODULE = "sglang.srt.multimodal.processors.qwen_vl"
LABEL = "SGLANG"
FAMILIES = ("qwen2.5-vl", "qwen3-vl")
COMPANIONS = {family: ("transformers", "torchvision") for family in (*FAMILIES, "glm-4.1v", "gemma4")}
# The checkpoints' video processors (semantics §20.4): Qwen/Qwen2.5-VL-7B-Instruct ships no
# video_preprocessor_config.json (transformers builds Qwen2VLVideoProcessor from preprocessor_config.json's
# min/max_pixels), Qwen/Qwen3-VL-8B-Instruct's video_preprocessor_config.json gives size 4096..25165824.
VIDEO_PROCESSORS = {
    "qwen2.5-vl": ("Qwen2VLVideoProcessor", {"size": {"shortest_edge": 3136, "longest_edge": 12845056}}),
    "qwen3-vl": (
        "Qwen3VLVideoProcessor",
        {"size": {"shortest_edge": 4096, "longest_edge": 25165824}, "image_mean": [0.5] * 3, "image_std": [0.5] * 3},
    ),
}
# VideoRequest's option -> the key of SGLang's server video dict (QWEN_VIDEO_PREPROCESS_CONFIG_KEYS)
OPTION_KEYS = {
    "fps": "fps",
    "num_frames": "nframes",
    "min_pixels": "min_pixels",
    "max_pixels": "max_pixels",
    "total_pixels": "total_pixels",
}
_GRID = ("resized_height", "resized_width", "grid_t", "grid_h", "grid_w")
_QUIET = logging.getLogger("deferlab.sglang.video.quiet")
_QUIET.disabled = True  # preprocess_video warns per call when max_pixels exceeds its limit: not a refusal
OPTIONS_NOTE = (
    "options as the server's --mm-process-config video dict (fps, nframes, min/max/total_pixels): SGLang's Qwen "
    "path ignores a request's own video_url options (only GLM-4V reads them)"
)


def server_video_config(request: VideoRequest) -> dict[str, Any]:
    """``request`` as SGLang's server video dict (semantics §20.5): every `VideoRequest` option has a key there."""
    if not isinstance(request, VideoRequest):
        raise InputTypeError(f"request must be a VideoRequest, got {type(request).__name__}")
    return {OPTION_KEYS[k]: v for k, v in request.given().items()}


class _Resize:
    """torchvision.transforms.functional.resize answered: records the target SGLang computed, returns no pixels
    (a stride-0 tensor of the target shape), so a 768-frame plan costs nothing."""

    def __init__(self) -> None:
        self.size: tuple[int, int] | None = None

    def resize(self, video: torch.Tensor, size: list[int], **_: Any) -> torch.Tensor:
        self.size = (int(size[0]), int(size[1]))
        return torch.zeros((1, 1, 1, 1), dtype=video.dtype).expand(video.shape[0], video.shape[1], *self.size)


def _drive(coro: Any) -> Any:
    """Run a coroutine that never awaits anything pending (``preprocess_video``) to its result."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("preprocess_video awaited something: SGLang's code changed, deferlab's driver must follow")


class SGLangVideoPath:
    """SGLang's video path for one Qwen family: its own sampling and pre-resize, then the pinned transformers'
    video processor with the checkpoint's config, as ``_process_mm_data_uncached`` hands it over (§20.5)."""

    label = LABEL
    real_code = True

    def __init__(self, source: Any, family: str) -> None:
        src = common.source_of(source)
        missing = [c for c in COMPANIONS[family] if c not in getattr(src, "companions", {})]
        if missing:
            raise SGLangSourceError(
                f"sglang source {src.spec!r} (version {src.version}) was loaded without the companions {missing} its "
                f"{family} video path computes with; accepted: sources.load(spec, companions={COMPANIONS[family]})"
            )
        self.source, self.family = src, family
        self.system = f"sglang-{src.version}"
        self.qwen = common.require(src, MODULE, "Qwen-VL")
        self.decoder = src.module(DECODER)
        self.transformers = src.companions["transformers"]
        cls_name, config = VIDEO_PROCESSORS[family]
        self.vp = getattr(self.transformers.module("transformers"), cls_name)(**config)
        self.video_utils = self.transformers.module("transformers.video_utils")
        self.reader = reader_class(self.decoder.VideoDecoderWrapper)
        self.resize = _Resize()
        quiet = {"logger": _QUIET, "is_cpu": lambda: True}  # is_cpu: no pin_memory on a machine without CUDA
        self._plan_pre = run_with_globals(
            self.qwen.preprocess_video,
            torchvision=types.SimpleNamespace(transforms=types.SimpleNamespace(functional=self.resize)),
            **quiet,
        )
        self._decode_pre = run_with_globals(self.qwen.preprocess_video, **quiet)
        if family == "qwen3-vl":
            self.timestamps = self.transformers.module(
                "transformers.models.qwen3_vl.processing_qwen3_vl"
            ).Qwen3VLProcessor._calculate_timestamps
        self._record_standins()

    def _record_standins(self) -> None:
        pre = f"{MODULE}.preprocess_video"
        self.source.patch(
            f"{DECODER}.VideoDecoderWrapper",
            "plan: a subclass reporting the clip's frame count "
            "and fps, serving stride-0 frames of its size and recording the indices asked for",
        )
        self.source.patch(
            f"{pre}:torchvision",
            "plan: transforms.functional.resize answered by a recorder of SGLang's target size (no pixels)",
        )
        self.source.patch(
            f"{pre}:is_cpu,logger",
            "is_cpu answers True (no pin_memory without CUDA); its max_pixels warning is not logged",
        )

    def _preprocess(self, clip: Clip, config: dict[str, Any]) -> tuple[Any, dict[str, Any], list[int]]:
        reader = self.reader(clip)
        log, was = self.qwen.logger, self.qwen.logger.disabled
        log.disabled = True  # smart_nframes warns when fps asks for more frames than the clip has: not a refusal
        try:
            video, meta = _drive(self._plan_pre(reader, video_config=config))
        except Exception as exc:  # SGLang's own refusal (ValueError, AssertionError, ZeroDivisionError)
            raise Refused(
                f"SGLang refused {clip.frames}@{clip.fps:g} with {config}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}"
            ) from exc
        finally:
            log.disabled = was
        return video, meta, list(reader.asked or ())

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """SGLang's frames, the processor's size, grid and tokens, and the times the model is told (§20.5)."""
        if not isinstance(clip, Clip):
            raise InputTypeError(f"clip must be a Clip, got {type(clip).__name__}")
        config = server_video_config(request)
        video, meta, asked = self._preprocess(clip, config)
        n, _, pre_h, pre_w = (int(s) for s in video.shape)
        patches, seen = capture_locals(self.vp.get_num_of_video_patches, _GRID, n, pre_h, pre_w, {})
        grid = (int(seen["grid_t"]), int(seen["grid_h"]), int(seen["grid_w"]))
        tps, merge = self.vp.temporal_patch_size, self.vp.merge_size
        if self.family == "qwen2.5-vl":
            # no metadata handed over: the processor builds it (fps None) and second_per_grid_ts = tps / sampled_fps
            md = self.video_utils.make_batched_metadata([video], video_metadata=None)[0]
            step = tps / md.sampled_fps
            times = tuple(float(t * step) for t in range(grid[0]))
        else:
            times = tuple(float(t) for t in self.timestamps(None, meta["frames_indices"], meta["fps"], tps))
        padded = grid[0] * tps - n  # SGLang's count is even: none, unless its code changes
        return VideoPlan(
            indices=tuple(asked) + tuple(asked[-1:]) * padded,
            size=(int(seen["resized_width"]), int(seen["resized_height"])),
            grid=grid,
            tokens=int(patches) // merge**2,
            times=times,
            padded=padded,
            notes=(OPTIONS_NOTE, f"SGLang's own pre-resize to {pre_w}x{pre_h} (factor 28, bilinear) first"),
            pre_size=(pre_w, pre_h),
        )

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """SGLang's ``load_video`` on the bytes a client sends (as a file: its data-URI branch needs pybase64), then
        ``preprocess_video`` on what it decodes: the frames it fetched (before its resize), the indices it took,
        the container's fps and frame count (semantics §20.5)."""
        with opened(self.source, data) as (reader, _):
            return self._fetch(reader, request)

    def _fetch(self, reader: Any, request: VideoRequest) -> DecodedVideo:
        fetched: list[torch.Tensor] = []
        own = reader.get_frames_as_tensor  # its own method, answering the CPU (`video_reader.opened`)

        def fetch(indices: list) -> torch.Tensor:
            frames = own(indices)
            fetched.append(frames)
            return frames

        reader.get_frames_as_tensor = fetch
        total, fps = len(reader), float(reader.avg_fps)
        try:
            _, meta = _drive(self._decode_pre(reader, video_config=server_video_config(request)))
        except Exception as exc:
            raise Refused(f"SGLang refused the decoded clip: {type(exc).__name__}: {exc}") from exc
        frames = fetched[0].cpu().numpy() if fetched else None
        return DecodedVideo(frames, tuple(int(i) for i in meta["frames_indices"]), fps, total)

    def provenance(self) -> dict[str, str]:
        tf = f"transformers {self.transformers.version}"
        cls_name = VIDEO_PROCESSORS[self.family][0]
        times = (
            f"transformers.video_utils.make_batched_metadata + VideoMetadata.sampled_fps ({tf}): "
            "second_per_grid_ts = temporal_patch_size / sampled_fps, as processing_qwen2_5_vl computes it"
            if self.family == "qwen2.5-vl"
            else f"transformers.models.qwen3_vl.processing_qwen3_vl.Qwen3VLProcessor._calculate_timestamps ({tf})"
        )
        return {
            "sampling": f"{MODULE}.smart_nframes (own), inside {MODULE}.preprocess_video (own)",
            "indices": f"{MODULE}.preprocess_video (own): the indices it asked the reader for",
            "reader": f"stand-in: a {DECODER}.VideoDecoderWrapper subclass over the clip's metadata (no decoding)",
            "pre_resize": f"{MODULE}.preprocess_video (own) -> {MODULE}.smart_resize (own); "
            "torchvision.transforms.functional.resize answered by a recorder of the target (stand-in)",
            "geometry": f"{cls_name}.get_num_of_video_patches ({tf}, the checkpoint's config; locals at return)",
            "tokens": "modelled: patches // merge_size**2, as the processor's _get_num_multimodal_tokens and "
            "SGLang's build_input_ids count them",
            "times": times,
            "decode": "sglang.srt.utils.common.load_video (own) on a file of the bytes -> VideoDecoderWrapper "
            f"(torchcodec, else decord; get_frames_as_tensor with _is_cpu_engine answered True), then "
            f"{MODULE}.preprocess_video (own; is_cpu answered True)",
        }


def video_paths(source: Any, family: str) -> list[SGLangVideoPath]:
    """SGLang's video paths for ``family`` (semantics §20.5): one, labelled SGLANG, for the Qwen families."""
    if family in FAMILIES:
        return [SGLangVideoPath(source, family)]
    if family == "glm-4.1v":  # its own module: SGLang's GLM-4V processor (semantics §20.5)
        from deferlab.impl.sglang.video_glm import SGLangGlmVideoPath

        return [SGLangGlmVideoPath(source)]
    if family == "gemma4":  # its own module: SGLang's Gemma 4 processor (semantics §20.10(b))
        from deferlab.impl.sglang.video_gemma4 import SGLangGemma4VideoPath

        return [SGLangGemma4VideoPath(source)]
    why = {
        "kimi-k3": "SGLang's Kimi-K3 processor refuses video ('Kimi-K3 supports image input only')",
        "internvl": "InternVL's checkpoints name no video processor to be the trained side (semantics §20.1)",
    }.get(family, "SGLang's video path in deferlab covers the Qwen families, GLM-4.1V and Gemma 4 only")
    raise Unsupported(
        f"n/a: no SGLang video path for {family!r}: {why}; accepted: {', '.join(FAMILIES)}, glm-4.1v, gemma4"
    )
