"""The modes the pipeline stages, with random content: the impl tests' images and tensors (pixels from a
drawn seed, so a 40 x 40 image costs one draw). Re-exported by `strategies.images`, where they were."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from PIL import Image


@st.composite
def seeded_chw_tensors(draw: st.DrawFn, *, channels: tuple[int, ...] = (1, 3, 4), max_side: int = 40) -> Any:
    """uint8 (C, H, W) torch tensors, C from ``channels``, sides 1..max_side, pixels from a drawn seed; shrinks to
    small images of the first channel count."""
    import torch

    c = draw(st.sampled_from(channels))
    h = draw(st.integers(1, max_side))
    w = draw(st.integers(1, max_side))
    seed = draw(st.integers(0, 2**32 - 1))
    arr = np.random.default_rng(seed).integers(0, 256, size=(c, h, w), dtype=np.uint8)
    return torch.from_numpy(arr)


@st.composite
def pipeline_pil_images(draw: st.DrawFn, *, max_side: int = 40) -> Image.Image:
    """PIL images in the modes the pipeline stages (RGB, RGBA, L, LA, P, P+transparency), pixels from a drawn seed."""
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


def tensors_or_pil_images() -> st.SearchStrategy:
    """Either a `seeded_chw_tensors` tensor or a `pipeline_pil_images` image."""
    return st.one_of(seeded_chw_tensors(), pipeline_pil_images())
