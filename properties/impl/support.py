"""Helpers for the ``test_impl_*`` suites: small configs that force resizes, image strategies, BF16 bits.

Pixel properties run on small images (sides < 64); the configs below shrink
the patch limits so those small images still exercise the resize.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np
import torch
from hypothesis import strategies as st
from PIL import Image

from deferlab.reference.oracle import corpus
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.profiles import profile

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


@st.composite
def chw_tensors(draw: st.DrawFn, *, channels: tuple[int, ...] = (1, 3, 4), max_side: int = 40) -> torch.Tensor:
    """uint8 (C, H, W) tensors, C from ``channels``, sides 1..max_side; shrinks to small, dark images."""
    c = draw(st.sampled_from(channels))
    h = draw(st.integers(1, max_side))
    w = draw(st.integers(1, max_side))
    seed = draw(st.integers(0, 2**32 - 1))
    arr = np.random.default_rng(seed).integers(0, 256, size=(c, h, w), dtype=np.uint8)
    return torch.from_numpy(arr)


@st.composite
def pil_images(draw: st.DrawFn, *, max_side: int = 40) -> Image.Image:
    """PIL images in the modes the pipeline stages (RGB, RGBA, L, LA, P, P+transparency)."""
    mode = draw(st.sampled_from(["RGB", "RGBA", "L", "LA", "P", "P+t"]))
    h = draw(st.integers(1, max_side))
    w = draw(st.integers(1, max_side))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if mode in ("RGB", "RGBA", "LA"):
        bands = len(mode)
        return Image.fromarray(rng.integers(0, 256, size=(h, w, bands), dtype=np.uint8), mode)
    if mode == "L":
        return Image.fromarray(rng.integers(0, 256, size=(h, w), dtype=np.uint8), "L")
    img = Image.fromarray(rng.integers(0, 8, size=(h, w), dtype=np.uint8), "P")
    img.putpalette(rng.integers(0, 256, size=8 * 3, dtype=np.uint8).tobytes())
    if mode == "P+t":
        img.info["transparency"] = bytes(rng.integers(0, 256, size=8, dtype=np.uint8).tolist())
    return img


def images() -> st.SearchStrategy:
    """Either a uint8 CHW tensor or a PIL image."""
    return st.one_of(chw_tensors(), pil_images())
