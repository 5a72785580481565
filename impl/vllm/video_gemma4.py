"""vLLM's served video path for Gemma 4, run for real on a CPU (semantics §20.10(b), vLLM 0.33.0 and 0.34.0).

Why its own module: vLLM never runs Gemma 4's video processor. No vLLM loader is registered for
``Gemma4VideoProcessor``, so ``fetch_video`` falls back to the generic ``opencv`` loader (``VideoBackend``: up to
``VideoMediaIO``'s 32 frames, fewer with a request fps, ``np.linspace`` over the clip), and
``Gemma4MultiModalProcessor._apply_hf_processor_main`` hands the frames read to the checkpoint's *image* processor
with ``max_soft_tokens`` forced to 70, counts each frame's soft tokens with its own ``_compute_num_soft_tokens``
and tells the model each frame's time as index / (the metadata's fps or 24) in whole-second "MM:SS" text. Steps:

* ``plan`` (pixel-free): the release's ``VideoMediaIO`` and the loader ``fetch_video`` picks, the container read
  stood in (`video_standin`); the per-frame size from the checkpoint image processor's own
  ``get_aspect_ratio_preserving_size`` (the release's pinned transformers) with 70 x pooling**2 patches; the soft
  tokens from the release's ``Gemma4ProcessingInfo._compute_num_soft_tokens``; the times restated (one inline line
  of ``_apply_hf_processor_main``) and written as text by the release's ``get_video_repl``, read back as seconds.
* ``decode`` (bytes): the release's ``MediaConnector.fetch_video`` on a ``file:`` URL (the OpenCV codec): the
  frames read are the frames the image processor gets (no second sampling).

Options: ``fps`` and ``num_frames`` go to the loader (``media_io_kwargs["video"]``); ``min_pixels`` /
``max_pixels`` are ``mm_processor_kwargs`` that Gemma 4's kwargs do not name (ignored, a note says so);
``total_pixels`` is no vLLM option (`Unsupported`).
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import numpy as np

from deferlab.impl.vllm import video_standin as standin
from deferlab.impl.vllm.sources import Source
from deferlab.impl.vllm.video_own import FETCHED, MEDIA, VIDEO, OwnVideoPath
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.family_configs import SOURCES, published_config
from deferlab.reference.system.requests import VIDEO_CONFIGS
from deferlab.reference.system.video import Clip, DecodedVideo, VideoPlan, VideoRequest

FAMILY = "gemma4"
MODELS = "vllm.model_executor.models.gemma4_mm"
INFO = "Gemma4ProcessingInfo"
IMAGES = "transformers.models.gemma4.image_processing_gemma4"
SOFT_TOKENS = "_VIDEO_MAX_SOFT_TOKENS"  # the release's per-frame budget for video (70)
# The checkpoint's files as vLLM reads them: config.json's model_type and the one processor_config.json, whose
# nested blocks vLLM's loader lookup does not read (it reads video_/preprocessor_config.json, then model_type).
FILES = {
    "config.json": {"model_type": "gemma4"},
    "processor_config.json": {"image_processor": published_config(FAMILY), "video_processor": VIDEO_CONFIGS[FAMILY][0],
                              "processor_class": "Gemma4Processor"},
}  # fmt: skip
# Token ids of the stand-in tokenizer: the special ones below 0, text as code points (read back exactly).
BOI, EOI, VIDEO_TOKEN, BOS = -1, -2, -3, -4
_MMSS = re.compile(r"(\d+):(\d+)")  # a stamp's minutes and seconds
SPECIAL = {BOS: "<bos>"}  # written into a stamp as text, so a stamp tokenized with its special tokens differs


class _Text:
    """The tokenizer ``get_video_repl`` asks for: each character its code point, so the text it writes is read back
    exactly (the real tokenizer would change the ids, not the text); ``add_special_tokens`` puts Gemma's ``<bos>``
    first, as the checkpoint's tokenizer does (its ``add_bos_token``), so a stamp encoded with it reads back so."""

    @staticmethod
    def encode(text: str, add_special_tokens: bool = True) -> list[int]:
        return [BOS] * bool(add_special_tokens) + [ord(c) for c in text]


def _read_back(ids: list[int]) -> tuple[tuple[float, ...], tuple[int, ...], tuple[str, ...]]:
    """(the seconds each frame's "MM:SS" text says, each frame's soft tokens, the text before each frame's
    ``<boi>`` as written) from ``get_video_repl``'s ids."""
    times, counts, stamps, text, inside = [], [], [], [], False
    for i in ids:
        if i == BOI:
            stamps.append("".join(text))
            minutes, seconds = _MMSS.search(stamps[-1]).groups()  # type: ignore[union-attr]
            times.append(float(int(minutes) * 60 + int(seconds)))
            counts.append(0)
            text, inside = [], True
        elif i == EOI:
            inside = False
        elif inside:
            counts[-1] += i == VIDEO_TOKEN
        else:
            text.append(SPECIAL.get(i) or chr(i))
    return tuple(times), tuple(counts), tuple(stamps)


class VLLMGemma4VideoPath(OwnVideoPath):
    """vLLM's Gemma 4 video path on one release (`reference.system.video.VideoPath`)."""

    family = FAMILY
    checkpoint_files, folder_name, says = FILES, "gemma4", "Gemma 4"

    def __init__(self, source: Source) -> None:
        super().__init__(source)
        models = source.module(MODELS)
        self.max_soft_tokens = int(getattr(models, SOFT_TOKENS))
        import importlib

        from transformers.models.gemma4.configuration_gemma4 import Gemma4VisionConfig

        images = importlib.import_module(IMAGES)
        self._size_fn = images.get_aspect_ratio_preserving_size
        self.image_processor = images.Gemma4ImageProcessor.from_dict(published_config(FAMILY))
        ip = self.image_processor
        vision = Gemma4VisionConfig(patch_size=ip.patch_size, pooling_kernel_size=ip.pooling_kernel_size)
        self._info = object.__new__(getattr(models, INFO))  # only _compute_num_soft_tokens and get_video_repl run
        self._info.get_hf_config = lambda: SimpleNamespace(vision_config=vision, boi_token_id=BOI, eoi_token_id=EOI)
        self._info.ctx = SimpleNamespace(get_tokenizer=_Text)
        self._hf = SimpleNamespace(video_token_id=VIDEO_TOKEN)
        self._sizes: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}

    # --- the request as vLLM takes it -------------------------------------------------------------------------------
    def _media_kwargs(self, request: VideoRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The loader kwargs (`OwnVideoPath._loader_kwargs`: none registered for Gemma 4, so ``VideoMediaIO`` takes
        ``VLLM_VIDEO_LOADER_BACKEND``), and notes on dropped options."""
        merged = self._loader_kwargs(request)
        notes = []
        given = [k for k in ("min_pixels", "max_pixels") if getattr(request, k) is not None]
        if given:
            notes.append(f"{', '.join(given)}: mm_processor_kwargs that no Gemma 4 processor kwarg names, ignored by "
                         "transformers' kwargs routing (Gemma 4 sizes frames by max_soft_tokens; semantics §20.10)")  # fmt: skip
            self._ran["processor kwargs"] = ("restated: transformers ProcessorMixin._merge_kwargs keeps a flat key only "
                                             "where a modality's kwargs name it; Gemma4ProcessorKwargs does not")  # fmt: skip
        if getattr(request, "max_soft_tokens", None) is not None:
            notes.append(f"max_soft_tokens={request.max_soft_tokens}: overwritten with {self.max_soft_tokens} for "
                         "video frames (vLLM #50788)")  # fmt: skip
        return merged, tuple(notes)

    # --- size and tokens, per frame size --------------------------------------------------------------------------
    def _size(self, width: int, height: int) -> tuple[tuple[int, int], int]:
        """((width, height) after the image processor's resize, soft tokens per frame), memoized by the frame size."""
        if (width, height) not in self._sizes:
            ip = self.image_processor
            h, w = self._size_fn(
                height=height,
                width=width,
                patch_size=ip.patch_size,
                max_patches=self.max_soft_tokens * ip.pooling_kernel_size**2,
                pooling_kernel_size=ip.pooling_kernel_size,
            )
            tokens = self._info._compute_num_soft_tokens(width, height, max_soft_tokens=self.max_soft_tokens)
            # the count as the release returns it, not cast: vLLM hands it on to `[token] * n` as is, where a count
            # that is not an int raises (a campaign survivor, `//` made `/`, hid behind an int() here)
            self._sizes[(width, height)] = ((int(w), int(h)), tokens)
        return self._sizes[(width, height)]

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """vLLM's frames, per-frame size, soft tokens and times for ``clip`` (semantics §20.10(b)), nothing decoded."""
        if not isinstance(clip, Clip):
            raise InputTypeError(f"clip must be a Clip, got {type(clip).__name__}")
        kwargs, notes = self._media_kwargs(request)
        metadata, loader = standin.load(self, clip, kwargs)
        self._ran["sampling"] = (
            f"real: {VIDEO}.{loader.__qualname__}.compute_frames_index_to_sample via {MEDIA}.VideoMediaIO.load_bytes "
            f"(stand-in: {standin.where(self._video)} report the Clip's metadata and serve 1x1 frames)"
        )
        taken = tuple(int(i) for i in metadata["frames_indices"])
        (w, h), per_frame = self._size(clip.width, clip.height)
        fps = metadata.get("fps") or 24  # _apply_hf_processor_main's line: the header rate, 24 when it says none
        repl = self._info.get_video_repl(
            timestamps=[i / fps for i in taken], num_soft_tokens_per_frame=[per_frame] * len(taken), processor=self._hf
        )
        times, counts, stamps = _read_back(list(repl.full))
        self._ran["times"] = (
            f"restated: index / (metadata fps or 24) ({MODELS}.Gemma4MultiModalProcessor._apply_hf_processor_main); "
            f"real: {MODELS}.{INFO}.get_video_repl writes the MM:SS text (read back as seconds)"
        )
        patch = self.image_processor.patch_size
        return VideoPlan(
            indices=taken,
            size=(w, h),
            grid=(len(taken), h // patch, w // patch),
            tokens=sum(counts),
            times=times,
            padded=0,
            notes=notes,
            stamps=stamps,
        )

    # --- bytes -----------------------------------------------------------------------------------------------------
    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """The frames vLLM's own loader reads from ``data`` sent as a file (`OwnVideoPath._fetch`): all of them
        reach the image processor."""
        frames, metadata = self._fetch(data, request)
        self._ran["decode"] = FETCHED
        indices = tuple(int(i) for i in metadata["frames_indices"])
        return DecodedVideo(np.asarray(frames), indices, float(metadata["fps"]), int(metadata["total_num_frames"]))

    def provenance(self) -> dict[str, str]:
        ip = type(self.image_processor)
        own = {
            "size": f"real: transformers {IMAGES}.get_aspect_ratio_preserving_size with {ip.__qualname__}'s "
            f"patch_size and pooling_kernel_size ({SOURCES[FAMILY]}), max_patches = {self.max_soft_tokens} x "
            f"pooling**2 ({MODELS}.{SOFT_TOKENS}); grid = (frames, h / patch, w / patch)",
            "tokens": f"real: {MODELS}.{INFO}._compute_num_soft_tokens per frame, max_soft_tokens "
            f"{self.max_soft_tokens}, summed over the frames by get_video_repl's placeholder",
        }
        return self._provenance(
            own, " (None: VideoMediaIO takes VLLM_VIDEO_LOADER_BACKEND)", " (not named by Gemma 4's kwargs)"
        )
