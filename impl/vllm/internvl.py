"""vLLM's InternVL 2.5/3 image path, run for real on a CPU (a `reference.system.served.FamilyPath`).

vLLM serves InternVL (``InternVLChatModel``, the checkpoints' remote-code class) with a processor of its own
(``vllm/transformers_utils/processors/internvl.py``): the model card's tiling (``calculate_internvl_targets``,
``dynamic_preprocess_internvl``: Pillow resize, row-major crops, a thumbnail when more than one tile) and
normalization on the host (``build_transform``: torchvision's ``Resize`` to the tile size, ``ToTensor``,
``Normalize`` with ImageNet's mean/std). The class declares no ``supports_mm_device_do_normalize``, so there is
one path, host-normalized (``served``). What runs: vLLM's parser, then the release's
``InternVLProcessingInfo.get_image_processor`` / ``get_hf_processor`` (``InternVLChatImageProcessor``,
``InternVLChatProcessor.get_num_image_tokens``), reading the hf_config as vLLM does.

What is not vLLM's: the hf_config is the checkpoint's remote ``InternVLChatConfig`` in any real deployment (no
wheel ships it); here it is transformers' ``PretrainedConfig`` carrying the keys vLLM reads, from the config
dict (``config.json``), the keys it leaves out taking `CHECKPOINT_DEFAULTS` (the InternVL 2.5/3 checkpoints'
values); the tokenizer is a stand-in answering ``convert_tokens_to_ids`` (the processor's constructor asks for
its image token ids; no image step reads them). Provenance names each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from deferlab.impl.vllm import serving
from deferlab.impl.vllm.family import FamilyBase, NotCovered, config_dict, config_key
from deferlab.impl.vllm.sources import Source
from deferlab.reference.system.family_configs import INTERNVL_CHECKPOINT_DEFAULTS
from deferlab.reference.system.served import Geometry

PROCESSORS = "vllm.transformers_utils.processors.internvl"
MODELS = "vllm.model_executor.models.internvl"
MODEL = serving.ModelClass("InternVLChatModel", "vllm/model_executor/models/internvl.py")
COMPANIONS = ("transformers", "torchvision")
CHECKPOINT_DEFAULTS = INTERNVL_CHECKPOINT_DEFAULTS  # the checkpoints' config.json values (semantics §18.5)


class _NoTokenizer:
    """The processor's constructor asks a tokenizer for its image token ids; the image path reads none."""

    def convert_tokens_to_ids(self, token: str) -> int:
        return -1

    def get_vocab(self) -> dict[str, int]:
        return {}


class InternVLPath(FamilyBase):
    """vLLM's InternVL image path (host-normalized: the class has no device normalization)."""

    model = MODEL
    display = "InternVL 2.5/3"
    host_path = "served"

    def __init__(self, source: Source, family: str = "internvl", settings: serving.Settings | None = None) -> None:
        super().__init__(source, family, settings)
        missing = [c for c in COMPANIONS if c not in source.companions]
        if missing:
            raise NotCovered(
                f"n/a: {self.system} was loaded without {', '.join(missing)}, which its InternVL path runs"
            )
        if self.device_normalize:  # the release forces it off for a class without support; never reached
            raise NotCovered(f"n/a: {self.system} normalizes InternVL on the device; no such path is checked")
        self._processors = source.module(PROCESSORS)
        self._info_cls = source.module(MODELS).InternVLProcessingInfo
        self._states: dict[str, tuple[Any, Any]] = {}

    def hf_config(self, cfg: Mapping[str, Any]) -> Any:
        """transformers' ``PretrainedConfig`` with the keys vLLM's InternVL info reads (see the module docstring)."""
        from transformers import PretrainedConfig

        vision = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), Mapping) else {}
        size = vision.get("image_size") or cfg.get("force_image_size") or CHECKPOINT_DEFAULTS["image_size"]
        keys = ("downsample_ratio", "min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size", "use_thumbnail")
        top = {k: CHECKPOINT_DEFAULTS[k] if cfg.get(k) is None else cfg[k] for k in keys}
        patch = vision.get("patch_size") or CHECKPOINT_DEFAULTS["patch_size"]
        return PretrainedConfig(vision_config=PretrainedConfig(image_size=size, patch_size=patch), **top)

    def state(self, cfg: Any) -> tuple[Any, Any]:
        """(processing info, its hf processor) for a checkpoint whose config is ``cfg``."""
        cfg = config_dict(cfg)
        key = config_key(cfg)
        if key not in self._states:
            mm = serving.multimodal_config(self.source, self.settings, False)
            ctx = self.source.module("vllm.multimodal.processing.context").InputProcessingContext(
                model_config=serving.model_config(cfg, mm, self.hf_config(cfg)), tokenizer=_NoTokenizer()
            )
            info = self._info_cls(ctx)
            self._states[key] = (info, info.get_hf_processor())
        return self._states[key]

    def _targets(self, processor: Any, width: int, height: int) -> tuple[int, int, int]:
        """(tiles with the thumbnail, canvas width, canvas height): the release's ``calculate_internvl_targets``
        with the ratios its processor resolves, as ``get_num_image_tokens`` calls it."""
        image_processor = processor.image_processor
        return self._processors.calculate_internvl_targets(
            orig_width=width,
            orig_height=height,
            image_size=image_processor.image_size,
            target_ratios=processor.resolve_target_ratios(use_thumbnail=False),
            use_thumbnail=image_processor.use_thumbnail,
        )

    def geometry(self, width: int, height: int, cfg: Mapping[str, Any]) -> Geometry:
        info, processor = self.state(cfg)
        tiles, canvas_w, canvas_h = self._targets(processor, width, height)
        size = processor.image_processor.image_size
        tokens = info.get_num_image_tokens(image_width=width, image_height=height, processor=processor)
        return Geometry(int(canvas_w), int(canvas_h), (canvas_h // size, canvas_w // size, int(tiles)), int(tokens))

    def serve(self, images: Sequence[Any], cfg: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        _, processor = self.state(cfg)
        parsed = serving.parse(self.source, images)
        out = processor.image_processor(images=parsed, return_tensors="pt")
        values = out["pixel_values_flat"].float().numpy()
        size = processor.image_processor.image_size
        grids = []
        for image, n in zip(parsed, out["image_num_patches"].tolist(), strict=True):
            tiles, canvas_w, canvas_h = self._targets(processor, *image.size)
            if tiles != n:
                raise RuntimeError(f"{self.name}: {n} tiles served for {image.size}, {tiles} by its own targets")
            grids.append((canvas_h // size, canvas_w // size, n))
        return values.reshape(values.shape[0], self.channels, -1), np.asarray(grids, np.int64).reshape(-1, 3)

    def host_levels(self, cfg: Mapping[str, Any]) -> np.ndarray:
        """The release's ``build_transform`` (same-size ``Resize``, ``ToTensor``, ``Normalize``) on a 16x16 image
        holding the 256 levels in every channel."""
        levels = np.repeat(np.arange(256, dtype=np.uint8).reshape(16, 16, 1), self.channels, axis=2)
        out = self._processors.build_transform(input_size=16)(Image.fromarray(levels, "RGB"))
        return out.numpy().reshape(self.channels, 256)

    def provenance(self) -> dict[str, str]:
        return {
            "parse": f"real: {serving.PARSE}.MultiModalDataParser._parse_image_data",
            "geometry": f"real: {PROCESSORS}.calculate_internvl_targets (ratios by InternVLChatProcessor."
            "resolve_target_ratios)",
            "num_tokens": f"real: {MODELS}.InternVLProcessingInfo.get_num_image_tokens -> {PROCESSORS}."
            "InternVLChatProcessor.get_num_image_tokens",
            "serve": f"real: {PROCESSORS}.InternVLChatImageProcessor.__call__ (dynamic_preprocess_internvl, "
            "build_transform: torchvision Resize, ToTensor, Normalize), normalized on the host",
            "config": "modelled: hf_config = transformers PretrainedConfig with the config dict's keys, the missing "
            f"ones from the InternVL 2.5/3 checkpoints ({CHECKPOINT_DEFAULTS}); tokenizer: a stand-in for the "
            "image token ids",
            **super().provenance(),
        }
