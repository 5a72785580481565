"""GLM-4.1V's image processor as transformers' own ``Glm4vImageProcessor`` runs it: the trained side of its C13 and
C14 (semantics §18.9).

Why a restatement beside transformers: C13 sweeps every size up to 4096 x 4096, where no Python loop over
transformers could finish; this is checked against transformers run for real (``tests/reference/test_glm4v.py``:
its ``glm4v`` ``smart_resize`` called as the processor's ``resize`` calls it, and ``get_number_of_image_patches``,
5.24.0), then stands in for it. The rule, ``smart_resize(num_frames=T, h, w, temporal_factor=T, factor, min, max)``
with T the temporal patch (2) and the factor patch x merge (28):

1. A side under the factor scales **both** sides by ``max(factor/h, factor/w)``, truncated (``int``).
2. Then a side ratio over 200 is refused (``ValueError``): so 1 x 201 (w x h), scaled to 28 x 5628, is refused.
3. Both sides rounded (half to even) to the factor; where ``T * h * w`` is over ``max_pixels`` both (scaled) sides
   are scaled by ``sqrt(T*h*w/max_pixels)`` and floored (at least one factor); under ``min_pixels`` by
   ``sqrt(min_pixels/(T*h*w))`` and ceiled.
4. Grid ``(1, h/p, w/p)``; tokens ``h*w / (p*p*merge**2)``.

Normalization (C15) is `reference.oracle.family_norm`'s (§18.1's arithmetic). Pixels (C14, `preprocess`): the PIL
backend's steps around this rule, as for Qwen (`qwen`'s steps 1, 3 and 4): ``convert_to_rgb`` (5.24.0: alpha and a
``transparency`` key composited onto white), Pillow's bicubic resize of the original image to the target, the
rescale and normalize, patches merge-window by merge-window with the frame repeated over the temporal patch (rows of
``3 x T x p x p``), checked against ``Glm4vImageProcessorPil`` run for real (``tests/reference/test_glm4v_pixels.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle import ernie45_vl, qwen
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import Glm4vConfig
from deferlab.reference.system.validate import check_instance, check_positive_int

__all__ = ["MAX_RATIO", "Glm4vGeometry", "grid", "num_tokens", "preprocess", "resize_target", "resize_targets"]

MAX_RATIO = 200
_MAX_SIDE = 1 << 20  # the vectorized form's bound: T * h * w stays exact in float64


@dataclass(frozen=True)
class Glm4vGeometry:
    """What the geometry reads of a checkpoint's ``preprocessor_config.json`` (defaults: the published GLM-4.1V
    config of semantics §18.5, ``size`` 12,544 to 9,633,792)."""

    patch_size: int = 14
    merge_size: int = 2
    temporal_patch_size: int = 2
    min_pixels: int = 12544
    max_pixels: int = 9633792

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Glm4vGeometry:
        """The values of a ``preprocessor_config.json`` dict (``size``'s ``shortest_edge`` / ``longest_edge``), each
        a positive integer; a missing key keeps the default."""
        if not isinstance(cfg, Mapping):
            raise InputTypeError(f"cfg must be a preprocessor_config.json dict, got {type(cfg).__name__}")
        size = cfg.get("size") or {}
        found = {
            "patch_size": cfg.get("patch_size", cls.patch_size),
            "merge_size": cfg.get("merge_size", cls.merge_size),
            "temporal_patch_size": cfg.get("temporal_patch_size", cls.temporal_patch_size),
            "min_pixels": size.get("shortest_edge", cls.min_pixels),
            "max_pixels": size.get("longest_edge", cls.max_pixels),
        }
        return cls(**{k: check_positive_int(f"preprocessor_config {k}", v) for k, v in found.items()})


_FIELDS = ("patch_size", "merge_size", "temporal_patch_size", "min_pixels", "max_pixels")


def _geo(geo: Any) -> Glm4vGeometry:
    """``geo`` itself, or the family config's geometry (`reference.system.family_configs.Glm4vConfig` declares the
    same five fields): what C13's trained side and sweep are handed."""
    if isinstance(geo, Glm4vGeometry):
        return geo
    if getattr(geo, "kind", None) == "glm4v" and all(hasattr(geo, k) for k in _FIELDS):
        return Glm4vGeometry(**{k: getattr(geo, k) for k in _FIELDS})
    raise InputTypeError(f"geo must be a Glm4vGeometry or a Glm4vConfig, got {type(geo).__name__}")


def resize_targets(heights: Any, widths: Any, geo: Any) -> tuple[np.ndarray, np.ndarray]:
    """(new_heights, new_widths) over broadcast integer arrays (sides 1..2**20), int64, **0 where refused**: the
    module docstring's steps in float64, the same operations in the same order (``rint``: Python's ``round``)."""
    geo = _geo(geo)
    h, w = qwen.sides(heights, widths, _MAX_SIDE, np.float64)
    f, t = float(geo.factor), float(geo.temporal_patch_size)
    small = (h < f) | (w < f)
    scale = np.maximum(f / h, f / w)
    h, w = np.where(small, np.trunc(h * scale), h), np.where(small, np.trunc(w * scale), w)
    refused = np.maximum(h, w) / np.minimum(h, w) > MAX_RATIO
    snap_h, snap_w = np.rint(h / f) * f, np.rint(w / f) * f
    frames = t * snap_h * snap_w
    over = frames > geo.max_pixels
    under = ~over & (frames < geo.min_pixels)
    shrink, grow = np.sqrt(t * h * w / geo.max_pixels), np.sqrt(geo.min_pixels / (t * h * w))
    found = []
    for side, snap in ((h, snap_h), (w, snap_w)):
        down = np.maximum(f, np.floor(side / shrink / f) * f)
        up = np.ceil(side * grow / f) * f
        found.append(np.where(refused, 0, np.where(over, down, np.where(under, up, snap))).astype(np.int64))
    return found[0], found[1]


def resize_target(height: int, width: int, geo: Any) -> tuple[int, int]:
    """(new_height, new_width) of one size; `InputValueError` where the processor refuses it (a side ratio over
    200 after the small-side scaling)."""
    height, width, geo = check_positive_int("height", height), check_positive_int("width", width), _geo(geo)
    new_h, new_w = (int(v[()]) for v in resize_targets(np.int64(height), np.int64(width), geo))
    if new_h == 0:
        raise InputValueError(
            f"image {width}x{height} (w x h): a side ratio over {MAX_RATIO} (after a side under {geo.factor} is "
            f"scaled up), which GLM-4.1V's smart_resize refuses (ValueError); accepted: a ratio <= {MAX_RATIO}"
        )
    return new_h, new_w


grid, num_tokens = qwen.grid_and_tokens(resize_target)  # the processor's image_grid_thw row, its prompt tokens


def preprocess(image: Image.Image, cfg: Glm4vConfig) -> tuple[np.ndarray, np.ndarray]:
    """(pixel_values float32 (gh*gw, 3*T*p*p), image_grid_thw int64 (1, 3)) for one PIL image, as transformers
    5.24.0's ``Glm4vImageProcessorPil`` returns them (the module docstring's pixels); the size is decided (and a
    refused one refused) before any pixel work."""
    cfg = check_instance("cfg", cfg, Glm4vConfig, "reference.system.family_configs.family_profile")
    return ernie45_vl.pil_pixels(image, cfg, resize_target, grid, cfg.temporal_patch_size)
