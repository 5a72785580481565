"""The checkpoint's image processor where SGLang hands its images to transformers (Gemma 4's and GLM-4.1V's paths):
``AutoImageProcessor`` of the release's pinned transformers for a ``preprocessor_config.json``.

Why one builder: SGLang names no image processor class or backend for these families; transformers resolves them
from the checkpoint's file, so the path writes the published config (with the statistics a test draws) into a
folder and lets the companion's ``AutoImageProcessor`` read it, once per config (its ``__init__`` runs once).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from deferlab.impl.sglang.families import common
from deferlab.reference.system.family_configs import NormConfig


def with_normalization(table: dict[str, Any], cfg: NormConfig) -> dict[str, Any]:
    """``table`` (a published ``preprocessor_config.json``) with ``cfg``'s rescale and normalize, so drawn statistics
    reach the processor."""
    table.update(image_mean=list(cfg.image_mean), image_std=list(cfg.image_std))
    table.update(rescale_factor=cfg.rescale_factor, do_rescale=cfg.do_rescale, do_normalize=cfg.do_normalize)
    return table


def auto_image_processor(path: common.FamilyPathBase, table: dict[str, Any], prefix: str) -> Any:
    """The companion transformers' ``AutoImageProcessor.from_pretrained`` of a folder (named ``prefix``...) holding
    ``table`` as its ``preprocessor_config.json`` (its own backend resolution), built once per table."""

    def build() -> Any:
        auto = path.source.companions["transformers"].module("transformers").AutoImageProcessor
        with tempfile.TemporaryDirectory(prefix=prefix) as folder:
            (Path(folder) / "preprocessor_config.json").write_text(json.dumps(table))
            return auto.from_pretrained(folder)

    return path.cached(("ip", json.dumps(table, sort_keys=True)), build)


def served_steps(path: common.FamilyPathBase, served: str, read: str) -> dict[str, str]:
    """The provenance of transformers' part: the image processor class that serves (``served``, its module path)
    called as ``process_mm_data`` calls the checkpoint's processor, and what ``AutoImageProcessor`` read (``read``)."""
    version = path.source.companions["transformers"].version
    return {
        "serve": f"{served} ({version}, torchvision backend) called as process_mm_data calls the checkpoint's "
        "processor (no images kwargs, no device without CUDA); the HF processor's text side not run",
        "image_processor": f"transformers.AutoImageProcessor.from_pretrained of {read} (its own backend resolution)",
    }


def cast_step(dtype: str) -> str:
    """The provenance of the values' last step: the model's cast to the tower's dtype, or none in float32."""
    if dtype == "bfloat16":
        return "the model's cast to the tower's dtype, modelled as .to(bfloat16)"
    return "none (float32: the processor's own values)"
