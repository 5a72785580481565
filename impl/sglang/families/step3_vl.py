"""SGLang's Step3-VL processor (``processors/step3_vl.py``) as a normalization-only `FamilyPath` (semantics §18.9).

Why its own path: SGLang does not run the checkpoint's processor for Step3-VL; ``Step3VLImageProcessor.__init__``
builds the module's own ``Step3VLProcessor`` on the tokenizer, whose ``ImagePatcher`` squares, caps and windows the
image and whose ``Step3VisionProcessor`` takes the global view and each window through ``ToTensor``, then
``Normalize`` with the CLIP constants written in the class, then ``Resize``. Here that processor's own ``__init__``,
``_split_images`` and ``_convert_images_to_pixel_values`` run as shipped on a 728 x 728 level image (no padding, no
cap, no window; the final resize keeps its size), and the levels are read off the global view (C15). The windowing
geometry is not judged: the checkpoint's remote code it copies is unread, and its two copies (SGLang's, vLLM's)
disagree at a long side of 728 (semantics §18.9).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import common

MODULE = "sglang.srt.multimodal.processors.step3_vl"
SIDE = 728  # the global view's size: a square of it is neither padded, capped nor windowed, and its resize is none


class Step3VLPath(common.NormOnlyPath):
    """SGLang's Step3-VL image path: its own patcher and vision transform, judged on what it gives each level."""

    family = "step3-vl"

    not_restated = "its windowing geometry is not judged: the checkpoint's remote-code rule is unread"

    def processor(self) -> Any:
        """``Step3VLProcessor`` built by its own ``__init__`` (no config or tokenizer read for the images: the
        sizes 728 / 504 and the statistics are written in the class)."""
        return self.cached("processor", lambda: self.module.Step3VLProcessor(None, None))

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the path gives each level (``cfg``'s statistics are not read: SGLang's are its own)."""
        image = common.level_image(SIDE, SIDE)
        proc = self.processor()
        with common.cpu_engine(self.source):
            ((view, patches, _),) = proc._split_images([Image.fromarray(image)])
            if patches:
                raise RuntimeError(f"{self.name}: a {SIDE}x{SIDE} image was windowed ({len(patches)} windows)")
            (values,) = proc._convert_images_to_pixel_values([view])
        if tuple(values.shape) != (1, 3, SIDE, SIDE):
            raise RuntimeError(f"{self.name}: the global view came out {tuple(values.shape)}: levels unreadable")
        if self.dtype == "bfloat16":
            values = values.to(torch.bfloat16)  # the model's cast to the tower's dtype, modelled as .to
        return common.canvas_levels(common.widen(values[0]), image, self.name)

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.Step3VLProcessor"
        return {
            "processor": f"{cls}.__init__ (own; as Step3VLImageProcessor.__init__ builds it, the tokenizer unread here)",
            "serve": f"{cls}._split_images -> {MODULE}.ImagePatcher.__call__, then {cls}._convert_images_to_pixel_values"
            f" -> {MODULE}.Step3VisionProcessor (own: GPUToTensor, Normalize with its CLIP constants, Resize 728)",
            "cast": "the model's cast to the tower's dtype, modelled as .to(bfloat16)"
            if self.dtype == "bfloat16"
            else "none (float32: the processor's own values)",
        }
