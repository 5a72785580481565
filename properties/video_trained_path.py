"""What the trained sides of their own module share (GLM-4.1V's `video_trained_glm`, Gemma 4's
`video_trained_gemma4`): the checkpoint's video processor called as transformers' ``preprocess`` calls its
``sample_frames``, on the clip's metadata or on a decoded file.

Why a base class: the checkpoint's processor is one transformers ``BaseVideoProcessor`` for both, so the kwargs
``preprocess`` fills for ``sample_frames`` (the client's or the processor's own), the metadata transformers'
loaders set (duration N / F; no rate: None) and ``load_video`` with the processor's sampler are the same steps;
what a family's module holds is what differs: its size, grid and tokens, and the prompt text its times are read
off.
"""

from __future__ import annotations

import importlib
import tempfile
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from deferlab.reference.system.video import Clip, Refused, VideoRequest

FAILURES = (ValueError, AssertionError, ZeroDivisionError, TypeError, IndexError)


def one_line(e: BaseException) -> str:
    """``Type: first line of the message``."""
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


class TrainedVideoPath:
    """A trained side: transformers' video processor of the checkpoint (``proc``, built by
    `properties.video_trained.processor`), decoding with ``load_video``'s ``backend``. A subclass names its
    ``family``, the transformers module of its processor (``module_name``) and the oracle module whose
    ``refuse_budgets`` answers the pixel bounds as the processor does (``oracle``)."""

    label, real_code = "TRAINED", True
    family: ClassVar[str]
    module_name: ClassVar[str]
    oracle: ClassVar[str]

    def __init__(self, proc: Any, backend: str = "pyav") -> None:
        self.proc, self.backend = proc, backend
        self.module = importlib.import_module(self.module_name)
        self.system = f"transformers-{importlib.import_module('transformers').__version__}"

    def _kwargs(self, request: VideoRequest) -> dict[str, Any]:
        """``preprocess``'s kwargs for ``sample_frames``: every valid one, the client's or the processor's own."""
        importlib.import_module(self.oracle).refuse_budgets(request)  # not kwargs of the processor (the oracle's tests)
        given = {k: v for k, v in (("fps", request.fps), ("num_frames", request.num_frames)) if v is not None}
        kw = {name: given.get(name, getattr(self.proc, name, None)) for name in self.proc.valid_kwargs.__annotations__}
        for name in ("input_data_format", "do_convert_rgb", "do_sample_frames", "device", "video_metadata"):
            kw.pop(name, None)
        return kw

    @staticmethod
    def _metadata(clip: Clip) -> Any:
        """The clip's ``VideoMetadata`` as transformers' loaders set it: duration N / F, no rate None (0 s)."""
        from transformers.video_utils import VideoMetadata

        fps = clip.fps if clip.fps > 0 else None
        return VideoMetadata(clip.frames, fps, clip.width, clip.height, duration=clip.frames / fps if fps else 0.0)

    def _load(self, data: bytes, request: VideoRequest) -> tuple[np.ndarray, Any]:
        """(frames, metadata): transformers' ``load_video`` (``backend``) on a file of ``data`` with the processor's
        ``sample_frames`` under ``preprocess``'s kwargs; a failure is `Refused`."""
        from transformers.video_utils import load_video

        kw = self._kwargs(request)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "clip"
            path.write_bytes(data)
            try:
                frames, meta = load_video(str(path), backend=self.backend,
                                          sample_indices_fn=partial(self.proc.sample_frames, **kw))  # fmt: skip
            except FAILURES as e:
                raise Refused(f"TRAINED {self.family} load_video: {one_line(e)}") from e
        return np.asarray(frames), meta
