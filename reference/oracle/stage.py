"""Staging: any accepted image -> (C, H, W) uint8, C in {3, 4} (semantics §3.1).

This is what the producer ships under CPU transport and what the owner starts
from, so every later stage (and the deferral gate's byte count) depends on
getting the channel count right. PIL images follow upstream's ``has_alpha``
rule but are converted with our own `reference.oracle.modes` (never Pillow's
``convert``, except for the colour-space modes in `DELEGATED_MODES`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle.modes import DELEGATED_MODES, to_rgb, to_rgba
from deferlab.reference.system.config import DEFAULT_MAX_PIXELS
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.validate import (
    as_array,
    check_image_size,
    check_positive_int,
    is_tensor_like,
    type_name,
)

__all__ = ["DELEGATED_MODES", "has_alpha", "image_size", "raw_channels", "to_chw_uint8"]

_ACCEPTED = "a PIL.Image.Image, or a uint8 array/tensor shaped (C, H, W) with C in {1, 3, 4} or (H, W)"


def has_alpha(image: Image.Image) -> bool:
    """semantics §3.1: ``mode != "RGB"`` and (an ``"A"`` band or a ``transparency`` key).

    Literal band names: ``La``/``RGBa`` (lower-case ``a``) are *not* alpha,
    while ``LAB`` (whose ``"A"`` is the a* chroma axis) *is*, so a LAB image
    stages to 4 channels with an opaque alpha. Upstream's rule, kept as is.
    """
    if not isinstance(image, Image.Image):
        raise InputTypeError(f"has_alpha expects a PIL.Image.Image, got {type_name(image)}")
    return image.mode != "RGB" and ("A" in image.getbands() or "transparency" in image.info)


def _array_of(image: Any) -> np.ndarray | None:
    if isinstance(image, np.ndarray) or is_tensor_like(image):
        return as_array("image", image)
    return None


def image_size(image: Any) -> tuple[int, int]:
    """(width, height): PIL ``.size``; arrays read as CHW (width = shape[2]) or (H, W)."""
    if isinstance(image, Image.Image):
        return image.size
    arr = _array_of(image)
    if arr is None:
        raise InputTypeError(f"image must be {_ACCEPTED}; got {type_name(image)}")
    if arr.ndim == 2:
        return int(arr.shape[1]), int(arr.shape[0])
    if arr.ndim == 3:
        return int(arr.shape[2]), int(arr.shape[1])
    raise InputValueError(f"image array must be 2-D (H, W) or 3-D (C, H, W), got shape {arr.shape}")


def raw_channels(image: Any) -> int:
    """The gate's channel count (semantics §4): arrays ``3 if 2-D or shape[0] == 1 else shape[0]``; PIL 4 or 3."""
    if isinstance(image, Image.Image):
        return 4 if has_alpha(image) else 3
    arr = _array_of(image)
    if arr is None:
        raise InputTypeError(f"image must be {_ACCEPTED}; got {type_name(image)}")
    if arr.ndim not in (2, 3):
        raise InputValueError(f"image array must be 2-D (H, W) or 3-D (C, H, W), got shape {arr.shape}")
    return 3 if arr.ndim == 2 or arr.shape[0] == 1 else int(arr.shape[0])


def _stage_pil(image: Image.Image, max_pixels: int | None, promote_rgb_transparency: bool) -> np.ndarray:
    check_image_size("image", image.size[0], image.size[1], max_pixels)
    alpha = has_alpha(image) or (promote_rgb_transparency and image.mode == "RGB" and "transparency" in image.info)
    hwc = to_rgba(image) if alpha else to_rgb(image)
    return np.ascontiguousarray(hwc.transpose(2, 0, 1))


def _stage_array(arr: np.ndarray, max_pixels: int | None) -> np.ndarray:
    if arr.dtype != np.uint8:
        raise InputValueError(f"image array must be uint8 (raw pixels), got dtype {arr.dtype}; accepted: {_ACCEPTED}")
    if arr.ndim not in (2, 3):
        raise InputValueError(f"image array must be 2-D (H, W) or 3-D (C, H, W), got shape {arr.shape}")
    chw = arr[None] if arr.ndim == 2 else arr
    if chw.shape[0] not in (1, 3, 4):
        raise InputValueError(f"image array must have 1, 3 or 4 channels (CHW), got shape {arr.shape}")
    check_image_size("image", int(chw.shape[2]), int(chw.shape[1]), max_pixels)
    if chw.shape[0] == 1:
        chw = np.repeat(chw, 3, axis=0)
    return np.ascontiguousarray(chw)


def to_chw_uint8(
    image: Any, *, max_pixels: int | None = DEFAULT_MAX_PIXELS, promote_rgb_transparency: bool = False
) -> np.ndarray:
    """Stage ``image`` to a C-contiguous (C, H, W) uint8 array, C in {3, 4} (semantics §3.1).

    PIL: RGBA if `has_alpha` else RGB, via `reference.oracle.modes`. Arrays/tensors:
    uint8 only, 2-D read as (H, W), one channel repeated to 3. We also reject
    channel counts other than 1/3/4 and empty images (upstream does not check;
    they would fail later). ``promote_rgb_transparency=True`` reproduces the
    pre-PR eager rule, where an RGB image with a ``transparency`` key was
    promoted to RGBA through its colour key. The result never aliases the input.
    """
    if max_pixels is not None:
        check_positive_int("max_pixels", max_pixels)
    if not isinstance(promote_rgb_transparency, bool):
        raise InputTypeError(f"promote_rgb_transparency must be a bool, got {promote_rgb_transparency!r}")
    if isinstance(image, Image.Image):
        return _stage_pil(image, max_pixels, promote_rgb_transparency)
    arr = _array_of(image)
    if arr is None:
        raise InputTypeError(f"image must be {_ACCEPTED}; got {type_name(image)}")
    out = _stage_array(arr, max_pixels)
    return out.copy() if np.shares_memory(out, arr) else out
