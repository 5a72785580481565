"""ERNIE-4.5-VL's image geometry as transformers' own processor decides it: the trained side of its C13
(semantics §18.9).

Why a restatement beside transformers: C13 sweeps every size up to 4096 x 4096, where no Python loop over
transformers could finish; this is checked against transformers run for real (``tests/reference/
test_ernie45_vl.py``: ``Ernie4_5_VLMoeImageProcessorPil``'s ``smart_resize`` and ``get_number_of_image_patches``,
5.24.0), then stands in for it. The rule (its own ``smart_resize``, not Qwen's, though the arithmetic after the
ratio check is the same as Qwen's budget step, `qwen.budget_target`):

1. A side ratio over 200 is refused (``ValueError``), checked on the original size.
2. Each side rounded (``round``, half to even) to the factor (``patch_size * merge_size``, 28), **without** a
   floor of one factor: a side under half a factor becomes 0, which sends the size to the min-pixels branch.
3. Over ``max_pixels`` both original sides scaled by ``sqrt(h*w/max_pixels)`` and floored (at least one factor);
   under ``min_pixels`` by ``sqrt(min_pixels/(h*w))`` and ceiled.
4. Grid ``(1, h/p, w/p)``; tokens ``h*w / (p*p*merge**2)``.

Normalization (C15) is `reference.oracle.family_norm`'s (§18.1's arithmetic); the pixels are not restated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deferlab.reference.oracle import qwen
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import ErnieVLConfig
from deferlab.reference.system.validate import check_instance, check_positive_int

__all__ = ["MAX_RATIO", "grid", "num_tokens", "resize_target", "resize_targets"]

MAX_RATIO = 200
_MAX_SIDE = 1 << 20  # the vectorized form's bound: side * factor and h * w stay exact in float64


def _cfg(cfg: Any) -> ErnieVLConfig:
    return check_instance("cfg", cfg, ErnieVLConfig, "reference.system.family_configs.family_profile")


def resize_target(height: int, width: int, cfg: ErnieVLConfig) -> tuple[int, int]:
    """(new_height, new_width) of the original size (the module docstring's steps 1-3); `InputValueError` where
    the processor refuses the size (a side ratio over 200)."""
    cfg = _cfg(cfg)
    height, width = check_positive_int("height", height), check_positive_int("width", width)
    ratio = max(height, width) / min(height, width)
    if ratio > MAX_RATIO:
        raise InputValueError(
            f"image {width}x{height} (w x h): side ratio {ratio:g} is over {MAX_RATIO}, which ERNIE-4.5-VL's "
            f"smart_resize refuses (ValueError); accepted: a ratio <= {MAX_RATIO}"
        )
    return qwen.budget_target(height, width, cfg.factor, cfg.min_pixels, cfg.max_pixels)


def grid(height: int, width: int, cfg: ErnieVLConfig) -> tuple[int, int, int]:
    """(t, h, w) patches of one image, the processor's ``image_grid_thw`` row."""
    new_h, new_w = resize_target(height, width, cfg)
    return 1, new_h // cfg.patch_size, new_w // cfg.patch_size


def num_tokens(height: int, width: int, cfg: ErnieVLConfig) -> int:
    """Image tokens in the prompt: the grid's patches over ``merge_size**2``."""
    t, gh, gw = grid(height, width, cfg)
    return t * gh * gw // cfg.merge_size**2


def resize_targets(heights: Any, widths: Any, cfg: ErnieVLConfig) -> tuple[np.ndarray, np.ndarray]:
    """`resize_target` over broadcast integer arrays (sides 1..2**20), int64, **0 where refused**: the same float64
    operations in the same order (``rint`` is Python's ``round``, half to even)."""
    cfg = _cfg(cfg)
    out = []
    for name, value in (("heights", heights), ("widths", widths)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "iu":
            raise InputTypeError(f"{name} must be an integer array (pixel counts), got dtype {arr.dtype}")
        if arr.size and not 1 <= arr.min() <= arr.max() <= _MAX_SIDE:
            raise InputValueError(f"{name} must all be in 1..{_MAX_SIDE}, got {arr.min()}..{arr.max()}")
        out.append(arr.astype(np.float64))
    h, w = np.broadcast_arrays(*out)
    refused = np.maximum(h, w) / np.minimum(h, w) > MAX_RATIO
    return qwen.budget_targets(h, w, cfg.factor, cfg.min_pixels, cfg.max_pixels, refused)
