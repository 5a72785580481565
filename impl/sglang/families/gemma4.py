"""SGLang's Gemma 4 processor (``processors/gemma4.py``) as a normalization-only `FamilyPath` (semantics §18.9).

Why this path: ``Gemma4SGLangProcessor`` computes nothing of an image itself; each image goes through the base
class's ``_load_single_item`` (``convert("RGB")``) and then the checkpoint's transformers ``Gemma4Processor``
(``process_mm_data``), whose image processor is what ``AutoImageProcessor`` resolves for the published
``Gemma4ImageProcessor`` config in the release's pinned transformers: the torchvision backend, rescaling with
``image * rescale_factor`` on the uint8 tensor, where the trained side (the PIL backend) multiplies in float64
(semantics §18.1). Here the loader and that image processor run on a level image the processor keeps at its size
(768 x 768 is its own aspect-ratio target), and the levels are read off its patches put back in place (C15).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import common
from deferlab.impl.sglang.families.auto_image import auto_image_processor, cast_step, served_steps, with_normalization
from deferlab.reference.system.family_configs import NormConfig
from deferlab.reference.system.family_configs_published import PUBLISHED

MODULE = "sglang.srt.multimodal.processors.gemma4"
SIDE = 768  # floor(sqrt(280 * 9 * 256) / 48) * 48: a square of it is its own target size, so no resize runs


class Gemma4Path(common.NormOnlyPath):
    """SGLang's Gemma 4 image path: the base loader, then transformers' image processor where SGLang puts it."""

    family = "gemma4"

    not_restated = "its aspect-ratio resize and patch budget are not restated"

    def image_processor(self, cfg: Any) -> Any:
        """transformers' image processor (the release's companion) for the published config with ``cfg``'s rescale
        and normalize, by its own backend resolution (SGLang names no backend)."""
        table = with_normalization(dict(PUBLISHED["gemma4"]), NormConfig.checked(cfg))
        return auto_image_processor(self, table, "deferlab-gemma4-")

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the path gives each level, read off the patches of a level image kept at its size."""
        ip = self.image_processor(cfg)
        image = common.level_image(SIDE, SIDE)
        modality = self.source.module("managers.schedule_batch").Modality.IMAGE
        loaded = self.module.Gemma4SGLangProcessor._load_single_item(
            Image.fromarray(image), modality, discard_alpha_channel=True
        )
        out = ip(images=[loaded], return_tensors="pt")  # as process_mm_data calls it: no images kwargs
        values, positions = out["pixel_values"][0], out["image_position_ids"][0]
        p, side = int(ip.patch_size), SIDE // int(ip.patch_size)
        real = positions[:, 0] >= 0  # padding patches carry position -1
        if int(real.sum()) != side * side or int(positions[real].max()) != side - 1:
            raise RuntimeError(f"{self.name}: a {SIDE}x{SIDE} image was resized: levels unreadable")
        if self.dtype == "bfloat16":
            values = values.to(torch.bfloat16)  # the model's cast to the tower's dtype, modelled as .to
        patches = common.widen(values[real]).reshape(side, side, p, p, 3)  # raster order, channels last in a patch
        return common.canvas_levels(patches.transpose(4, 0, 2, 1, 3).reshape(3, SIDE, SIDE), image, self.name)

    def provenance(self) -> dict[str, str]:
        served = "transformers.models.gemma4.image_processing_gemma4.Gemma4ImageProcessor"
        return {
            "load": f"{MODULE}.Gemma4SGLangProcessor._load_single_item (the base class's: convert RGB)",
            **served_steps(self, served, "the published Gemma 4 config"),
            "cast": cast_step(self.dtype),
        }
