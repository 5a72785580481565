"""vLLM's Kimi-K3 image path, run for real on a CPU: what vLLM serves the model (a `ServedPath`).

What runs, all vLLM's own code from the loaded tree (`sources.load`):
``MultiModalDataParser._parse_image_data`` (the input parser every request's
images go through: EXIF orientation, then ``convert_image_mode(..., "RGB")``),
then the Kimi-K3 HF-style processor ``KimiK3Processor`` around the image
processor class the Kimi-K3 processing info serves with (read off the code:
``KimiK25FusedVisionProcessor`` in 0.32.0 and 0.33.0), built with
``from_dict`` from the checkpoint's ``media_proc_cfg`` as vLLM's processor
cache builds it. The prompt's image tokens are that processor's
``get_resize_config(...)["num_tokens"]``, the number ``media_tokens_calculator``
returns (it only converts the image's mode first, never its size). Its fused
patch writer needs numba (the ``deferlab[vllm]`` extra); without numba vLLM
itself raises, and that error is the result.

Releases 0.27.0 to 0.31.0 pass no override: vLLM serves the checkpoint's own
remote-code processor, which no wheel ships. There only the parser is vLLM's
code; the caller hands in the checkpoint's pipeline (``checkpoint=``, the
checkpoint oracle: impl never imports the oracle) and provenance says so.

Serving settings (`serving.Settings`): from 0.32.0 ``KimiK3ForConditionalGeneration``
declares ``supports_mm_device_do_normalize``, so vLLM's default
(``device_normalize=None``) calls the fused processor with ``do_rescale=False,
do_normalize=False`` (uint8 patches, padding level 0) and finishes with the
release's ``FusedMMInputNorm`` (built by its ``build_mm_input_norm`` from the
checkpoint's ``media_proc_cfg``) into the tower's dtype: that path is labelled
``VLLM``. ``device_normalize=False`` is the host path (the processor's own
normalize LUT, float32), labelled ``VLLM host-normalized`` where the release's
default is the device path. Which it is, is the release's own resolution
(`serving.resolve_device_normalize`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from deferlab.impl.vllm import serving, sources
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.config import PreprocessConfig

LABEL = serving.LABEL
PARSE = serving.PARSE
K3_PROCESSOR = "vllm.transformers_utils.processors.kimi_k3"
K3_MODEL = serving.ModelClass("KimiK3ForConditionalGeneration", "vllm/models/kimi_k3/nvidia/model.py")
# Keys the served image processor's __init__ reads that deferlab's profiles do not carry (video settings of a
# Kimi checkpoint; an image never uses them). A checkpoint given with --checkpoint supplies its own.
VIDEO_DEFAULTS = {"temporal_merge_kernel_size": 1, "in_patch_limit_each_frame": None, "in_patch_limit_video": None}


class _Size:
    """An image's size and nothing else: what ``get_resize_config`` reads (pixel-free geometry up to 16384)."""

    def __init__(self, width: int, height: int) -> None:
        self.size = (width, height)


class VLLMPath:
    """vLLM's Kimi-K3 image path under one serving setting (no deferral: every image is preprocessed where the
    request is parsed; from 0.32.0 by default finished on the device)."""

    family = "kimi-k3"
    real_code = True

    def __init__(
        self,
        spec: str | Source = "installed",
        *,
        media_proc_cfg: dict[str, Any] | None = None,
        checkpoint: Any = None,
        device_normalize: bool | None = None,
        processor_kwargs: Mapping[str, Any] | None = None,
        dtype: str = "bfloat16",
    ) -> None:
        self.settings = serving.Settings(device_normalize, processor_kwargs or {}, dtype)
        self.source = spec if isinstance(spec, Source) else sources.load(spec)
        self.system = self.source.name
        self._raw_cfg = media_proc_cfg  # a checkpoint's own media_proc_cfg, used as it is
        processor_module = self.source.module(sources.PREPROCESS)
        name = self.source.processor_name
        self._processor_cls = getattr(processor_module, name) if name else None
        self._checkpoint = checkpoint  # module-like: preprocess(images, cfg), resize_config(w, h, cfg), num_tokens
        self._k3 = self.source.module(K3_PROCESSOR).KimiK3Processor
        default = serving.resolve_device_normalize(self.source, K3_MODEL, None)
        self.device_normalize = serving.resolve_device_normalize(self.source, K3_MODEL, device_normalize)
        if self.device_normalize and not self.serves_own_processor:
            raise NotImplementedError(f"{self.system}: device normalization of the checkpoint's remote-code processor")
        host = "host-normalized" if default else "served"  # 0.27.0-0.31.0: the one path
        self.path, self.label, self.dtype = serving.roles(self.device_normalize, default, self.settings.dtype, host)
        self.name = f"{self.system} ({self.path})"
        self._norms: dict[tuple, Any] = {}

    @property
    def serves_own_processor(self) -> bool:
        """Whether vLLM serves Kimi-K3 with an image processor of its own (else the checkpoint's remote code)."""
        return self._processor_cls is not None

    def _remote(self, what: str) -> Any:
        if self._checkpoint is None:
            raise NotImplementedError(
                f"{self.system} serves Kimi-K3 with the checkpoint's own remote-code image processor (no override "
                f"in {sources.PREPROCESS}), which the wheel does not ship; {what} needs the checkpoint's pipeline "
                "handed in as checkpoint="
            )
        return self._checkpoint

    def describe(self) -> dict[str, Any]:
        return {
            "engine": "vllm",
            "system": self.system,
            "processor": self.source.processor_name,
            "path": self.path,
            "device_normalize": self.device_normalize,
            "dtype": self.dtype,
            "processor_kwargs": dict(self.settings.processor_kwargs),
        }

    def media_proc_cfg(self, cfg: PreprocessConfig) -> dict[str, Any]:
        """The dict vLLM's processor is built from: the checkpoint's own, or the profile's plus `VIDEO_DEFAULTS`."""
        if self._raw_cfg is not None:
            return dict(self._raw_cfg)
        return {**VIDEO_DEFAULTS, **cfg.to_media_proc_cfg()}

    def processor(self, cfg: PreprocessConfig) -> Any:
        return _build(self._processor_cls, _freeze(self.media_proc_cfg(cfg)))

    def parse(self, images: Sequence[Any]) -> list[Any]:
        """The parser's items: what the processor is handed (PIL images become RGB here, arrays pass as they are)."""
        return serving.parse(self.source, images)

    def norm(self, cfg: PreprocessConfig) -> Any:
        """The release's input norm for the checkpoint's config (``{"media_proc_cfg": ...}``), built as the model
        builds it (`serving.input_norm`, layout ``pcl``: ``MoonVision3dPatchEmbed`` flattens each patch)."""
        frozen = _freeze(self.media_proc_cfg(cfg))
        if frozen not in self._norms:
            self._norms[frozen] = serving.input_norm(self.source, {"media_proc_cfg": _thaw(frozen)}, "pcl")
        return self._norms[frozen]

    def serve(self, images: Sequence[Any], cfg: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
        if not self.serves_own_processor:
            return self._remote("serve").preprocess(self.parse(images), cfg)
        kwargs = serving.merged_kwargs(self.source, self.settings, self.device_normalize, {})
        out = self._k3(image_processor=self.processor(cfg), tokenizer=None)(images=self.parse(images), **kwargs)
        values, grids = out["pixel_values"], _numpy(out["grid_thws"])
        if self.device_normalize:  # uint8 (N, 3, p, p) to the device; the tower's patch embed flattens each patch
            return serving.apply(self.norm(cfg), values.flatten(1), self.dtype).reshape(values.shape), grids
        return _numpy(values), grids

    def levels(self, cfg: PreprocessConfig) -> np.ndarray:
        """(3, 256) float32: what this path gives each level (the device norm's table, or the host LUT)."""
        if self.device_normalize:
            return serving.norm_levels(self.norm(cfg), 3, "pcl", self.dtype)
        if not self.serves_own_processor:
            raise NotImplementedError(f"{self.system}: the remote-code processor's levels (use the checkpoint oracle)")
        return np.ascontiguousarray(np.asarray(self.processor(cfg).normalize_lut, np.float32).T)

    def _resize_config(self, width: int, height: int, cfg: PreprocessConfig) -> dict[str, int]:
        if not self.serves_own_processor:
            rc = self._remote("geometry").resize_config(width, height, cfg)
            tokens = self._checkpoint.num_tokens(width, height, cfg)
            return {
                "new_width": rc.new_width,
                "new_height": rc.new_height,
                "pad_width": rc.pad_width,
                "pad_height": rc.pad_height,
                "num_tokens": tokens,
            }
        return self.processor(cfg).get_resize_config({"type": "image", "image": _Size(width, height)})

    def num_tokens(self, width: int, height: int, cfg: PreprocessConfig) -> int:
        return int(self._resize_config(width, height, cfg)["num_tokens"])

    def geometry(self, width: int, height: int, cfg: PreprocessConfig) -> tuple[int, int, int, int]:
        rc = self._resize_config(width, height, cfg)
        return rc["new_width"], rc["new_height"], rc["pad_width"], rc["pad_height"]

    def geometry_function(self, cfg: PreprocessConfig) -> Any:
        """The engine's pure resize-config function with the config bound: (w, h) -> dict (for exhaustive sweeps)."""
        if not self.serves_own_processor:
            return lambda w, h: self._resize_config(w, h, cfg)
        proc = self.processor(cfg)
        module = self.source.module(self._processor_cls.__module__)
        mpc = proc.media_proc_cfg
        args = (mpc["patch_size"], mpc["merge_kernel_size"], mpc["in_patch_limit"], mpc["patch_limit_on_one_side"])
        fixed = mpc["fixed_output_tokens"]
        return lambda w, h: module.navit_resize_image(w, h, *args, fixed)

    def provenance(self) -> dict[str, str]:
        cls = self._processor_cls
        if cls is None:
            remote = "modelled: the checkpoint's own remote-code processor (not in the wheel), by the checkpoint oracle"
            return {
                "parse": f"real: {PARSE}.MultiModalDataParser._parse_image_data",
                "serve": remote,
                "num_tokens": remote,
                "geometry": remote,
                "config": "the checkpoint's media_proc_cfg",
            }
        flags = "do_rescale=False, do_normalize=False (merge_mm_processor_kwargs)" if self.device_normalize else ""
        return {
            "parse": f"real: {PARSE}.MultiModalDataParser._parse_image_data",
            "serve": f"real: {K3_PROCESSOR}.KimiK3Processor.__call__ -> {cls.__module__}.{cls.__qualname__}.preprocess"
            + (f" with {flags}" if flags else ""),
            "num_tokens": f"real: {cls.__module__}.{cls.__qualname__}.get_resize_config",
            "geometry": f"real: {cls.__module__}.{cls.__qualname__}.get_resize_config",
            "config": "real: the checkpoint's media_proc_cfg"
            if self._raw_cfg is not None
            else "real: the profile's media_proc_cfg plus video keys the image path never reads (VIDEO_DEFAULTS)",
            **serving.steps(K3_MODEL, self.settings, self.device_normalize, "pcl", self._norms.values(), self.dtype),
        }


def _freeze(d: dict[str, Any]) -> tuple:
    return tuple(
        sorted((k, tuple(v) if isinstance(v, list) else _freeze(v) if isinstance(v, dict) else v) for k, v in d.items())
    )


def _thaw(t: tuple) -> dict[str, Any]:
    return {
        k: list(v)
        if isinstance(v, tuple) and k in ("image_mean", "image_std")
        else _thaw(v)
        if isinstance(v, tuple) and v and isinstance(v[0], tuple)
        else v
        for k, v in t
    }


@lru_cache(maxsize=16)
def _build(cls: type, frozen: tuple) -> Any:
    """The processor as vLLM's processor cache builds it (``from_dict`` of the preprocessor config)."""
    return cls.from_dict({"media_proc_cfg": _thaw(frozen)})


def _numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
