"""vLLM's served video path for GLM-4.1V, run for real on a CPU (semantics §20.6, GLM-4.1V).

Why its own module: GLM-4.1V's path shares only the container step with the Qwen ones (`impl.vllm.video`). vLLM
picks the ``opencv_dynamic`` loader for the checkpoint's ``Glm4vVideoProcessor``; that loader samples by duration
and keeps the sorted set of its indices (no odd-count duplicate); the processor takes the frames as read unless
the loader read every frame, when it samples again at its own fps; and vLLM writes the times itself
(``Glm4vProcessingInfo._get_video_second_idx_glm4v``), one frame block of the prompt per time. Every step is the
release's code or the checkpoint's processor (the release's pinned transformers):

* ``plan`` (pixel-free): the release's ``VideoMediaIO`` and ``DynamicVideoBackend`` with the container read stood
  in (`video_standin`: the clip's metadata, 1x1 frames); the processor's own ``sample_frames`` and ``smart_resize``
  (`video_geometry`); the times from the release's ``_get_video_second_idx_glm4v``.
* ``decode`` (bytes): the release's ``MediaConnector.fetch_video`` on a ``file:`` URL with the loader it picks,
  then the processor's ``sample_frames`` where it samples again, and ``patchify``'s repeat of an odd count's last
  frame (the frames the encoder gets; TRAINED's list carries that frame as its sampler's duplicate).

Options: ``fps`` and ``num_frames`` go to the loader (``media_io_kwargs["video"]``: it ignores ``num_frames``);
``min_pixels`` / ``max_pixels`` are ``mm_processor_kwargs``, handed flat to ``Glm4vProcessor``, whose transformers
kwargs routing keeps only keys a processor's kwargs name (neither GLM processor names these: ignored, a note says
so); ``total_pixels`` is no vLLM option (`Unsupported`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deferlab.impl.vllm import video_geometry as geometry
from deferlab.impl.vllm import video_standin as standin
from deferlab.impl.vllm.sources import Source
from deferlab.impl.vllm.video_own import FETCHED, MEDIA, VIDEO, OwnVideoPath
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.requests import VIDEO_CONFIGS
from deferlab.reference.system.video import Clip, DecodedVideo, VideoPlan, VideoRequest

FAMILY = "glm-4.1v"
MODELS = "vllm.model_executor.models.glm4_1v"
INFO = "Glm4vProcessingInfo"
# The checkpoint's files as vLLM and transformers read them: config.json's model_type and the video config.
FILES = {"config.json": {"model_type": "glm4v"}, "video_preprocessor_config.json": VIDEO_CONFIGS[FAMILY][0]}


class VLLMGlmVideoPath(OwnVideoPath):
    """vLLM's GLM-4.1V video path on one release (`reference.system.video.VideoPath`)."""

    family = FAMILY
    checkpoint_files, folder_name, says = FILES, "glm", "GLM-4.1V"

    def __init__(self, source: Source, exact: bool = False) -> None:
        super().__init__(source)
        self.exact = exact
        self._info_cls = getattr(source.module(MODELS), INFO)
        # 0.34.0 checks the time count against the grid (_placeholder_from_timestamps); 0.33.0 writes what it has
        self._checks_count = hasattr(self._info_cls, "_placeholder_from_timestamps")
        from transformers import AutoVideoProcessor

        self.processor = AutoVideoProcessor.from_pretrained(self.folder)
        self._info = object.__new__(self._info_cls)  # only _get_video_second_idx_glm4v runs: it asks for this
        self._info.get_video_processor = lambda **_: self.processor
        self._memo: dict[tuple, tuple] = {}

    # --- the request as vLLM takes it -------------------------------------------------------------------------------
    def _media_kwargs(self, request: VideoRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The loader kwargs (`OwnVideoPath._loader_kwargs`: the loader ``fetch_video`` picks for the checkpoint's
        processor) and the notes on the options vLLM takes and drops."""
        merged = self._loader_kwargs(request)
        notes = []
        if request.num_frames is not None:
            notes.append(f"num_frames={request.num_frames}: accepted by VideoMediaIO, ignored by vLLM's "
                         f"{self.backend} loader (it samples by duration and fps; semantics §20.6)")  # fmt: skip
        dropped = self._dropped(request)
        if dropped:
            notes.append(f"{', '.join(dropped)}: handed flat to Glm4vProcessor, ignored by its transformers kwargs "
                         "routing (no GLM processor kwarg of that name; semantics §20.6)")  # fmt: skip
        return merged, tuple(notes)

    def _dropped(self, request: VideoRequest) -> list[str]:
        """The pixel options the processor's kwargs routing drops: a flat key reaches the video processor only when
        its kwargs (or the image processor's, which holds the same names) declare it."""
        from transformers.processing_utils import VideosKwargs

        named = set(VideosKwargs.__annotations__) | set(self.processor.valid_kwargs.__annotations__)
        given = [k for k in ("min_pixels", "max_pixels") if getattr(request, k) is not None]
        self._ran["processor kwargs"] = (
            "restated: transformers ProcessorMixin._merge_kwargs' routing of flat kwargs, on the names of "
            f"{type(self.processor).__name__}.valid_kwargs and VideosKwargs"
        )
        return [k for k in given if k not in named]

    # --- the loader, on metadata only ------------------------------------------------------------------------------
    def _load(self, clip: Clip, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The loader's metadata for ``clip`` (``VideoMediaIO.load_bytes`` -> ``DynamicVideoBackend.load_bytes``),
        the container read stood in (`video_standin`)."""
        metadata, loader = standin.load(self, clip, kwargs)
        self._ran["sampling"] = (
            f"real: {VIDEO}.{loader.__qualname__}._prepare_source and compute_frames_index_to_sample via "
            f"{MEDIA}.VideoMediaIO.load_bytes (stand-in: {standin.where(self._video)} report the Clip's metadata)"
        )
        return dict(metadata)

    @staticmethod
    def _metadata(metadata: dict[str, Any]) -> Any:
        """The ``VideoMetadata`` vLLM hands the processor (``_to_video_metadata``: the dict less its flag)."""
        from transformers.video_utils import VideoMetadata

        return VideoMetadata(**{k: v for k, v in metadata.items() if k != "do_sample_frames"})

    def _process(self, clip: Clip, metadata: dict[str, Any]) -> tuple:
        """(grid, the processor's own indices into the frames or None): `video_geometry` on the processor, with
        vLLM's ``do_sample_frames`` = the loader's flag; memoized by what the answer depends on."""
        n, sampling = len(metadata["frames_indices"]), bool(metadata["do_sample_frames"])
        key = (n, clip.width, clip.height, sampling, (metadata["total_num_frames"], metadata["fps"]) if sampling else 0)
        if key not in self._memo:
            run = geometry.exact if self.exact else geometry.fast
            call = {"do_sample_frames": sampling}
            grid, chosen, _ = run(self.processor, n, clip.width, clip.height, self._metadata(metadata), call)
            self._memo[key] = (grid, chosen)
        return self._memo[key]

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """vLLM's frames, geometry, tokens and times for ``clip`` (semantics §20.6, GLM-4.1V), nothing decoded."""
        if not isinstance(clip, Clip):
            raise InputTypeError(f"clip must be a Clip, got {type(clip).__name__}")
        kwargs, notes = self._media_kwargs(request)
        metadata = self._load(clip, kwargs)
        valid = list(metadata["frames_indices"])
        if not valid:  # the OpenCV codec's read_frames takes max() of the chosen indices before reading
            raise ValueError("vLLM's OpenCV codec: the loader chose no frame (read_frames: max() arg is an empty "
                             f"sequence; floor({clip.duration:g} s x fps) = 0)")  # fmt: skip
        grid, chosen = self._process(clip, metadata)
        taken = tuple(valid) if chosen is None else tuple(valid[i] for i in chosen)
        if chosen is not None and self._checks_count:  # 0.34.0 writes the processor's indices back over the dict's
            metadata["frames_indices"] = list(taken)
        times = tuple(float(x) for x in self._info._get_video_second_idx_glm4v(metadata, len(valid)))
        self._ran["times"] = f"real: {MODELS}.{INFO}._get_video_second_idx_glm4v"
        vp = self.processor
        t, h, w = grid
        if self._checks_count and len(times) != t:  # _placeholder_from_timestamps' check, restated
            raise ValueError(
                f"Video timestamp count does not match video_grid_thw[0]: {len(times)} timestamps for grid_t={t}."
            )
        pad = t * vp.temporal_patch_size - len(taken)  # patchify repeats the last frame: kept in the indices
        return VideoPlan(
            indices=taken + taken[-1:] * pad,
            size=(w * vp.patch_size, h * vp.patch_size),
            grid=grid,
            tokens=len(times) * (h * w // vp.merge_size**2),  # one frame block per time (0.33.0: whatever the grid)
            times=times,
            padded=pad,
            notes=notes,
        )

    # --- bytes -----------------------------------------------------------------------------------------------------
    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """The frames vLLM's own loader reads from ``data`` sent as a file (a ``file:`` URL under the server's
        ``--allowed-local-media-path``: `OwnVideoPath._fetch`), those its processor keeps, and patchify's repeat of an
        odd count's last."""
        frames, metadata = self._fetch(data, request)
        frames, indices = np.asarray(frames), list(metadata["frames_indices"])
        if metadata["do_sample_frames"]:
            kept = [int(i) for i in self.processor.sample_frames(self._metadata(metadata))]
            frames, indices = frames[kept], [indices[i] for i in kept]
            self._ran["decode resample"] = f"real: transformers {type(self.processor).__name__}.sample_frames"
        if len(indices) % self.processor.temporal_patch_size:
            frames, indices = np.concatenate([frames, frames[-1:]]), [*indices, indices[-1]]
        self._ran["decode"] = FETCHED
        return DecodedVideo(frames, tuple(indices), float(metadata["fps"]), int(metadata["total_num_frames"]))

    def provenance(self) -> dict[str, str]:
        vp = type(self.processor)
        own = {
            "geometry": (
                f"real: transformers {vp.__module__}.{vp.__qualname__}.__call__ on black frames of the clip's size"
                if self.exact
                else f"real: transformers {vp.__module__}.{vp.__qualname__}._standardize_kwargs and sample_frames, "
                f"{vp.__module__}.smart_resize (restated: the arguments its resize passes, patchify's padding)"
            )
            + " with vLLM's metadata and do_sample_frames = the loader's flag",
            "tokens": "restated: one frame block of h x w / merge_size**2 image tokens per time "
            + (
                "(_placeholder_from_timestamps, after its count check)"
                if self._checks_count
                else "(_construct_video_placeholder, no count check)"
            ),  # fmt: skip
        }
        return self._provenance(own)
