"""SGLang's MiMo-V2 processor (``processors/mimo_v2.py``) as a normalization-only `FamilyPath` for MiMo-V2.5
(semantics §18.9).

Why its own path: SGLang does not run a checkpoint processor for MiMo-V2.5; its ``MiMoProcessor.process_image``
calls the class's own ``get_visual_transform``: ``convert("RGB")``, its own ``smart_resize``, a float bilinear
``F.interpolate``, then ``standardize_batch``, ``(x - mean) / std`` on 0..255 values with the module's constants
(ImageNet's in 0.5.17-0.5.21, CLIP's times 255 from 0.5.22), whatever the checkpoint says. Here that classmethod
runs as shipped on a level image whose size it keeps (448 x 448, a multiple of the factor: the interpolate is an
identity), and the levels are read off its ``(C, H, W)`` output. Only the levels are judged (C15).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import common

MODULE = "sglang.srt.multimodal.processors.mimo_v2"
SIDE = 448  # a multiple of the factor (patch 14 x merge 2), inside the pixel bounds below: its size is kept
FACTOR, MIN_PIXELS, MAX_PIXELS = 28, 28 * 28, 16384 * 28 * 28


class MiMoV2Path(common.NormOnlyPath):
    """SGLang's MiMo-V2.5 image path: its own resize and standardization, judged on what it gives each level."""

    family = "mimo-v2.5"

    not_restated = "its own smart_resize is not restated"

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the path gives each level (``cfg``'s statistics are not read: SGLang's are its own)."""
        image = common.level_image(SIDE, SIDE)
        with common.cpu_engine(self.source):
            values, width, height = self.module.MiMoProcessor.get_visual_transform(
                Image.fromarray(image), FACTOR, MIN_PIXELS, MAX_PIXELS
            )
        if (width, height) != (SIDE, SIDE):
            raise RuntimeError(f"{self.name}: a {SIDE}x{SIDE} image was resized to {width}x{height}: levels unreadable")
        if self.dtype == "bfloat16":
            values = values.to(torch.bfloat16)  # the model's cast to the tower's dtype, modelled as .to
        return common.canvas_levels(common.widen(values), image, self.name)

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.MiMoProcessor"
        return {
            "serve": f"{cls}.get_visual_transform (own: convert RGB, smart_resize, F.interpolate bilinear, "
            "standardize_batch with the module's mean/std), as process_image calls it; the patch flattening after "
            "it (_flatten_visual_inputs, a permutation) not run",
            "cast": "the model's cast to the tower's dtype, modelled as .to(bfloat16)"
            if self.dtype == "bfloat16"
            else "none (float32: the processor's own values)",
        }
