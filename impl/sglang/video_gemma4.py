"""SGLang's served video path for Gemma 4, as a `reference.system.video.VideoPath` (semantics §20.10(b), SGLang).

Why these functions: SGLang's Gemma 4 processor (``processors/gemma4.py``) samples a video itself,
``_video_decoder_to_tensor``: every frame of a clip of at most the processor's ``num_frames`` (32), else
``torch.arange(0, N, N / 32).int()``, the frames fetched with the reader's ``get_frames_at``; then it hands the
frames to the checkpoint's transformers processor with ``do_sample_frames=False`` and no metadata. So the processor
never samples (a deployment's ``fps`` / ``num_frames`` in ``--mm-process-config`` reach it and are read by nothing;
a client's ``video_url`` options are read by GLM-4V only), and the metadata it builds has no frame rate, so
``replace_video_token`` writes each frame's position / 24 seconds.

The plan runs SGLang's own ``_video_decoder_to_tensor`` on a stand-in ``VideoDecoderWrapper`` over the clip's
metadata (2 x 2 frames: no pixels are needed, so a 4K clip costs what a 64x48 one does), then the pinned
transformers' own steps: ``_decode_and_sample_videos`` on those frames without metadata (as ``preprocess`` calls it),
``get_aspect_ratio_preserving_size`` of the clip's frame size (as ``aspect_ratio_preserving_resize`` calls it) and
``Gemma4Processor.replace_video_token`` (times and tokens read off its text, as the trained side's path reads them).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch

from deferlab.impl.sglang.families import common
from deferlab.impl.sglang.video_own import FAILURES, OwnVideoPath, one_line
from deferlab.impl.sglang.video_reader import DECODER, opened, reader_class
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.requests import VIDEO_CONFIGS
from deferlab.reference.system.video import (
    Clip,
    CountedToken,
    DecodedVideo,
    Refused,
    Unsupported,
    VideoPlan,
    VideoRequest,
    counted,
    stamps_before,
)

FAMILY = "gemma4"
MODULE = "sglang.srt.multimodal.processors.gemma4"
TF_VIDEO = "transformers.models.gemma4.video_processing_gemma4"
TF_PROCESSOR = "transformers.models.gemma4.processing_gemma4"
_TOKEN = CountedToken("<V>")  # a placeholder video token: replace_video_token writes n of them as "<n>"
_STAMP = re.compile(r"(\d+):(\d+) <B>")  # "MM:SS <boi>" before each frame's tokens
OPTIONS_NOTE = (
    "options as the server's --mm-process-config video dict: fps and num_frames reach the processor beside "
    "do_sample_frames=False and are read by nothing (a client's video_url fields are read by GLM-4V only); "
    "min/max/total_pixels are no kwargs of Gemma4VideoProcessor"
)


def _options(request: VideoRequest) -> None:
    """The request's options checked: the pixel bounds are no option of this processor (`Unsupported`)."""
    if not isinstance(request, VideoRequest):
        raise InputTypeError(f"request must be a VideoRequest, got {type(request).__name__}")
    bounds = [k for k in ("min_pixels", "max_pixels", "total_pixels") if getattr(request, k) is not None]
    if bounds:
        raise Unsupported(f"n/a: {', '.join(bounds)}: no kwarg of Gemma4VideoProcessor (its budget is max_soft_tokens)")


class SGLangGemma4VideoPath(OwnVideoPath):
    """SGLang's Gemma 4 video path: its own sampling, then the pinned transformers' video processor and prompt text
    with the checkpoint's video config, as ``process_mm_data`` hands the frames over (semantics §20.10(b))."""

    family = FAMILY

    def __init__(self, source: Any) -> None:
        super().__init__(source)
        src = self.source
        self.gemma = common.require(src, MODULE, "Gemma 4")
        self.vp = self.tf.module(TF_VIDEO).Gemma4VideoProcessor(**dict(VIDEO_CONFIGS[FAMILY][0]))
        # what _video_decoder_to_tensor reads of its processor: _processor.video_processor.num_frames
        self.proc = type("Gemma4Standin", (), {"_processor": type("P", (), {"video_processor": self.vp})()})()
        self.reader = _frames_at(reader_class(src.module(DECODER).VideoDecoderWrapper))
        self.source.patch(
            f"{DECODER}.VideoDecoderWrapper",
            "plan: a subclass reporting the clip's frame count and fps, serving 2 x 2 frames from get_frames_at",
        )

    def _sample(self, reader: Any) -> torch.Tensor:
        """SGLang's ``_video_decoder_to_tensor`` as shipped (its processor answers only ``num_frames``)."""
        return self.gemma.Gemma4SGLangProcessor._video_decoder_to_tensor(self.proc, reader)

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """SGLang's frames, the processor's size and tokens, and the seconds the prompt states (§20.10(b))."""
        if not isinstance(clip, Clip):
            raise InputTypeError(f"clip must be a Clip, got {type(clip).__name__}")
        _options(request)
        reader = self.reader(clip)
        try:
            video = self._sample(reader)
        except FAILURES as exc:
            raise Refused(f"SGLang refused the clip: {one_line(exc)}") from exc
        idx = list(reader.asked or ())
        vp, module = self.vp, self.tf.module(TF_VIDEO)
        p, pool, soft = int(vp.patch_size), int(vp.pooling_kernel_size), int(vp.max_soft_tokens)
        try:
            _, (meta,) = vp._decode_and_sample_videos(video, video_metadata=None, do_sample_frames=False)
            h, w = module.get_aspect_ratio_preserving_size(clip.height, clip.width, p, soft * pool**2, pool)
        except FAILURES as exc:
            raise Refused(f"SGLang (the checkpoint's processor) refused the clip: {one_line(exc)}") from exc
        text = self._text((h // p) * (w // p) // pool**2, meta)
        times = tuple(float(int(m) * 60 + int(s)) for m, s in _STAMP.findall(text))
        grid = (len(idx), int(h) // p, int(w) // p)
        told = stamps_before(text, "<B>", "<E>")
        return VideoPlan(
            tuple(idx), (int(w), int(h)), grid, counted(text), times, 0, notes=(OPTIONS_NOTE,), stamps=told
        )

    def _text(self, soft_tokens: int, meta: Any) -> str:
        """``Gemma4Processor.replace_video_token`` of the pinned transformers, without a tokenizer."""
        cls = self.tf.module(TF_PROCESSOR).Gemma4Processor
        outer = cls.__new__(cls)
        outer.boi_token, outer.eoi_token, outer.video_token = "<B>", "<E>", _TOKEN
        return outer.replace_video_token({"num_soft_tokens_per_video": [soft_tokens], "video_metadata": [meta]}, 0)

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """SGLang's ``load_video`` on a file of the bytes (its data-URI branch needs pybase64), then
        ``_video_decoder_to_tensor``: the frames it fetched, the indices it asked for, the reader's fps and count."""
        self._bytes(data)
        _options(request)
        with opened(self.source, data) as (reader, _):
            asked: list[int] = []
            own = reader.get_frames_at

            def fetch(indices: list) -> Any:
                asked.extend(int(i) for i in indices)
                return own(indices)

            reader.get_frames_at = fetch
            try:
                video = self._sample(reader)
            except Exception as exc:  # its decoder failing on a frame (decord on a rotation tag): a refusal
                raise self._decoder_refused(exc) from exc
            fps, total = float(reader.avg_fps), len(reader)
        frames = video.permute(0, 2, 3, 1).cpu().numpy()
        return DecodedVideo(np.ascontiguousarray(frames), tuple(asked), fps, total)

    def provenance(self) -> dict[str, str]:
        tf = f"transformers {self.tf.version}"
        return {
            "options": OPTIONS_NOTE,
            "sampling": f"{MODULE}.Gemma4SGLangProcessor._video_decoder_to_tensor (own; its processor answers "
            f"video_processor.num_frames, the checkpoint's {self.vp.num_frames})",
            "reader": f"stand-in: a {DECODER}.VideoDecoderWrapper subclass over the clip's metadata (2 x 2 frames)",
            "metadata": f"{TF_VIDEO}.Gemma4VideoProcessor._decode_and_sample_videos ({tf}) on SGLang's frames, no "
            "video_metadata, do_sample_frames=False: fps None, frames_indices their positions",
            "geometry": f"{TF_VIDEO}.get_aspect_ratio_preserving_size ({tf}) of the clip's frame size, as "
            "aspect_ratio_preserving_resize calls it; soft tokens per frame as _preprocess counts them",
            "times, tokens": f"{TF_PROCESSOR}.Gemma4Processor.replace_video_token ({tf}): the MM:SS before each frame "
            "read back as seconds, the video tokens counted",
            "decode": "sglang.srt.utils.common.load_video (own) on a file of the bytes -> VideoDecoderWrapper "
            f"(torchcodec, else decord), then {MODULE}.Gemma4SGLangProcessor._video_decoder_to_tensor (own)",
        }


def _frames_at(base: type) -> type:
    """The stand-in reader with the fetch SGLang's Gemma 4 processor calls: ``get_frames_at`` recording the indices
    and serving NHWC 2 x 2 frames (numpy, as the wrapper's CPU branch returns them)."""

    class Gemma4ClipReader(base):  # type: ignore[misc, valid-type]
        def get_frames_at(self, indices: list) -> np.ndarray:
            self.asked = [int(i) for i in indices]
            return np.zeros((len(indices), 2, 2, 3), dtype=np.uint8)  # 2x2: channels unambiguous

    return Gemma4ClipReader
