"""PaddleOCR-VL's image processor as transformers' PIL backend runs it: the trained side of PaddleOCR-VL
(semantics §18.9).

Why a restatement beside transformers: as for Qwen (`reference.oracle.qwen`), C13 sweeps every size and C14 draws
images where no Python loop over transformers could finish; this is checked against transformers run for real
(``tests/reference/test_paddleocr.py``), then stands in for it. The steps (``PaddleOCRVLImageProcessorPil``,
transformers 5.24.0; its ``smart_resize`` is the same code in 5.12.1-5.25.0):

1. RGB: transformers' ``convert_to_rgb`` by version, Qwen's step 1 (`qwen.convert_rgb`).
2. Size (`resize_target`), its own ``smart_resize``, not Qwen's: a side under the factor
   (``patch_size * merge_size``) is first set to the factor and the other side scaled with it, rounded
   (``round``, half to even; the height first, then the width from the updated height); a side ratio over 200
   is refused; each side rounded to the factor; over ``max_pixels`` both scaled by ``sqrt(h*w/max_pixels)`` and
   floored (at least one factor); under ``min_pixels`` by ``sqrt(min_pixels/(h*w))`` and ceiled.
3. Pillow ``resize((w, h), resample)``; rescale and normalize (`qwen.normalize_levels`).
4. `patchify`: one row per patch in raster order over the patch grid (no merge windows, unlike Qwen), each
   ``(C*T, p, p)`` with the frame repeated ``T`` (1) times.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle import qwen
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import PaddleOCRVLConfig
from deferlab.reference.system.validate import as_array, check_instance, check_positive_int, type_name

__all__ = ["grid", "normalize_levels", "num_tokens", "patchify", "preprocess", "resize_target", "resize_targets"]

MAX_RATIO = qwen.MAX_RATIO
_MAX_SIDE = 1 << 20  # the vectorized form's bound: side * factor and h * w stay exact in float64


def _cfg(cfg: Any) -> PaddleOCRVLConfig:
    return check_instance("cfg", cfg, PaddleOCRVLConfig, "reference.system.family_configs.family_profile")


def resize_target(height: int, width: int, cfg: PaddleOCRVLConfig) -> tuple[int, int]:
    """(new_height, new_width): ``smart_resize`` of the original size (the module docstring's step 2)."""
    cfg = _cfg(cfg)
    height, width = check_positive_int("height", height), check_positive_int("width", width)
    f = cfg.factor
    if height < f:
        height, width = f, round(width * f / height)
    if width < f:
        height, width = round(height * f / width), f
    if max(height, width) / min(height, width) > MAX_RATIO:
        ratio = max(height, width) / min(height, width)
        raise InputValueError(
            f"image {width}x{height} (w x h, after the small-side step): side ratio {ratio:g} is over {MAX_RATIO}, "
            f"which transformers' smart_resize refuses (ValueError); accepted: a ratio <= {MAX_RATIO}"
        )
    return qwen.budget_target(height, width, f, cfg.min_pixels, cfg.max_pixels)


grid, num_tokens = qwen.grid_and_tokens(resize_target)  # the processor's image_grid_thw row, its prompt tokens


def resize_targets(heights: Any, widths: Any, cfg: PaddleOCRVLConfig) -> tuple[np.ndarray, np.ndarray]:
    """`resize_target` over broadcast integer arrays (sides up to 2**20), int64, **0 where refused**: the same
    float64 operations in the same order (``rint`` is Python's ``round``, half to even)."""
    cfg = _cfg(cfg)
    h, w = qwen.sides(heights, widths, _MAX_SIDE, np.float64)
    f = float(cfg.factor)
    short_h = h < f
    h, w = np.where(short_h, f, h), np.where(short_h, np.rint(w * f / h), w)
    short_w = w < f
    h, w = np.where(short_w, np.rint(h * f / w), h), np.where(short_w, f, w)
    refused = np.maximum(h, w) / np.minimum(h, w) > MAX_RATIO
    return qwen.budget_targets(h, w, cfg.factor, cfg.min_pixels, cfg.max_pixels, refused)


def patchify(chw: Any, cfg: PaddleOCRVLConfig) -> np.ndarray:
    """(C, H, W) -> float32 (gh*gw, C*T, p, p): patches in raster order, the frame repeated ``T`` times."""
    cfg = _cfg(cfg)
    x = as_array("chw", chw)
    p, t = cfg.patch_size, cfg.temporal_patch_size
    if x.ndim != 3 or x.shape[1] % p or x.shape[2] % p:
        raise InputValueError(f"chw must be (C, H, W) with H and W multiples of patch_size = {p}, got {x.shape}")
    c, h, w = x.shape
    patches = x.astype(np.float32, copy=False).reshape(c, h // p, p, w // p, p).transpose(1, 3, 0, 2, 4)
    frames = np.repeat(patches[:, :, :, None], t, axis=3)  # (gy, gx, c, t, py, px)
    return frames.reshape((h // p) * (w // p), c * t, p, p)


def normalize_levels(cfg: PaddleOCRVLConfig) -> np.ndarray:
    """(256, 3) float32: the processor's rescale and normalize of every level (C15)."""
    return qwen.normalize_levels(_cfg(cfg))


def preprocess(
    image: Image.Image, cfg: PaddleOCRVLConfig, *, transformers_version: str = qwen.DEFAULT_TRANSFORMERS
) -> tuple[np.ndarray, np.ndarray]:
    """(pixel_values float32 (gh*gw, 3*T, p, p), image_grid_thw int64 (1, 3)) for one PIL image, as
    ``PaddleOCRVLImageProcessorPil`` of ``transformers_version`` returns them (the size decided, or refused,
    before any pixel work; with ``do_convert_rgb`` off only an RGB image is accepted)."""
    cfg = _cfg(cfg)
    if not isinstance(image, Image.Image):
        raise InputTypeError(f"image must be a PIL.Image.Image, got {type_name(image)}")
    width, height = image.size
    new_h, new_w = resize_target(height, width, cfg)
    if cfg.do_convert_rgb:
        rgb = qwen.convert_rgb(image, transformers_version)
    elif image.mode == "RGB":
        rgb = image
    else:
        raise InputValueError(f"image is mode {image.mode} and do_convert_rgb is false; accepted: an RGB image")
    levels = np.asarray(rgb.resize((new_w, new_h), resample=cfg.resample))
    table = normalize_levels(cfg)
    chw = np.stack([table[levels[..., c], c] for c in range(3)])
    return patchify(chw, cfg), np.array([grid(height, width, cfg)], dtype=np.int64)
