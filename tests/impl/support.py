"""Helpers for the impl tests: small configs that force resizes, BF16 bits; their image strategies (from
`strategies.images`, the one module of them) under the names the tests use.

Pixel properties run on small images (sides < 64); the configs below shrink
the patch limits so those small images still exercise the resize.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import torch
from PIL import Image

from deferlab.properties.strategies.images import pipeline_pil_images as pil_images
from deferlab.properties.strategies.images import seeded_chw_tensors as chw_tensors
from deferlab.properties.strategies.images import tensors_or_pil_images as images
from deferlab.reference.oracle import corpus
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.profiles import profile

__all__ = [
    "BACKGROUNDS",
    "K3",
    "bf16_bits",
    "chw_tensors",
    "corpus_image",
    "images",
    "pil_images",
    "reference_module",
    "small_config",
]

K3 = profile("kimi-k3")

BACKGROUNDS: dict[str, BackgroundConfig | None] = {
    "none": None,
    "white": BackgroundConfig(pattern="white"),
    "black": BackgroundConfig(pattern="black"),
    "gray": BackgroundConfig(pattern="gray"),
    "chessboard": BackgroundConfig(pattern="chessboard", square_size=3, gray_value=180, white_value=255),
}


def small_config(background: BackgroundConfig | None = K3.background, **changes: object) -> PreprocessConfig:
    """Patch 4, merge 2, at most 16 patches and 6 per side: images over ~16 px get resized."""
    base = dict(patch_size=4, merge_kernel_size=2, in_patch_limit=16, patch_limit_on_one_side=6, background=background)
    base.update(changes)
    return PreprocessConfig(**base)  # type: ignore[arg-type]


def bf16_bits(x: torch.Tensor) -> torch.Tensor:
    """The raw 16-bit patterns of a BF16 tensor (bitwise comparison, NaN-safe)."""
    assert x.dtype == torch.bfloat16, x.dtype
    return x.detach().cpu().view(torch.int16)


def reference_module(name: str) -> ModuleType:
    """``reference.oracle.<name>``: the oracle the impl tests compare against (an ImportError fails the test)."""
    return importlib.import_module(f"deferlab.reference.oracle.{name}")


def corpus_image(name: str) -> Image.Image:
    """A decoded real image from the built-in corpus, checked against its manifest (``img.load()`` done)."""
    return corpus.open_checked(corpus.by_name(name))
