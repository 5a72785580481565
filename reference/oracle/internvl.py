"""InternVL 2.5/3's preprocessing as the model card's ``load_image`` runs it: the trained side of InternVL
(semantics §18.4).

Why restated from the card: the checkpoint ships no image processor; its model card's code (``load_image``,
``dynamic_preprocess``, ``find_closest_aspect_ratio``, ``build_transform``) is what the model was trained
and evaluated with. It calls Pillow where the card does (``convert("RGB")``, ``resize`` with Pillow's
default filter, ``crop``); the tensor steps (torchvision's ``ToTensor``, ``Normalize``) are NumPy float32.

Per image:

1. ``convert("RGB")`` (alpha dropped, never composited).
2. The grid (`closest_ratio`): candidate (cols, rows) with ``min_num <= cols*rows <= max_num``, ordered as the
   card orders them (`target_ratios`: a Python set sorted by ``cols*rows``); the first with the smallest
   ``|w/h - cols/rows|`` wins, a strictly smaller difference replaces it, and an **exactly equal** one
   replaces it only when ``w*h > 0.5 * image_size**2 * cols * rows`` (so a 448x448 image keeps 1x1, and
   an 800x800 one takes 2x2). ``dynamic_image_size`` off: one tile.
3. Pillow ``resize((cols*s, rows*s))`` (default filter: BICUBIC on RGB), cropped into ``s x s`` tiles
   row-major; when ``use_thumbnail`` and more than one tile, the whole image resized to ``s x s`` is
   appended.
4. ``ToTensor`` (``f32(u) / 255`` in float32) then ``Normalize`` (``(x - f32(mean)) / f32(std)`` in float32);
   the card's ``Resize((s, s))`` on an ``s x s`` tile is the identity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import InternVLConfig
from deferlab.reference.system.validate import check_instance, check_positive_int, type_name

__all__ = [
    "closest_ratio",
    "normalize_levels",
    "preprocess",
    "target_ratios",
    "tiles",
    "tiles_array",
]

_MAX_SIDE = 1 << 26  # the vectorized form's bound: w*h stays exact in float64
_PILLOW_REFUSALS = (ValueError, TypeError, OverflowError, OSError)


def _cfg(cfg: Any) -> InternVLConfig:
    return check_instance("cfg", cfg, InternVLConfig, "reference.system.family_configs.family_profile")


def target_ratios(min_num: int, max_num: int) -> list[tuple[int, int]]:
    """The card's candidate grids, in its order: the set it builds (same elements, inserted in the same order,
    so the same iteration order) sorted by tile count, ties in set order."""
    lo, hi = check_positive_int("min_num", min_num), check_positive_int("max_num", max_num)
    if lo > hi:
        raise InputValueError(f"min_num must be <= max_num, got {lo} > {hi}")
    grids = set(
        (i, j) for n in range(lo, hi + 1) for i in range(1, n + 1) for j in range(1, n + 1) if lo <= i * j <= hi
    )
    return sorted(grids, key=lambda g: g[0] * g[1])


def _threshold(cfg: InternVLConfig, cols: int, rows: int) -> float:
    """The area an image must exceed for an exactly tied grid to replace the best so far (the card's float)."""
    return 0.5 * cfg.image_size * cfg.image_size * cols * rows


def closest_ratio(width: int, height: int, cfg: InternVLConfig) -> tuple[int, int]:
    """(cols, rows) the card tiles a ``width x height`` image into (step 2 of the module docstring)."""
    cfg = _cfg(cfg)
    width, height = check_positive_int("width", width), check_positive_int("height", height)
    aspect, area = width / height, width * height
    best, best_diff = (1, 1), float("inf")
    for cols, rows in target_ratios(*cfg.bounds):
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > _threshold(cfg, cols, rows):
            best = (cols, rows)
    return best


def tiles(width: int, height: int, cfg: InternVLConfig) -> tuple[int, int, int]:
    """(cols, rows, tiles): the grid and the number of 448-pixel tiles, the thumbnail included."""
    cols, rows = closest_ratio(width, height, cfg)
    n = cols * rows
    return cols, rows, n + (1 if cfg.use_thumbnail and n != 1 else 0)


def _size_array(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    ok = arr.dtype.kind in "iu" and (arr.size == 0 or (arr.min() >= 1 and arr.max() <= _MAX_SIDE))
    if not ok:
        raise InputValueError(
            f"{name} must be an integer array of sizes in 1..{_MAX_SIDE}, got {arr.dtype} {arr!r:.80}"
        )
    return arr.astype(np.int64)


def tiles_array(widths: Any, heights: Any, cfg: InternVLConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`tiles` over broadcast integer arrays: (cols, rows, tiles) int16. The same float64 differences and the
    same comparisons, grid by grid in the card's order, so equal to the scalar form element by element."""
    cfg = _cfg(cfg)
    w, h = np.broadcast_arrays(_size_array("widths", widths), _size_array("heights", heights))
    aspect = w / h
    area = w * h
    best_diff = np.full(aspect.shape, np.inf)
    cols = np.ones(aspect.shape, dtype=np.int16)
    rows = np.ones(aspect.shape, dtype=np.int16)
    diff = np.empty_like(best_diff)
    for c, r in target_ratios(*cfg.bounds):
        np.subtract(aspect, c / r, out=diff)
        np.abs(diff, out=diff)
        better = diff < best_diff
        replace = better | ((diff == best_diff) & (area > _threshold(cfg, c, r)))
        np.copyto(best_diff, diff, where=better)
        cols[replace], rows[replace] = c, r
    n = cols * rows
    if cfg.use_thumbnail:
        n += (n != 1).astype(np.int16)
    return cols, rows, n


def normalize_levels(cfg: InternVLConfig) -> np.ndarray:
    """(256, 3) float32: ``ToTensor`` then ``Normalize`` of every level, per channel (C15)."""
    cfg = _cfg(cfg)
    x = (np.arange(256, dtype=np.float32) / np.float32(255))[:, None]
    return (x - np.asarray(cfg.image_mean, dtype=np.float32)) / np.asarray(cfg.image_std, dtype=np.float32)


def preprocess(image: Image.Image, cfg: InternVLConfig) -> np.ndarray:
    """float32 (tiles, 3, s, s): the card's ``load_image`` on one PIL image, tiles row-major then the
    thumbnail. Where Pillow refuses the RGB conversion (``La``), `InputValueError` says so."""
    cfg = _cfg(cfg)
    if not isinstance(image, Image.Image):
        raise InputTypeError(f"image must be a PIL.Image.Image, got {type_name(image)}")
    width, height = image.size
    if width < 1 or height < 1:
        raise InputValueError(f"image is empty ({width}x{height}); accepted: at least one pixel")
    cols, rows, n = tiles(width, height, cfg)
    try:
        rgb = image.convert("RGB")
    except _PILLOW_REFUSALS as e:
        raise InputValueError(
            f"image ({image.mode} {width}x{height}): the card's convert('RGB') refuses it: Pillow raises "
            f"{type(e).__name__}: {e}"
        ) from e
    s = cfg.image_size
    canvas = np.asarray(rgb.resize((cols * s, rows * s)))  # Pillow's default filter, as the card calls it
    parts = [canvas[y * s : (y + 1) * s, x * s : (x + 1) * s] for y in range(rows) for x in range(cols)]
    if n > cols * rows:
        parts.append(np.asarray(rgb.resize((s, s))))
    table = normalize_levels(cfg)
    out = np.empty((n, 3, s, s), dtype=np.float32)
    for k, part in enumerate(parts):
        for c in range(3):
            out[k, c] = table[part[..., c], c]
    return out
