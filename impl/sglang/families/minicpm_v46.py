"""SGLang's MiniCPM-V 4.6 processor (``processors/minicpmv4_6.py``) as a normalization-only `FamilyPath`
(semantics §18.9).

Why its own path: SGLang does not run the checkpoint's processor for MiniCPM-V 4.6; its
``MiniCPMV4_6MultimodalProcessor`` builds its own ``MiniCPMV4_6ImageProcessor`` (torch: slice grid, resize,
``t * rescale_factor`` then ``(t - mean) / std``, NaViT packing), with the mean, std and rescale factor of that
class's defaults (0.5, 0.5, 1/255), whatever the checkpoint's config says. Here the multimodal processor's own
``__init__`` runs (the base class's answered as `common.construct` does, a tokenizer stand-in that knows no token),
and its own ``_preprocess_images`` serves a level image whose size the slicing keeps (448 x 448: one piece, no
resize), read back through the packing. Only the levels are judged (C15); the geometry is not restated yet.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import common

MODULE = "sglang.srt.multimodal.processors.minicpmv4_6"
SIDE = 448  # the class's scale_resolution: a square of it is one piece at its own size (no slicing, no resize)


class MiniCPMV46Path(common.NormOnlyPath):
    """SGLang's MiniCPM-V 4.6 image path: its own image processor, judged on what it gives each level."""

    family = "minicpm-v-4.6"

    not_restated = "its slicing geometry is not restated"

    def processor(self) -> Any:
        """``MiniCPMV4_6MultimodalProcessor`` built by its own ``__init__`` (patch 14, downsample 16x: the
        defaults it reads off the model config; token ids it cannot resolve stay None)."""

        def build() -> Any:
            hf_config = types.SimpleNamespace(
                vision_config=types.SimpleNamespace(patch_size=14), image_token_id=None, video_token_id=None
            )
            tokenizer = types.SimpleNamespace(convert_tokens_to_ids=lambda tokens: [None] * len(tokens))
            cls = self.module.MiniCPMV4_6MultimodalProcessor
            return common.construct(self.source, cls, hf_config, types.SimpleNamespace(), tokenizer)

        return self.cached("processor", build)

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the path gives each level (``cfg``'s statistics are not read: SGLang's are its own)."""
        image = common.level_image(SIDE, SIDE)
        proc = self.processor()
        # 0.5.23 hands the image processor in (_image_processor_for); 0.5.17-0.5.22 use their own attribute
        handed = len(inspect.signature(proc._preprocess_images).parameters) == 2
        extra = (proc.image_processor,) if handed else ()
        with common.cpu_engine(self.source):
            pixel_values, sizes, grids = proc._preprocess_images([Image.fromarray(image)], *extra)
        if len(pixel_values[0]) != 1 or list(grids[0]) != [0, 0]:
            raise RuntimeError(f"{self.name}: a {SIDE}x{SIDE} image was sliced ({grids[0]}): levels unreadable")
        values = pixel_values[0][0]
        if self.dtype == "bfloat16":
            values = values.to(torch.bfloat16)  # the model's cast to the tower's dtype, modelled as .to
        p = proc.image_processor.patch_size
        rows, cols = (int(s) for s in sizes[0][0])
        # (C, p, rows*cols*p): patch b's row i at [:, i, b*p:(b+1)*p], patches row-major over the image
        canvas = common.widen(values).reshape(3, p, rows, cols, p).transpose(0, 2, 1, 3, 4).reshape(3, SIDE, SIDE)
        return common.canvas_levels(canvas, image, self.name)

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.MiniCPMV4_6MultimodalProcessor"
        return {
            "processor": f"{cls}.__init__ (own; the base class's __init__ answered by deferlab, a tokenizer stand-in)",
            "serve": f"{cls}._preprocess_images -> {MODULE}.MiniCPMV4_6ImageProcessor.preprocess (own: "
            "_to_chw_tensor, _resize, _normalize, _reshape_by_patch)",
            "cast": "the model's cast to the tower's dtype, modelled as .to(bfloat16)"
            if self.dtype == "bfloat16"
            else "none (float32: the processor's own values)",
        }
