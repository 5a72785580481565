"""vLLM's Qwen2.5-VL and Qwen3-VL image paths, run for real on a CPU (a `reference.system.served.FamilyPath`).

What runs, the release's code and the transformers it pins (`impl.loader.companions`: the wheel's
``Requires-Dist``; torchvision at its pin too, so transformers picks its torchvision backend as in a real
install):

* geometry and prompt tokens: the release's processing info (``Qwen2_5_VLProcessingInfo`` /
  ``Qwen3VLProcessingInfo``) ``_get_vision_info`` and ``get_num_image_tokens``, reading the hf_config's
  ``vision_config`` (patch, merge, temporal patch) and the image processor's ``size``, with the serving
  settings' ``min_pixels`` / ``max_pixels`` merged by the release (``get_merged_mm_kwargs``, the Qwen size
  aliases completed by the info);
* pixels: vLLM's parser, then the transformers image processor vLLM resolves (``AutoImageProcessor`` from the
  checkpoint's config with the release's merged kwargs: ``do_rescale`` / ``do_normalize`` forced off when the
  device normalizes), called with the kwargs the processor routes to it; then, on the device path, the
  release's ``FusedMMInputNorm.forward_native`` (layout ``pcl``: Qwen's patches are ``(N, C*T*p*p)``,
  channel-major), into the tower's dtype.

What is not vLLM's: the processing context (`_context`) builds the image processor alone (vLLM's processor
cache builds ``Qwen2_5_VLProcessor`` with its tokenizer, which a config dict does not ship), and the hf_config
is transformers' config class built with the ``vision_config`` values the config dict states (the checkpoints'
``config.json`` carry the same patch, merge and temporal patch sizes). Host values are returned as the processor
gives them (float32); vLLM then casts floating pixel values to the model dtype (``_postprocess_output``), which
this path leaves to ``dtype``-aware readers. Provenance names each.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, get_type_hints

import numpy as np

from deferlab.impl.vllm import serving
from deferlab.impl.vllm.family import FamilyBase, NotCovered, config_dict, config_key
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.served import Geometry

CONTEXT = "vllm.multimodal.processing.context"
COMPANIONS = ("transformers", "torchvision")


@dataclass(frozen=True)
class QwenFamily:
    """Where the release and transformers keep one Qwen family's pieces."""

    display: str
    model: serving.ModelClass
    info_module: str
    info_class: str
    config_module: str  # transformers
    config_class: str


FAMILIES = {
    "qwen2.5-vl": QwenFamily(
        "Qwen2.5-VL",
        serving.ModelClass("Qwen2_5_VLForConditionalGeneration", "vllm/model_executor/models/qwen2_5_vl.py"),
        "vllm.model_executor.models.qwen2_5_vl",
        "Qwen2_5_VLProcessingInfo",
        "transformers.models.qwen2_5_vl.configuration_qwen2_5_vl",
        "Qwen2_5_VLConfig",
    ),
    "qwen3-vl": QwenFamily(
        "Qwen3-VL",
        serving.ModelClass("Qwen3VLForConditionalGeneration", "vllm/model_executor/models/qwen3_vl.py"),
        "vllm.model_executor.models.qwen3_vl",
        "Qwen3VLProcessingInfo",
        "transformers.models.qwen3_vl.configuration_qwen3_vl",
        "Qwen3VLConfig",
    ),
}


@lru_cache(maxsize=32)
def _image_processor(folder: str, frozen: str) -> Any:
    """transformers' ``AutoImageProcessor.from_pretrained(folder, **kwargs)``: what the processor's loader builds
    its ``image_processor`` with (cached, as vLLM's processor cache is)."""
    import json

    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(folder, **json.loads(frozen))


def _context(source: Source) -> type:
    """The release's ``InputProcessingContext`` whose ``get_hf_processor`` builds the image processor alone."""
    base = source.module(CONTEXT).InputProcessingContext

    def get_hf_processor(self: Any, typ: Any = None, /, **kwargs: Any) -> Any:
        import json

        merged = self.get_merged_mm_kwargs(kwargs)
        merged.pop("tokenizer", None)
        image = _image_processor(self.model_config.model, json.dumps(merged, sort_keys=True, default=list))
        videos = get_type_hints(typ.valid_processor_kwargs).get("videos_kwargs")
        return types.SimpleNamespace(
            valid_processor_kwargs=typ.valid_processor_kwargs,
            image_processor=image,
            video_processor=types.SimpleNamespace(valid_kwargs=videos),
        )

    return type("ImageOnlyContext", (base,), {"get_hf_processor": get_hf_processor, "__module__": __name__})


class QwenPath(FamilyBase):
    """vLLM's image path for Qwen2.5-VL or Qwen3-VL under one serving setting."""

    def __init__(self, source: Source, family: str, settings: serving.Settings | None = None) -> None:
        if family not in FAMILIES:
            raise NotCovered(f"n/a: no vLLM Qwen path for family {family!r}; accepted: {', '.join(FAMILIES)}")
        self.spec = FAMILIES[family]
        self.model, self.display = self.spec.model, self.spec.display
        super().__init__(source, family, settings)
        missing = [c for c in COMPANIONS if c not in source.companions]
        if missing:
            raise NotCovered(
                f"n/a: {self.system} was loaded without {', '.join(missing)}, which its {self.display} path runs"
            )
        self._info_cls = getattr(source.module(self.spec.info_module), self.spec.info_class)
        self._config_cls = getattr(importlib.import_module(self.spec.config_module), self.spec.config_class)
        self._context_cls = _context(source)
        self._states: dict[str, tuple[Any, Any, Any]] = {}

    def hf_config(self, cfg: Mapping[str, Any]) -> Any:
        """transformers' config class with the ``vision_config`` the checkpoint's config states (its own
        ``vision_config`` if it has one; else the preprocessor's patch, merge and temporal patch sizes)."""
        given = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
        vision = {
            "patch_size": cfg.get("patch_size"),
            "spatial_merge_size": cfg.get("merge_size"),
            "temporal_patch_size": cfg.get("temporal_patch_size"),
        }
        vision = {k: v for k, v in vision.items() if v is not None} | dict(given)
        return self._config_cls(vision_config=vision)

    def state(self, cfg: Any) -> tuple[Any, Any, Any]:
        """(context, processing info, image processor) for a checkpoint whose config is ``cfg``."""
        cfg = config_dict(cfg)
        key = config_key(cfg)
        if key not in self._states:
            mm = serving.multimodal_config(self.source, self.settings, self.device_normalize)
            ctx = self._context_cls(model_config=serving.model_config(cfg, mm, self.hf_config(cfg)), tokenizer=None)
            info = self._info_cls(ctx)
            self._states[key] = (ctx, info, info.get_image_processor())
        return self._states[key]

    def geometry(self, width: int, height: int, cfg: Mapping[str, Any]) -> Geometry:
        _, info, image_processor = self.state(cfg)
        size, _ = info._get_vision_info(
            image_width=width,
            image_height=height,
            num_frames=1,
            image_processor=image_processor,
            mm_kwargs={},
            modality="image",
        )
        tokens = info.get_num_image_tokens(
            image_width=width, image_height=height, image_processor=image_processor, mm_kwargs={}
        )
        patch = info.get_hf_config().vision_config.patch_size
        return Geometry(int(size.width), int(size.height), (1, size.height // patch, size.width // patch), int(tokens))

    def serve(self, images: Sequence[Any], cfg: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        ctx, _, image_processor = self.state(cfg)
        accepted = getattr(image_processor.valid_kwargs, "__annotations__", {})
        kwargs = {k: v for k, v in ctx.get_merged_mm_kwargs({}).items() if k in accepted}
        out = image_processor(images=serving.parse(self.source, images), return_tensors="pt", **kwargs)
        values, grids = out["pixel_values"], out["image_grid_thw"].numpy().astype(np.int64)
        if self.device_normalize:
            served = serving.apply(self.norm(cfg), values, self.dtype)
        else:
            served = values.float().numpy()
        return served.reshape(served.shape[0], self.channels, -1), grids

    def host_levels(self, cfg: Mapping[str, Any]) -> np.ndarray:
        """The image processor's own rescale and normalize (``rescale_and_normalize``) on the 256 levels."""
        import torch

        ip = self.state(cfg)[2]
        levels = torch.arange(256, dtype=torch.uint8).repeat(self.channels).reshape(1, self.channels, 1, 256)
        out = ip.rescale_and_normalize(
            levels, ip.do_rescale, ip.rescale_factor, ip.do_normalize, ip.image_mean, ip.image_std
        )
        return out.float().numpy().reshape(self.channels, 256)

    def provenance(self) -> dict[str, str]:
        info = f"{self.spec.info_module}.{self.spec.info_class}"
        built = [s[2] for s in self._states.values()]
        processor = type(built[0]) if built else None
        backend = processor.__mro__[1].__name__ if processor else "the backend transformers resolves"
        name = f"{processor.__module__}.{processor.__qualname__}" if processor else "the AutoImageProcessor class"
        flags = " (do_rescale and do_normalize off: merge_mm_processor_kwargs)" if self.device_normalize else ""
        return {
            "parse": f"real: {serving.PARSE}.MultiModalDataParser._parse_image_data",
            "geometry": f"real: {info}._get_vision_info (the hf_config's vision_config, the image processor's size, "
            "the settings' processor kwargs merged by the release)",
            "num_tokens": f"real: {info}.get_num_image_tokens",
            "serve": f"real: transformers {name}.__call__ ({backend}){flags}, built by AutoImageProcessor."
            "from_pretrained with the release's merged kwargs and called with those the processor routes to it; "
            "modelled: the processor wrapper and tokenizer are not built (ImageOnlyContext.get_hf_processor)",
            "host values": "as the processor returns them (float32); vLLM's _postprocess_output casts them to the "
            "model dtype, not applied here",
            "config": f"modelled: hf_config = transformers {self.spec.config_class}(vision_config from the config "
            "dict); the checkpoint folder holds the config dict",
            **super().provenance(),
        }
