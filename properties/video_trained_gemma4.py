"""Gemma 4's video trained side as a `reference.system.video.VideoPath` (semantics §20.10(a), "Gemma 4's trained side").

Why its own path: Gemma 4's processor differs from the Qwen and GLM ones where the plumbing shows. It has no
temporal patch and no ``smart_resize`` (its size is ``get_aspect_ratio_preserving_size``, a per-frame patch
budget), its token count is per frame, and the times the model is told are the "MM:SS" text its processor writes
before each frame. So ``plan`` calls the real ``Gemma4VideoProcessor.sample_frames`` (its kwargs filled as
``preprocess`` fills them) and ``get_aspect_ratio_preserving_size``, and reads the times and the token count off the
prompt text the real ``Gemma4Processor.replace_video_token`` builds, without a tokenizer (placeholder tokens).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from deferlab.properties.video_trained_path import FAILURES, TrainedVideoPath, one_line
from deferlab.reference.system.requests import VIDEO_CONFIGS
from deferlab.reference.system.video import (
    Clip,
    CountedToken,
    DecodedVideo,
    Refused,
    VideoPlan,
    VideoRequest,
    counted,
    stamps_before,
)

FAMILY = "gemma4"
MODULE = "transformers.models.gemma4.video_processing_gemma4"
PROCESSOR = "transformers.models.gemma4.processing_gemma4"
_TOKEN = CountedToken("<V>")  # a placeholder video token: replace_video_token writes n of them as "<n>"
_STAMP = re.compile(r"(\d+):(\d+) <B>")  # "MM:SS <boi>" before each frame's tokens


def prompt_text(soft_tokens: int, meta: Any) -> str:
    """The video's prompt text as ``Gemma4Processor.replace_video_token`` builds it (transformers 5.24.0), run
    without a tokenizer: the processor object carries only what that method reads (its ``__init__`` needs the
    checkpoint's tokenizer)."""
    cls = importlib.import_module(PROCESSOR).Gemma4Processor
    outer = cls.__new__(cls)
    outer.boi_token, outer.eoi_token, outer.video_token = "<B>", "<E>", _TOKEN
    return outer.replace_video_token({"num_soft_tokens_per_video": [soft_tokens], "video_metadata": [meta]}, 0)


def read_prompt(text: str) -> tuple[tuple[float, ...], int]:
    """The seconds written before each frame ("MM:SS" read back as whole seconds) and the soft tokens in all."""
    return tuple(float(int(m) * 60 + int(s)) for m, s in _STAMP.findall(text)), counted(text)


class Gemma4TrainedPath(TrainedVideoPath):
    """TRAINED Gemma 4: transformers 5.24.0's ``Gemma4VideoProcessor`` with the checkpoint's values (§20.10(a));
    ``preprocess`` fills ``num_frames`` = 32 among ``sample_frames``' kwargs, so a client's ``fps`` meets it."""

    family, module_name, oracle = FAMILY, MODULE, "deferlab.reference.oracle.video_gemma4"

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        kw, meta = self._kwargs(request), self._metadata(clip)
        p, pool, soft = int(self.proc.patch_size), int(self.proc.pooling_kernel_size), int(self.proc.max_soft_tokens)
        try:
            idx = [int(i) for i in self.proc.sample_frames(meta, **kw)]
            meta.frames_indices = idx
            h, w = self.module.get_aspect_ratio_preserving_size(clip.height, clip.width, p, soft * pool**2, pool)
            per_frame = (h // p) * (w // p) // pool**2  # _preprocess: patches per frame // pooling_kernel_size**2
            text = prompt_text(per_frame, meta)
            times, tokens = read_prompt(text)
        except FAILURES as e:
            raise Refused(f"TRAINED gemma4: {one_line(e)}") from e
        grid = (len(idx), h // p, w // p)
        return VideoPlan(tuple(idx), (w, h), grid, tokens, times, 0, stamps=stamps_before(text, "<B>", "<E>"))

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """transformers' ``load_video`` (``backend``) with the processor's ``sample_frames``: i x N // k never
        repeats an index (k <= N), so the frames come back one per index."""
        frames, meta = self._load(data, request)
        idx = tuple(int(i) for i in meta.frames_indices)
        return DecodedVideo(frames, idx, float(meta.fps or 0.0), int(meta.total_num_frames))

    def provenance(self) -> dict[str, str]:
        return {
            "sampling": f"real: {MODULE}.Gemma4VideoProcessor.sample_frames (BaseVideoProcessor's, over "
            "default_sample_indices_fn), its kwargs filled as preprocess fills them (num_frames=32 among them)",
            "size": f"real: {MODULE}.get_aspect_ratio_preserving_size, called as aspect_ratio_preserving_resize "
            "calls it (max_patches = max_soft_tokens x pooling_kernel_size**2)",
            "grid": "modelled: one step per frame (no temporal patch), (h / patch, w / patch); soft tokens per frame "
            "as _preprocess counts them (checked on real frames by tests/reference/test_video_oracle_gemma4.py)",
            "times, tokens": f"real: {PROCESSOR}.Gemma4Processor.replace_video_token's text (the MM:SS before each "
            "frame read back as seconds, the video tokens counted)",
            "decode": f"real: transformers.video_utils.load_video(backend={self.backend!r})",
            "config": VIDEO_CONFIGS[FAMILY][1],
        }
