"""The processor step of LMDeploy's Qwen3-VL video path (semantics §20.7): LMDeploy's own ``VisionModel.preprocess``
decides the kwargs, the release's pinned transformers (a loader companion) computes with them.

Why a stand-in processor: ``preprocess`` builds ``videos_kwargs`` (``do_resize=True``, ``do_sample_frames=False``,
the request's ``size`` through ``get_override_size``) and then calls the checkpoint's ``AutoProcessor``, which
needs a snapshot's tokenizer. A recording stand-in takes that call and stops it, so the kwargs are LMDeploy's own;
the checkpoint's ``Qwen3VLVideoProcessor`` (from the companion, with the checkpoint's config) then runs on blank
frames of the clip's size with exactly those kwargs. Geometry does not depend on pixel values, so it is cached per
(frames, size, options): a 6,000-clip sweep calls the processor a few dozen times.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from deferlab.impl.lmdeploy.sources import Source
from deferlab.reference.system.errors import InputValueError

BASE = "lmdeploy.vl.model.base"
VIDEO_PROCESSING = "transformers.models.qwen3_vl.video_processing_qwen3_vl"
PROCESSING = "transformers.models.qwen3_vl.processing_qwen3_vl"
# Qwen/Qwen3-VL-8B-Instruct's video_preprocessor_config.json (the values every Qwen3-VL checkpoint ships).
VIDEO_CONFIG: dict[str, Any] = {
    "size": {"shortest_edge": 4096, "longest_edge": 25165824},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "fps": 2,
    "min_frames": 4,
    "max_frames": 768,
    "do_sample_frames": True,
}


class _Captured(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Carries the kwargs LMDeploy's ``preprocess`` called the processor with."""


class _RecordingProcessor:
    """Stand-in for the checkpoint's ``AutoProcessor`` in ``VisionModel.preprocess``: its ``video_processor`` is the
    real one (``get_override_size`` reads its ``size``); calling it records the kwargs and stops ``preprocess``."""

    def __init__(self, video_processor: Any) -> None:
        self.video_processor = video_processor
        self.image_processor = video_processor

    def __call__(self, **kwargs: Any) -> Any:
        raise _Captured(kwargs)


class Qwen3Processor:
    """The pinned ``Qwen3VLVideoProcessor`` under the kwargs LMDeploy passes it (`geometry`), and the pinned
    ``Qwen3VLProcessor``'s timestamps (`times`)."""

    def __init__(self, source: Source, config: Mapping[str, Any] | None = None) -> None:
        companion = source.companions["transformers"]
        self.version = companion.version
        self.source = source
        self.video_processor = companion.module(VIDEO_PROCESSING).Qwen3VLVideoProcessor(**dict(config or VIDEO_CONFIG))
        self._processor_class = companion.module(PROCESSING).Qwen3VLProcessor
        self._base = source.module(BASE)
        self._kwargs: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._geometry: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def videos_kwargs(self, mm: Mapping[str, Any]) -> dict[str, Any]:
        """LMDeploy's ``VisionModel.preprocess`` run on one video item with ``mm_processor_kwargs={'video': mm}``:
        the ``videos_kwargs`` it hands the processor, less the per-video ``video_metadata``."""
        key = tuple(sorted(mm.items()))
        if key not in self._kwargs:
            model = self._base.VisionModel
            stand_in = SimpleNamespace(
                collect_multimodal_items=model.collect_multimodal_items,
                processor=_RecordingProcessor(self.video_processor),
            )
            item = {"type": "video", "data": np.zeros((2, 2, 2, 3), np.uint8), "video_metadata": {}}
            messages = [{"role": "user", "content": [item]}]
            try:
                model.preprocess(stand_in, messages, "", {"video": dict(mm)} if mm else None)
            except _Captured as got:
                found = dict(got.args[0].get("videos_kwargs", {}))
            else:
                raise InputValueError(f"{self.source.name}: VisionModel.preprocess did not call the processor")
            found.pop("video_metadata", None)
            self._kwargs[key] = found
        return dict(self._kwargs[key])

    def geometry(
        self, frames: int, width: int, height: int, mm: Mapping[str, Any]
    ) -> tuple[tuple[int, int], tuple[int, int, int], int, int]:
        """The processor on ``frames`` blank frames of ``width`` x ``height`` with LMDeploy's kwargs: the per-frame
        size (width, height), ``video_grid_thw``, the tokens (``t x h x w / merge^2``, as ``replace_video_token``
        counts them) and the frames the temporal padding repeats."""
        key = (frames, width, height, tuple(sorted(mm.items())))
        if key not in self._geometry:
            vp = self.video_processor
            kwargs = self.videos_kwargs(mm)
            out = vp(videos=[np.zeros((frames, height, width, 3), np.uint8)], return_tensors="np", **kwargs)
            t, h, w = (int(v) for v in np.asarray(out["video_grid_thw"])[0])
            size = (w * vp.patch_size, h * vp.patch_size)
            self._geometry[key] = (size, (t, h, w), t * h * w // vp.merge_size**2, t * vp.temporal_patch_size - frames)
        return self._geometry[key]  # type: ignore[return-value]

    def times(self, indices: list[int], fps: float) -> list[float]:
        """``Qwen3VLProcessor._calculate_timestamps`` as ``replace_video_token`` calls it: LMDeploy's metadata
        (``frames_indices``, the container's rate) and the video processor's ``temporal_patch_size``. Called unbound:
        it reads nothing of the processor object (a stand-in ``self``)."""
        found = self._processor_class._calculate_timestamps(
            None, list(indices), fps, self.video_processor.temporal_patch_size
        )
        return [float(t) for t in found]

    def provenance(self) -> dict[str, str]:
        return {
            "processor kwargs": f"{BASE}.VisionModel.preprocess (stand-in self: the real video processor under a "
            "recording AutoProcessor that stops at its call; the snapshot's tokenizer is not needed)",
            "geometry": f"{VIDEO_PROCESSING}.Qwen3VLVideoProcessor.__call__ (transformers {self.version}, the "
            "checkpoint's video_preprocessor_config.json; called directly with the videos_kwargs Qwen3VLProcessor "
            "forwards it; blank frames of the clip's size)",
            "times": f"{PROCESSING}.Qwen3VLProcessor._calculate_timestamps (transformers {self.version}, unbound)",
        }
