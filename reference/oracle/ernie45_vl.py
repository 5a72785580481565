"""ERNIE-4.5-VL's image processor as transformers' own processor runs it: the trained side of its C13 and C14
(semantics §18.9), and MiMo-V2.5's pixels (its checkpoint's ``Qwen2VLImageProcessor``, `qwen`'s restatement).

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

Pixels (C14, `preprocess`): `qwen`'s steps 1, 3 and 4 around this rule: ``convert_to_rgb`` (5.24.0: alpha and a
``transparency`` key composited onto white), Pillow's bicubic resize of the original image to the target, §18.1's
rescale and normalize (`reference.oracle.family_norm`, also C15's), patches merge-window by merge-window with a
temporal patch of 1 (rows of ``3 x p x p``), checked against ``Ernie4_5_VLMoeImageProcessorPil`` run for real.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle import qwen
from deferlab.reference.oracle.family_norm import checkpoint_levels
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import ErnieVLConfig, QwenVLConfig
from deferlab.reference.system.validate import check_instance, check_positive_int

__all__ = [
    "MAX_RATIO",
    "grid",
    "mimo_preprocess",
    "num_tokens",
    "preprocess",
    "qwen_config",
    "resize_target",
    "resize_targets",
]

MAX_RATIO = 200
TEMPORAL_PATCH = 1  # Ernie4_5_VLMoeImageProcessor's temporal_patch_size: a row is one frame's 3 x p x p values
_MAX_SIDE = 1 << 20  # the vectorized form's bound: side * factor and h * w stay exact in float64
# what an ErnieVLConfig hands `qwen_config` by name: each of its fields (the temporal patch is the caller's; Qwen's
# do_convert_rgb and resample keep their class defaults)
_QWEN_FIELDS = (
    "patch_size", "merge_size", "min_pixels", "max_pixels", "image_mean", "image_std", "rescale_factor", "do_rescale",
    "do_normalize",
)  # fmt: skip


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


grid, num_tokens = qwen.grid_and_tokens(resize_target)  # the processor's image_grid_thw row, its prompt tokens


def resize_targets(heights: Any, widths: Any, cfg: ErnieVLConfig) -> tuple[np.ndarray, np.ndarray]:
    """`resize_target` over broadcast integer arrays (sides 1..2**20), int64, **0 where refused**: the same float64
    operations in the same order (``rint`` is Python's ``round``, half to even)."""
    cfg = _cfg(cfg)
    h, w = qwen.sides(heights, widths, _MAX_SIDE, np.float64)
    refused = np.maximum(h, w) / np.minimum(h, w) > MAX_RATIO
    return qwen.budget_targets(h, w, cfg.factor, cfg.min_pixels, cfg.max_pixels, refused)


def qwen_config(cfg: ErnieVLConfig, temporal_patch_size: int) -> QwenVLConfig:
    """The `QwenVLConfig` holding ``cfg``'s patch, merge, bounds and normalization with ``temporal_patch_size``:
    what `qwen`'s patch layout and (for MiMo-V2.5, a Qwen2VLImageProcessor config) its whole restatement read."""
    cfg = _cfg(cfg)
    return QwenVLConfig(temporal_patch_size=temporal_patch_size, **{k: getattr(cfg, k) for k in _QWEN_FIELDS})


def preprocess(image: Image.Image, cfg: ErnieVLConfig) -> tuple[np.ndarray, np.ndarray]:
    """(pixel_values float32 (gh*gw, 3*p*p), image_grid_thw int64 (1, 3)) for one PIL image, as transformers
    5.24.0's ``Ernie4_5_VLMoeImageProcessorPil`` returns them (the module docstring's pixels); the size is
    decided (and a refused one refused) before any pixel work."""
    return pil_pixels(image, _cfg(cfg), resize_target, grid, TEMPORAL_PATCH)


def pil_pixels(image: Image.Image, cfg: ErnieVLConfig, target: Any, grid_of: Any, temporal: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The PIL backend's pixels for a family whose processor is Qwen's but for its size rule (ERNIE-4.5-VL,
    GLM-4.1V): ``target(h, w, cfg)`` decides the size (a refused one refused first), then convert_to_rgb, Pillow's
    bicubic, the checkpoint's normalization and Qwen's patch layout with ``temporal`` frames."""
    if not isinstance(image, Image.Image):
        raise InputTypeError(f"image must be a PIL.Image.Image, got {type(image).__name__}")
    width, height = image.size
    new_h, new_w = target(height, width, cfg)
    levels = np.asarray(qwen.convert_rgb(image).resize((new_w, new_h), resample=Image.Resampling.BICUBIC))
    table = checkpoint_levels(cfg.norm)
    chw = np.stack([table[levels[..., c], c] for c in range(3)])
    pv = qwen.patchify(chw, qwen_config(cfg, temporal))
    return pv, np.array([grid_of(height, width, cfg)], dtype=np.int64)


def mimo_preprocess(image: Image.Image, cfg: ErnieVLConfig) -> tuple[np.ndarray, np.ndarray]:
    """MiMo-V2.5's trained pixels: `qwen.preprocess` with ``cfg``'s bounds and statistics (its checkpoint's
    ``Qwen2VLImageProcessor``, temporal patch 2; semantics §18.9)."""
    return qwen.preprocess(image, qwen_config(cfg, 2))
