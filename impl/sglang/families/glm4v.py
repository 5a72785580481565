"""SGLang's GLM-4V processor (``processors/glm4v.py``) as a `FamilyPath` for GLM-4.1V, judged on normalization
(C15), geometry (C13) and pixels (C14; semantics §18.9).

Why this path: SGLang's ``Glm4vImageProcessor`` resizes and normalizes nothing of an image itself (the
``IMAGE_FACTOR`` / ``MIN_PIXELS`` / ``MAX_PIXELS`` its ``__init__`` sets are read by nothing); it loads each image
with its class's ``_load_single_item`` (from 0.5.20 its ``smart_rgb_conversion``: ``smart_to_rgb``) and hands it to
the checkpoint's transformers processor (``process_mm_data``), whose image processor is transformers'
``Glm4vImageProcessor`` of the release's pin (torchvision backend) on the fast-processor device (none on a host
without CUDA: the CPU). Here the class's own loader runs on a level image, then the release's
``AutoImageProcessor`` for the checkpoint's ``preprocessor_config.json`` is called as ``process_mm_data`` calls its
processor (no images kwargs: ``--mm-process-config`` is empty by default); the HF processor's text side is not run.

Geometry: the image processor's ``resize`` calls its module's ``smart_resize(num_frames=T, h, w, temporal_factor=T,
factor=patch*merge, min_pixels=size.shortest_edge, max_pixels=size.longest_edge)``; `geometry` runs that function
of the companion with the processor's own values, `staged_geometry` names it for C13's exhaustive sweep.

Pixels (C14, `serve`): each image through the class's own loader, then that processor (its torchvision resize, fused
rescale and normalize, patch layout), then the tower's cast; against the checkpoint's ``Glm4vImageProcessorPil``
restated (`reference.oracle.glm4v.preprocess`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl import compiled
from deferlab.impl.sglang.families import common
from deferlab.impl.sglang.families.auto_image import auto_image_processor, cast_step, served_steps, with_normalization
from deferlab.impl.sglang.families.qwen_vl import QwenVLPath
from deferlab.reference.system.family_configs import NormConfig
from deferlab.reference.system.family_configs_published import PUBLISHED
from deferlab.reference.system.served import Geometry
from deferlab.reference.system.validate import check_positive_int

MODULE = "sglang.srt.multimodal.processors.glm4v"
PROCESSOR_MODULE = "transformers.models.glm4v.image_processing_glm4v"
SIDE = 112  # a multiple of the factor (28) whose 2 * 112 * 112 pixels are inside the published bounds: kept
# smart_resize(num_frames, h, w, temporal_factor, factor, min, max) -> (h, w), as the processor's resize calls it
CALL = compiled.Call("f(a0, h, w, a0, a1, a2, a3)", ("r[1]", "r[0]"))


class Glm4vPath(common.NormOnlyPath):
    """SGLang's GLM-4.1V image path: its own loader, then transformers' image processor where SGLang puts it."""

    family = "glm-4.1v"

    judged_claims = ("C13", "C14")  # its geometry (the processor's smart_resize) and its pixels (semantics §18.9)

    def preprocessor_config(self, cfg: NormConfig) -> dict[str, Any]:
        """The checkpoint's ``preprocessor_config.json``: the published GLM-4.1V one with ``cfg``'s rescale and
        normalize (so drawn statistics reach the processor), and its geometry where ``cfg`` has one (C13)."""
        cfg = NormConfig.checked(cfg)
        found = dict(PUBLISHED["glm-4.1v"])
        if getattr(cfg, "kind", None) == "glm4v":  # a Glm4vConfig: its bounds, patch, merge and temporal patch
            found.update({k: getattr(cfg, k) for k in ("patch_size", "merge_size", "temporal_patch_size")})
            found.update(size={"shortest_edge": cfg.min_pixels, "longest_edge": cfg.max_pixels})  # type: ignore[attr-defined]
        return with_normalization(found, cfg)

    def image_processor(self, cfg: Any) -> Any:
        """transformers' image processor (the release's companion) for the config, by its own resolution."""
        return auto_image_processor(self, self.preprocessor_config(cfg), "deferlab-glm4v-")

    def resize_call(self, cfg: Any) -> tuple[Any, tuple[int, int, int, int]]:
        """The image processor module's ``smart_resize`` and (T, factor, min_pixels, max_pixels) as its ``resize``
        passes them (the processor's own attributes)."""
        ip = self.image_processor(cfg)
        fn = self.source.companions["transformers"].module(PROCESSOR_MODULE).smart_resize
        size = ip.size
        t, factor = int(ip.temporal_patch_size), int(ip.patch_size * ip.merge_size)
        return fn, (t, factor, int(size["shortest_edge"]), int(size["longest_edge"]))

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """``smart_resize`` of the size as the processor calls it, its grid and tokens; a raise propagates."""
        width, height = check_positive_int("width", width), check_positive_int("height", height)
        fn, (t, factor, low, high) = self.resize_call(cfg)
        new_h, new_w = (int(v) for v in fn(t, height, width, t, factor, low, high))
        ip = self.image_processor(cfg)
        gh, gw = new_h // ip.patch_size, new_w // ip.patch_size
        return Geometry(new_w, new_h, (1, gh, gw), gh * gw // ip.merge_size**2)

    def staged_geometry(self, cfg: Any) -> tuple[str, str, Any, tuple[int, int, int, int], None]:
        """(module, name, function, arguments, no second stage) for C13's exhaustive sweep."""
        fn, args = self.resize_call(cfg)
        return PROCESSOR_MODULE, "smart_resize", fn, args, None

    def levels(self, cfg: Any) -> np.ndarray:
        """(3, 256): what the path gives each level, read off a served image the processor keeps at its size."""
        ip = self.image_processor(cfg)
        image = common.level_image(SIDE, SIDE)
        g = self.geometry(SIDE, SIDE, cfg)
        if (g.width, g.height) != (SIDE, SIDE):
            raise RuntimeError(f"{self.name}: a {SIDE}x{SIDE} image is resized ({g}): levels unreadable")
        values, grid = self.serve([Image.fromarray(image)], cfg)
        canvas = QwenVLPath._canvas(values, grid[0], ip)
        return common.canvas_levels(canvas, image, self.name)

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        """(values (N, 3, T*p*p) of the path's dtype widened, grid (n, 3) int64): each image through the class's
        own ``_load_single_item`` (as ``load_mm_data`` calls it), then the image processor as ``process_mm_data``
        calls it, then the tower's cast."""
        ip = self.image_processor(cfg)
        modality = self.source.module("managers.schedule_batch").Modality.IMAGE
        values, grids = [], []
        for image in images:
            loaded = self.module.Glm4vImageProcessor._load_single_item(image, modality, discard_alpha_channel=True)
            out = ip(images=[loaded], return_tensors="pt")
            found = out["pixel_values"]
            if self.dtype == "bfloat16":
                found = found.to(torch.bfloat16)  # the tower's cast to its dtype, modelled as .to
            flat = common.widen(found)
            values.append(flat.reshape(len(flat), 3, -1))
            grids.append(out["image_grid_thw"].to(torch.int64).numpy())
        return np.concatenate(values), np.concatenate(grids)

    def provenance(self) -> dict[str, str]:
        cls = f"{MODULE}.Glm4vImageProcessor"
        version = self.source.companions["transformers"].version
        return {
            "load": f"{cls}._load_single_item (own; smart_rgb_conversion where the release sets it)",
            **served_steps(
                self, f"{PROCESSOR_MODULE}.Glm4vImageProcessor", "the checkpoint's preprocessor_config.json"
            ),
            "geometry": f"{PROCESSOR_MODULE}.smart_resize ({version}) with the image processor's temporal patch, "
            "factor and size, as its resize calls it",
            "cast": cast_step(self.dtype),
        }
