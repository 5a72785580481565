"""Qwen2-VL's image processor as transformers' PIL backend runs it: the trained side of Qwen2.5-VL and Qwen3-VL
(semantics §18.2).

Why a restatement beside transformers: the claims compare an engine with the checkpoint's processor over
every image size (C13) and in sweeps no Python loop over transformers could finish; the restatement is
checked against transformers run for real (``tests/reference/test_qwen.py``), then stands in for it. It
calls Pillow where the PIL backend does (``convert``, ``alpha_composite``, ``resize``): Pillow's rules are
the trained semantics there (Pillow 13.0.0, semantics §13.4-§13.5). Everything else is NumPy.

Per image (``Qwen2VLImageProcessorPil``, transformers 5.24.0; the rule of step 1 by version):

1. RGB (``do_convert_rgb``): from 5.21.0 an image with a band named ``A`` or a ``transparency`` key is
   converted to RGBA and alpha-composited onto opaque white (``Image.alpha_composite``), any other image
   converted to RGB; 5.0-5.20 return an RGB image as is and ``convert("RGB")`` any other (alpha dropped).
2. Size (`resize_target`): ``smart_resize`` with ``factor = patch_size * merge_size``: each side rounded to
   the factor (Python ``round``, half to even); if that area is over ``max_pixels``, both sides scaled by
   ``sqrt(h*w/max_pixels)`` and floored to the factor (at least one factor); else if under ``min_pixels``,
   scaled by ``sqrt(min_pixels/(h*w))`` and ceiled; a side ratio over 200 is refused.
3. Pillow ``resize((w, h), resample)``, even when the size is unchanged (a copy).
4. Rescale and normalize (`normalize_levels`, `reference.oracle.family_norm`), then `patchify`: rows of
   ``C*T*p*p`` values, one per patch, patches merge-window by merge-window, the frame repeated ``T`` times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle.family_norm import checkpoint_levels
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import QwenVLConfig
from deferlab.reference.system.systems import at_least, is_release
from deferlab.reference.system.validate import as_array, check_instance, check_positive_int, type_name

__all__ = [
    "COMPOSITE_FROM",
    "DEFAULT_TRANSFORMERS",
    "MAX_RATIO",
    "convert_rgb",
    "grid",
    "normalize_levels",
    "num_tokens",
    "patchify",
    "preprocess",
    "resize_target",
    "resize_targets",
    "token_counts",
]

DEFAULT_TRANSFORMERS = "5.24.0"
COMPOSITE_FROM = "5.21.0"  # convert_to_rgb composites onto white from this release on (alpha dropped before)
MAX_RATIO = 200
_MAX_SIDE = 1 << 26  # the vectorized form's bound: every product of two sides stays exact in float64
_EXACT = 1 << 53
_PILLOW_REFUSALS = (ValueError, TypeError, OverflowError, OSError)


def _cfg(cfg: Any) -> QwenVLConfig:
    return check_instance("cfg", cfg, QwenVLConfig, "reference.system.family_configs.family_profile")


def _refusal(height: int, width: int) -> InputValueError:
    ratio = max(height, width) / min(height, width)
    return InputValueError(
        f"image {width}x{height} (w x h): side ratio {ratio:g} is over {MAX_RATIO}, which transformers' "
        f"smart_resize refuses (ValueError); accepted: longer side / shorter side <= {MAX_RATIO}"
    )


def resize_target(height: int, width: int, cfg: QwenVLConfig) -> tuple[int, int]:
    """(new_height, new_width): ``smart_resize`` of the original size (the module docstring's step 2)."""
    cfg = _cfg(cfg)
    height, width = check_positive_int("height", height), check_positive_int("width", width)
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise _refusal(height, width)
    return budget_target(height, width, cfg.factor, cfg.min_pixels, cfg.max_pixels)


def budget_target(height: float, width: float, f: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """The pixel-budget rounding smart_resize ends with (semantics §18.2), shared by every family that uses it
    (PaddleOCR-VL after its small-side step): both sides to the nearest multiple of ``f``, then scaled down into
    ``max_pixels`` (floored, at least ``f``) or up into ``min_pixels`` (ceiled)."""
    new_h, new_w = round(height / f) * f, round(width / f) * f
    if new_h * new_w > max_pixels:
        shrink = math.sqrt(height * width / max_pixels)
        return max(f, math.floor(height / shrink / f) * f), max(f, math.floor(width / shrink / f) * f)
    if new_h * new_w < min_pixels:
        grow = math.sqrt(min_pixels / (height * width))
        return math.ceil(height * grow / f) * f, math.ceil(width * grow / f) * f
    return int(new_h), int(new_w)


Target = Callable[[int, int, Any], tuple[int, int]]


def grid_and_tokens(target: Target) -> tuple[Callable[[int, int, Any], tuple[int, int, int]], Callable[[int, int, Any], int]]:  # fmt: skip
    """A family's ``grid`` and ``num_tokens`` from its one-image resize ``target``: every family of Qwen's patch
    layout (PaddleOCR-VL, ERNIE-4.5-VL, GLM-4.1V) takes the same two steps after its own target, so they are
    written once. ``grid``: (t, h, w) = ``(1, new_h / p, new_w / p)``, the processor's ``image_grid_thw`` row;
    ``num_tokens``: the grid's patches over ``merge_size**2``."""

    def grid(height: int, width: int, cfg: Any) -> tuple[int, int, int]:
        new_h, new_w = target(height, width, cfg)
        return 1, new_h // cfg.patch_size, new_w // cfg.patch_size

    def num_tokens(height: int, width: int, cfg: Any) -> int:
        t, gh, gw = grid(height, width, cfg)
        return t * gh * gw // cfg.merge_size**2

    return grid, num_tokens


grid, num_tokens = grid_and_tokens(resize_target)


def sides(heights: Any, widths: Any, max_side: int = _MAX_SIDE, dtype: Any = np.int64) -> list[np.ndarray]:
    """Both arrays validated (integers in 1..``max_side``) and broadcast to one shape, as ``dtype``: the
    vectorized forms' front door (each family's bound keeps its float64 products exact)."""
    out = []
    for name, value in (("heights", heights), ("widths", widths)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "iu":
            raise InputTypeError(f"{name} must be an integer array (pixel counts), got dtype {arr.dtype}")
        if arr.size and not 1 <= arr.min() <= arr.max() <= max_side:
            raise InputValueError(f"{name} must all be in 1..{max_side}, got {arr.min()}..{arr.max()}")
        out.append(arr.astype(dtype))
    return np.broadcast_arrays(*out)


def resize_targets(heights: Any, widths: Any, cfg: QwenVLConfig) -> tuple[np.ndarray, np.ndarray]:
    """`resize_target` over broadcast integer arrays: (new_heights, new_widths) int64, **0 where the size is
    refused** (side ratio over 200). The same float64 operations in the same order as the scalar form, so
    equal to it wherever the pixel products stay below 2**53 (sides up to 2**26)."""
    cfg = _cfg(cfg)
    if max(cfg.min_pixels, cfg.max_pixels) >= _EXACT:
        raise InputValueError(f"the vectorized form needs min_pixels and max_pixels below 2**53, got {cfg}")
    h, w = sides(heights, widths)
    hf, wf = h.astype(np.float64), w.astype(np.float64)
    refused = np.maximum(hf, wf) / np.minimum(hf, wf) > MAX_RATIO
    return budget_targets(hf, wf, cfg.factor, cfg.min_pixels, cfg.max_pixels, refused)


def budget_targets(
    hf: np.ndarray, wf: np.ndarray, factor: int, min_pixels: int, max_pixels: int, refused: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`budget_target` over broadcast float64 arrays, the same operations in the same order (``rint``: half to
    even, as Python's ``round``), int64, 0 where ``refused``."""
    f = float(factor)
    new_h, new_w = np.rint(hf / f) * f, np.rint(wf / f) * f
    snapped = new_h * new_w
    over = snapped > max_pixels
    under = ~over & (snapped < min_pixels)
    pixels = hf * wf
    shrink = np.sqrt(pixels / max_pixels)
    grow = np.sqrt(min_pixels / pixels)
    out = []
    for side, snap in ((hf, new_h), (wf, new_w)):
        down = np.maximum(f, np.floor(side / shrink / f) * f)
        up = np.ceil(side * grow / f) * f
        value = np.where(over, down, np.where(under, up, snap))
        out.append(np.where(refused, 0, value).astype(np.int64))
    return out[0], out[1]


def token_counts(heights: Any, widths: Any, cfg: QwenVLConfig) -> np.ndarray:
    """`num_tokens` over broadcast arrays, int64; 0 where the size is refused."""
    new_h, new_w = resize_targets(heights, widths, cfg)
    return (new_h // cfg.patch_size) * (new_w // cfg.patch_size) // cfg.merge_size**2


def patchify(chw: Any, cfg: QwenVLConfig) -> np.ndarray:
    """(C, H, W) -> float32 (gh*gw, C*T*p*p). Patches run over merge windows (row-major), then over the
    ``m x m`` patches inside a window (row-major); a row is the patch's C x T x p x p values, its T frames
    copies of the one image. H and W must be multiples of ``p * m``."""
    cfg = _cfg(cfg)
    x = as_array("chw", chw)
    if x.ndim != 3 or x.shape[1] % cfg.factor or x.shape[2] % cfg.factor:
        raise InputValueError(
            f"chw must be (C, H, W) with H and W multiples of patch_size * merge_size = {cfg.factor}, got {x.shape}"
        )
    x = x.astype(np.float32, copy=False)
    c, h, w = x.shape
    p, m, t = cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size
    windows = x.reshape(c, h // (p * m), m, p, w // (p * m), m, p).transpose(1, 4, 2, 5, 0, 3, 6)
    frames = np.repeat(windows[:, :, :, :, :, None], t, axis=5)  # (wy, wx, my, mx, c, t, py, px)
    return frames.reshape((h // p) * (w // p), c * t * p * p)


def _version(version: Any) -> str:
    if not isinstance(version, str) or not is_release(version) or not at_least(version, "5.0.0"):
        raise InputValueError(
            f"transformers_version must be a transformers 5.x release such as {DEFAULT_TRANSFORMERS!r} (the PIL "
            f"backend's series), got {version!r}"
        )
    return version


def _image(image: Any) -> Image.Image:
    if not isinstance(image, Image.Image):
        raise InputTypeError(f"image must be a PIL.Image.Image, got {type_name(image)}")
    if image.size[0] < 1 or image.size[1] < 1:
        raise InputValueError(f"image is empty ({image.size[0]}x{image.size[1]}); accepted: at least one pixel")
    return image


def convert_rgb(image: Image.Image, transformers_version: str = DEFAULT_TRANSFORMERS) -> Image.Image:
    """Step 1 of the module docstring for ``transformers_version``: an RGB PIL image. Where Pillow refuses a
    conversion (``La``, a key form it cannot apply), `InputValueError` says so."""
    image, version = _image(image), _version(transformers_version)
    try:
        if not at_least(version, COMPOSITE_FROM):
            return image if image.mode == "RGB" else image.convert("RGB")
        if "A" in image.getbands() or image.info.get("transparency") is not None:
            white = Image.new("RGBA", image.size, (255, 255, 255, 255))
            return Image.alpha_composite(white, image.convert("RGBA")).convert("RGB")
        return image.convert("RGB")
    except _PILLOW_REFUSALS as e:
        raise InputValueError(
            f"image ({image.mode} {image.size[0]}x{image.size[1]}): transformers {version}'s convert_to_rgb "
            f"refuses it: Pillow raises {type(e).__name__}: {e}"
        ) from e


def normalize_levels(cfg: QwenVLConfig) -> np.ndarray:
    """(256, 3) float32: the processor's rescale and normalize of every level (`family_norm`, C15)."""
    return checkpoint_levels(_cfg(cfg).norm)


def preprocess(
    image: Image.Image, cfg: QwenVLConfig, *, transformers_version: str = DEFAULT_TRANSFORMERS
) -> tuple[np.ndarray, np.ndarray]:
    """(pixel_values float32 (gh*gw, 3*T*p*p), image_grid_thw int64 (1, 3)) for one PIL image, as
    ``Qwen2VLImageProcessorPil`` of ``transformers_version`` returns them. The size is decided (and a refused
    one refused) before any pixel work; with ``do_convert_rgb`` off only an RGB image is accepted (any other
    would reach normalize with another channel count, which transformers refuses)."""
    cfg, version, image = _cfg(cfg), _version(transformers_version), _image(image)
    width, height = image.size
    new_h, new_w = resize_target(height, width, cfg)
    if cfg.do_convert_rgb:
        rgb = convert_rgb(image, version)
    elif image.mode == "RGB":
        rgb = image
    else:
        raise InputValueError(f"image is mode {image.mode} and do_convert_rgb is false; accepted: an RGB image")
    levels = np.asarray(rgb.resize((new_w, new_h), resample=cfg.resample))  # (H, W, 3) uint8
    table = normalize_levels(cfg)
    chw = np.stack([table[levels[..., c], c] for c in range(3)])
    return patchify(chw, cfg), np.array([grid(height, width, cfg)], dtype=np.int64)
