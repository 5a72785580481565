"""SGLang's MiMo-V2 processor (``processors/mimo_v2.py``) as a `FamilyPath` for MiMo-V2.5 (semantics §18.9).

Why its own path: SGLang does not run a checkpoint processor for MiMo-V2.5; its ``MiMoProcessor.process_image``
calls the class's own ``get_visual_transform``: ``convert("RGB")``, its own ``smart_resize``, a float bilinear
``F.interpolate``, then ``standardize_batch``, ``(x - mean) / std`` on 0..255 values with the module's constants
(ImageNet's in 0.5.17-0.5.21, CLIP's times 255 from 0.5.22), whatever the checkpoint says. Here that classmethod
runs as shipped on a level image whose size it keeps (448 x 448, a multiple of the factor: the interpolate is an
identity), and the levels are read off its ``(C, H, W)`` output (C15).

Geometry (C13): ``process_image`` passes ``get_visual_transform`` the factor and the processor's default image
bounds (the checkpoint's ``processor_config`` ``image_min_pixels`` / ``image_max_pixels``, else 4 and 4096 factor
squares); `bounds` reads them from the release's own ``MiMoProcessor.from_hf_config`` for a config that names
none, and `geometry` runs ``MiMoProcessor.smart_resize`` as shipped with them; `staged_geometry` names it for C13's
exhaustive sweep.

Pixels (C14, `run`): each image through the multimodal processor's own ``_load_single_item`` (``convert("RGB")``:
alpha and keys dropped), then the ``MiMoProcessor`` instance `bounds` builds runs its own ``_process_image_content``
(``process_image``: ``get_visual_transform`` with its default bounds; ``_flatten_visual_inputs``: its patch layout,
the frame repeated over the temporal patch; the prompt's image tokens), then the model's cast to BF16.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import common
from deferlab.reference.system.family_configs import MiMoConfig
from deferlab.reference.system.served import Geometry
from deferlab.reference.system.validate import check_instance

MODULE = "sglang.srt.multimodal.processors.mimo_v2"
SIDE = 448  # a multiple of the factor (patch 14 x merge 2), inside the pixel bounds below: its size is kept
FACTOR, MIN_PIXELS, MAX_PIXELS = 28, 28 * 28, 16384 * 28 * 28


class MiMoV2Path(common.NormOnlyPath):
    """SGLang's MiMo-V2.5 image path: its own resize and standardization, judged on what it gives each level."""

    family = "mimo-v2.5"
    judged_claims = ("C13", "C14")  # its own smart_resize (C13) and float resize (C14) are judged

    def instance(self) -> Any:
        """``MiMoProcessor.from_hf_config`` for a checkpoint config naming no image bounds (``use_video_timestamps``
        on: the one key its ``__init__`` requires); no device named: the CPU."""

        def build() -> Any:
            hf_config = types.SimpleNamespace(
                processor_config={"use_video_timestamps": True}, audio_config=None, vision_config={}
            )
            with common.cpu_engine(self.source):
                return self.module.MiMoProcessor.from_hf_config(hf_config)

        return self.cached(("instance",), build)

    def run(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """(values (N, 3, T*p*p) of the path's dtype widened, grid (n, 3), tokens per image): each image loaded by
        SGLang's loader, then ``_process_image_content`` as shipped (module docstring)."""
        check_instance("cfg", cfg, MiMoConfig, "reference.system.family_configs.family_profile")
        m, inst = self.module, self.instance()
        modality = self.source.module("managers.schedule_batch").Modality.IMAGE
        values, grids, tokens = [], [], []
        for image in images:
            loaded = m.MiMoV2Processor._load_single_item(image, modality, discard_alpha_channel=True)
            with common.cpu_engine(self.source):
                out = inst._process_image_content(m.Content(type="image", content=m.ImageInput(image=loaded)), False)
            patches = out["pixel_values"]
            if self.dtype == "bfloat16":
                patches = patches.to(torch.bfloat16)  # the model's cast to the tower's dtype, modelled as .to
            values.append(common.widen(patches).reshape(patches.shape[0], 3, -1))
            grids.append(out["thw_grid"].to(torch.int64).numpy()[None])
            tokens.append(len(out["input_ids"]) - 2)  # its image tokens between vision start and end
        return np.concatenate(values), np.concatenate(grids), tokens

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        values, grid, _ = self.run(images, cfg)
        return values, grid

    def bounds(self) -> tuple[int, int]:
        """(min_pixels, max_pixels) ``process_image`` passes by default: the release's ``MiMoProcessor.from_hf_config``
        for a checkpoint config naming no image bounds (``use_video_timestamps`` on: the one key its ``__init__``
        requires), read off ``default_image_processor_kwargs``."""

        kwargs = self.instance().default_image_processor_kwargs
        return int(kwargs["min_pixels"]), int(kwargs["max_pixels"])

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        """``MiMoProcessor.smart_resize`` of the size with the factor and default bounds, its grid and tokens (the
        vision config's patch and merge: the config's); a raise propagates (a refusal)."""
        cfg = check_instance("cfg", cfg, MiMoConfig, "reference.system.family_configs.family_profile")
        low, high = self.bounds()
        new_h, new_w = (int(v) for v in self.module.MiMoProcessor.smart_resize(height, width, cfg.factor, low, high))
        gh, gw = new_h // cfg.patch_size, new_w // cfg.patch_size
        return Geometry(new_w, new_h, (1, gh, gw), gh * gw // cfg.merge_size**2)

    def staged_geometry(self, cfg: MiMoConfig) -> tuple[str, str, Any, tuple[int, int, int], None]:
        """(module, name, function, arguments, no second stage) for C13's exhaustive sweep
        (`properties.family_geometry`): ``MiMoProcessor.smart_resize(h, w, factor, min, max)``."""
        low, high = self.bounds()
        return (
            f"{MODULE}.MiMoProcessor",
            "smart_resize",
            self.module.MiMoProcessor.smart_resize,
            (cfg.factor, low, high),
            None,
        )

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
            "geometry": f"{cls}.smart_resize (own) with the factor and {cls}.from_hf_config's default image bounds "
            "(a checkpoint config naming none)",
            "load": f"{MODULE}.MiMoV2Processor._load_single_item (own, discard_alpha_channel as load_mm_data passes it)",
            "serve": f"{cls}.get_visual_transform (own: convert RGB, smart_resize, F.interpolate bilinear, "
            "standardize_batch with the module's mean/std), as process_image calls it inside _process_image_content "
            "(own; its _flatten_visual_inputs lays the patches out); the levels read off get_visual_transform on a "
            "level image it keeps",
            "cast": "the model's cast to the tower's dtype, modelled as .to(bfloat16)"
            if self.dtype == "bfloat16"
            else "none (float32: the processor's own values)",
        }
