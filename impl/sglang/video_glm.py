"""SGLang's served video path for GLM-4.1V, as a `reference.system.video.VideoPath` (semantics §20.5, "GLM-4.1V").

Why these functions: SGLang's GLM-4V processor (``processors/glm4v.py``) samples with the checkpoint's own
transformers ``Glm4vVideoProcessor.sample_frames`` but feeds it SGLang's metadata and SGLang's merge of the client's
options with the deployment's, so what can differ from the trained side is the plumbing: which options reach it,
which transformers the release pins, and SGLang's loader. Two generations are read off the loaded code, never the
version number: a release whose module has ``glm_sample_and_decode_sync`` (0.5.20 on) loads, merges (0.5.23 clamps
a client's knobs to the deployment's) and samples itself, then hands frames and metadata over with
``do_sample_frames=False``; an older one hands the request's raw video to transformers, which does everything.

The options are a client's ``video_url`` fields, run through SGLang's own ``process_content_for_template_format``
(which keeps only the keys the release reads: from 0.5.20 ``fps``, ``max_frames``, ``max_tokens_per_frame``,
``max_image_tokens``); ``num_frames`` and the pixel bounds have no field and are dropped, as pydantic drops them.
The plan runs on a stand-in ``VideoDecoderWrapper`` over the clip's metadata (no decoding), then the companion
transformers' ``smart_resize`` and ``Glm4vProcessor.replace_video_token`` (times and tokens read off its text).
"""

from __future__ import annotations

import logging
import re
from typing import Any

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
)

FAMILY = "glm-4.1v"
MODULE = "sglang.srt.multimodal.processors.glm4v"
JINJA = "sglang.srt.parser.jinja_template_utils"
TF_VIDEO = "transformers.models.glm4v.video_processing_glm4v"
TF_PROCESSOR = "transformers.models.glm4v.processing_glm4v"
URL = "deferlab-clip.mp4"  # what the plan's request names: the stand-in reader never opens it
_TOKEN = CountedToken("<I>")  # the prompt's image token: n of them written as "<n>", counted for the tokens
_STAMP = re.compile(r"<\|end_of_image\|>(-?\d+)")
_QUIET = ("sglang.srt.multimodal.processors.glm4v", "sglang.srt.utils.common")
OPTIONS_NOTE = (
    "options as a client's video_url fields through SGLang's own process_content_for_template_format: fps where "
    "the release has the field (0.5.23 clamps it to the deployment's, the processor's 2, unless --mm-process-config "
    "raises it); num_frames, min/max/total_pixels have no field and are dropped"
)


def client_part(request: VideoRequest, url: str) -> dict[str, Any]:
    """The ``video_url`` content part a client sends with ``request``'s options (each under its own name)."""
    if not isinstance(request, VideoRequest):
        raise InputTypeError(f"request must be a VideoRequest, got {type(request).__name__}")
    return {"type": "video_url", "video_url": {"url": url, **request.given()}}


class SGLangGlmVideoPath(OwnVideoPath):
    """SGLang's GLM-4.1V video path (semantics §20.5): its request parsing, merge, sampling and hand-over, then the
    pinned transformers' resize and prompt text, with the checkpoint's video config."""

    family = FAMILY

    def __init__(self, source: Any) -> None:
        super().__init__(source)
        src = self.source
        self.glm = common.require(src, MODULE, "GLM-4V")
        self.jinja = src.importer.import_required(JINJA)
        self.vp = self.tf.module(TF_VIDEO).Glm4vVideoProcessor.from_dict(dict(VIDEO_CONFIGS[FAMILY][0]))
        self.own_sampling = hasattr(self.glm, "glm_sample_and_decode_sync")  # 0.5.20 on
        self.reader = reader_class(src.module(DECODER).VideoDecoderWrapper)
        self.source.patch(
            f"{DECODER}.VideoDecoderWrapper",
            "plan: a subclass reporting the clip's frame count and fps, serving stride-0 frames of its size",
        )

    # --- the request as SGLang parses it ---------------------------------------------------------------------------
    def _video_item(self, request: VideoRequest, url: str) -> Any:
        """What the GLM processor receives for the video: SGLang's own template step on the client's part."""
        video_data: list[Any] = []
        message = {"role": "user", "content": [client_part(request, url)]}
        self.jinja.process_content_for_template_format(message, "openai", [], video_data, [], [])
        return video_data[0]

    def _config(self, request: VideoRequest, url: str) -> dict[str, Any]:
        """The per-video config ``process_mm_data_async`` builds (its own functions, in its order)."""
        glm = self.glm
        _, configs = glm.split_glm_video_items([self._video_item(request, url)])
        default = glm.glm_processor_video_config(self.vp)  # the server's --mm-process-config video dict: empty
        configs = glm._merge_glm_video_configs(default, configs)
        tokens = glm.glm_max_image_tokens_from_configs(configs)
        kwargs = glm.glm_budget_kwargs(self.vp, user_max_image_tokens=tokens, count=1, split=True)
        config = configs[0]
        if hasattr(glm, "_glm_effective_presize_budget"):
            config = glm._glm_effective_presize_budget(config, (kwargs or {}).get("max_image_tokens"))
        return config

    def _sample(self, reader: Any, request: VideoRequest, url: str) -> tuple[Any, dict[str, Any]]:
        """SGLang's sampling and frame fetch: (frames, metadata dict), or `Refused` with SGLang's exception."""
        loggers = [logging.getLogger(n) for n in _QUIET]
        was = [lg.disabled for lg in loggers]
        for lg in loggers:  # 0.5.23 warns once when it clamps a client's fps: not a refusal
            lg.disabled = True
        try:
            return self.glm.glm_sample_and_decode_sync(reader, self._config(request, url), self.vp)
        except FAILURES as exc:
            raise Refused(f"SGLang refused the clip: {one_line(exc)}") from exc
        finally:
            for lg, w in zip(loggers, was, strict=True):
                lg.disabled = w

    def _processor_sampling(self, clip: Clip) -> tuple[list[int], dict[str, Any]]:
        """Before 0.5.20: the pinned transformers samples, its ``preprocess`` filling fps and num_frames from the
        processor (a client's options never reach it); metadata as its loaders set it (duration N / F)."""
        if not clip.fps > 0:
            raise Refused("SGLang (transformers' loader) refused the clip: no frame rate to sample at")
        meta = {"total_num_frames": clip.frames, "fps": clip.fps, "duration": clip.frames / clip.fps}
        video_metadata = self.tf.module("transformers.video_utils").VideoMetadata(**meta)
        try:
            got = self.vp.sample_frames(video_metadata, fps=self.vp.fps, num_frames=self.vp.num_frames)
        except FAILURES as exc:
            raise Refused(f"SGLang (transformers' sample_frames) refused the clip: {one_line(exc)}") from exc
        return [int(i) for i in got], {**meta, "frames_indices": [int(i) for i in got]}

    # --- the processor's side, the pinned transformers ---------------------------------------------------------------
    def _finish(self, n: int, height: int, width: int, meta: dict[str, Any]) -> tuple[tuple[int, int], tuple, str]:
        """The processor's resize target, grid, and its prompt text for the video (`replace_video_token`)."""
        vp = self.vp
        tps, patch, merge = int(vp.temporal_patch_size), int(vp.patch_size), int(vp.merge_size)
        try:
            h, w = self.tf.module(TF_VIDEO).smart_resize(
                num_frames=n, height=height, width=width, temporal_factor=tps, factor=patch * merge,
                min_pixels=vp.size["shortest_edge"], max_pixels=vp.size["longest_edge"],
            )  # fmt: skip
        except FAILURES as exc:
            raise Refused(f"SGLang (the checkpoint's processor) refused the clip: {one_line(exc)}") from exc
        grid = ((n + -n % tps) // tps, int(h) // patch, int(w) // patch)
        video_utils = self.tf.module("transformers.video_utils")
        metadata = video_utils.make_batched_metadata([None], video_metadata=[dict(meta)])[0]
        cls = self.tf.module(TF_PROCESSOR).Glm4vProcessor
        outer = cls.__new__(cls)
        outer.video_processor, outer.image_token = vp, _TOKEN
        text = outer.replace_video_token({"video_grid_thw": torch.tensor([grid]), "video_metadata": [metadata]}, 0)
        return (int(w), int(h)), grid, text

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """SGLang's frames, the processor's size, grid and tokens, and the seconds the prompt states (§20.5)."""
        if not isinstance(clip, Clip):
            raise InputTypeError(f"clip must be a Clip, got {type(clip).__name__}")
        client_part(request, URL)  # the request's type, checked once
        if self.own_sampling:
            reader = self.reader(clip)
            _, meta = self._sample(reader, request, URL)
            idx = [int(i) for i in meta["frames_indices"]]
        else:
            idx, meta = self._processor_sampling(clip)
        size, grid, text = self._finish(len(idx), clip.height, clip.width, meta)
        pad = grid[0] * int(self.vp.temporal_patch_size) - len(idx)
        notes = (OPTIONS_NOTE,) if self.own_sampling else (OPTIONS_NOTE, "before 0.5.20 transformers samples itself")
        return VideoPlan(
            indices=tuple(idx) + tuple(idx[-1:]) * pad,
            size=size,
            grid=grid,
            tokens=counted(text),
            times=tuple(float(s) for s in _STAMP.findall(text)),
            padded=pad,
            notes=notes,
        )

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """SGLang's ``load_video`` on a file of the bytes (its data-URI branch needs pybase64), then
        ``glm_sample_and_decode_sync``: the frames it fetched, one per index (the repeat too), and its metadata."""
        self._bytes(data)
        if not self.own_sampling:
            raise Unsupported(
                f"SGLang {self.source.version} hands GLM videos to transformers {self.tf.version}, whose fetch_videos "
                "decodes with torchcodec (else torchvision's removed reader); torchcodec is not installed here"
            )
        with opened(self.source, data) as (reader, name):
            try:
                frames, meta = self._sample(reader, request, name)
            except Refused:
                raise
            except Exception as exc:  # its decoder failing on a frame (decord on a rotation tag): a refusal
                raise self._decoder_refused(exc) from exc
        return DecodedVideo(
            frames.cpu().numpy(), tuple(int(i) for i in meta["frames_indices"]), float(meta["fps"]),
            int(meta["total_num_frames"]),
        )  # fmt: skip

    def provenance(self) -> dict[str, str]:
        tf = f"transformers {self.tf.version}"
        if self.own_sampling:
            sampling = (
                f"{MODULE}.glm_sample_and_decode_sync (own) -> _hf_sample_frame_indices (own) -> "
                f"{TF_VIDEO}.Glm4vVideoProcessor.sample_frames ({tf}, the checkpoint's config)"
            )
            options = (
                f"{JINJA}.process_content_for_template_format (own) -> {MODULE}.split_glm_video_items, "
                "glm_processor_video_config, _merge_glm_video_configs, glm_budget_kwargs (own; the server's "
                "--mm-process-config video dict empty)"
            )
            reader = f"stand-in: a {DECODER}.VideoDecoderWrapper subclass over the clip's metadata (no decoding)"
        else:
            sampling = (
                f"{TF_VIDEO}.Glm4vVideoProcessor.sample_frames ({tf}), fps and num_frames the processor's own as its "
                f"preprocess fills them: {MODULE} hands transformers the raw request"
            )
            options = f"{JINJA}.process_content_for_template_format (own): no field reaches this release's processor"
            reader = "modelled: transformers' loader's metadata, duration N / F"
        return {
            "options": options,
            "sampling": sampling,
            "reader": reader,
            "geometry": f"{TF_VIDEO}.smart_resize ({tf}) as Glm4vVideoProcessor.resize calls it, the checkpoint's size",
            "times, tokens": f"{TF_PROCESSOR}.Glm4vProcessor.replace_video_token ({tf}) on make_batched_metadata of "
            "SGLang's metadata: the seconds after each frame, the image tokens counted",
            "decode": f"sglang.srt.utils.common.load_video (own) on a file of the bytes, then {MODULE}."
            "glm_sample_and_decode_sync (own; get_frames_as_tensor with _is_cpu_engine answered True)"
            if self.own_sampling
            else "n/a: transformers' fetch_videos needs torchcodec",
        }
