"""GLM-4.1V's video trained side as a `reference.system.video.VideoPath` (semantics §20.4, "GLM-4.1V's trained side").

Why its own path: GLM-4.1V's processor differs from the Qwen ones where the plumbing shows. Its sampler needs the
clip's duration (transformers' loaders set it to N / F), it evens the count itself by repeating the last index,
and the times the model is told are the integers its processor writes into the prompt, not a number handed to
the model. So ``plan`` calls the real ``Glm4vVideoProcessor.sample_frames`` and ``smart_resize`` and reads the
times and the token count off the prompt text the real ``Glm4vProcessor.replace_video_token`` builds.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from deferlab.properties.video_trained_path import FAILURES, TrainedVideoPath, one_line
from deferlab.reference.system.requests import VIDEO_CONFIGS
from deferlab.reference.system.video import Clip, CountedToken, DecodedVideo, Refused, VideoPlan, VideoRequest, counted

FAMILY = "glm-4.1v"
MODULE = "transformers.models.glm4v.video_processing_glm4v"
PROCESSOR = "transformers.models.glm4v.processing_glm4v"
_TOKEN = CountedToken("<I>")  # a placeholder image token: replace_video_token writes n of them as "<n>"
_STAMP = re.compile(r"<\|end_of_image\|>(-?\d+)")


def prompt_text(proc: Any, grid: tuple[int, int, int], meta: Any) -> str:
    """The video's prompt text as ``Glm4vProcessor.replace_video_token`` builds it (transformers 5.24.0), run
    without a tokenizer: the processor object carries only what that method reads."""
    import torch

    cls = importlib.import_module(PROCESSOR).Glm4vProcessor
    outer = cls.__new__(cls)
    outer.video_processor, outer.image_token = proc, _TOKEN
    return outer.replace_video_token({"video_grid_thw": torch.tensor([grid]), "video_metadata": [meta]}, 0)


def read_prompt(text: str) -> tuple[tuple[float, ...], int]:
    """The seconds written after each frame and the image tokens in all, read off the prompt text."""
    return tuple(float(s) for s in _STAMP.findall(text)), counted(text)


class GlmTrainedPath(TrainedVideoPath):
    """TRAINED GLM-4.1V: transformers 5.24.0's ``Glm4vVideoProcessor`` with the checkpoint's values (§20.4); the
    pixel bounds, no kwarg of it, 5.24.0 answers with a TypeError."""

    family, module_name, oracle = FAMILY, MODULE, "deferlab.reference.oracle.video_glm"

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        kw, meta = self._kwargs(request), self._metadata(clip)
        low, high = self.proc.size["shortest_edge"], self.proc.size["longest_edge"]
        tps, p, m = int(self.proc.temporal_patch_size), int(self.proc.patch_size), int(self.proc.merge_size)
        try:
            idx = [int(i) for i in self.proc.sample_frames(meta, **kw)]
            meta.frames_indices = idx
            h, w = self.module.smart_resize(len(idx), clip.height, clip.width, tps, p * m, low, high)
            pad = -len(idx) % tps
            grid = ((len(idx) + pad) // tps, h // p, w // p)
            times, tokens = read_prompt(prompt_text(self.proc, grid, meta))
        except FAILURES as e:
            raise Refused(f"TRAINED glm-4.1v: {one_line(e)}") from e
        return VideoPlan(tuple(idx) + (idx[-1],) * pad, (w, h), grid, tokens, times, pad)

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """transformers' ``load_video`` (``backend``) with the processor's ``sample_frames``. Its PyAV reader keeps
        a frame once however often the indices name it, so the sampler's repeated last index comes back once; the
        frames are handed on as the processor's default loader (torchcodec's ``get_frames_at``) returns them, one
        per index, the repeat restored (semantics §20.4)."""
        frames, meta = self._load(data, request)
        idx = tuple(int(i) for i in meta.frames_indices)
        if len(frames) != len(idx):
            read = sorted(set(idx))
            frames = frames[[read.index(i) for i in idx]]
        return DecodedVideo(frames, idx, float(meta.fps or 0.0), int(meta.total_num_frames))

    def provenance(self) -> dict[str, str]:
        return {
            "sampling": f"real: {MODULE}.Glm4vVideoProcessor.sample_frames, its kwargs filled as preprocess fills "
            "them (num_frames among them, which it ignores); duration N / F as transformers' loaders set it",
            "size": f"real: {MODULE}.smart_resize, called as Glm4vVideoProcessor.resize calls it",
            "grid": "modelled: patchify's pad (-n mod 2, 0: the sampler evens the count) and grid",
            "times, tokens": f"real: {PROCESSOR}.Glm4vProcessor.replace_video_token's text (the seconds after each "
            "frame, the image tokens counted)",
            "decode": f"real: transformers.video_utils.load_video(backend={self.backend!r}); the repeated last "
            "index restored as torchcodec returns it",
            "config": VIDEO_CONFIGS[FAMILY][1],
        }
