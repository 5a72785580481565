"""The SGLang Kimi-K3 owner-side pipeline end to end (SPEC 3), one image at a time.

stage -> NaViT resize config -> resize (skipped at the same size) ->
composite over ``config.background`` -> zero pad -> scale/bias normalize ->
patchify -> concatenate in request order. The oracle processes images one by
one on purpose: upstream groups and batches them (SPEC 3.6) and claims that
grouping never changes the output, which is exactly what comparing against a
per-image reference checks.

Each step is a public function of its own module, so a second semantics (the
checkpoint's PIL processor, SPEC 11) can reuse the shared steps and replace
only the ones that differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from reference.background import fill_transparent_bg
from reference.config import PreprocessConfig, ResizeConfig
from reference.navit import resize_config
from reference.normalize import normalize_scale_bias, pad_bottom_right, patchify, scale_bias
from reference.resample import ResampleResult, resize_bicubic_aa
from reference.stage import image_size, to_chw_uint8
from reference.validate import check_arithmetic, type_name


@dataclass(frozen=True)
class StageTrace:
    """Every intermediate of one image, so properties can compare stage by stage."""

    staged: np.ndarray  # (C, H, W) uint8, C in {3, 4}
    resize_config: ResizeConfig
    resized: ResampleResult | None  # None when the source already has the target size
    composited: np.ndarray  # (3, new_h, new_w) float32
    padded: np.ndarray  # (3, padded_h, padded_w) float32
    normalized: np.ndarray  # (3, padded_h, padded_w) float32
    patches: np.ndarray  # (gh * gw, 3, p, p) float32

    @property
    def grid_thw(self) -> tuple[int, int, int]:
        return self.resize_config.grid_thw


def _check_config(config: Any) -> PreprocessConfig:
    if not isinstance(config, PreprocessConfig):
        raise TypeError(f"config must be a PreprocessConfig (see reference.profiles.profile), got {type_name(config)}")
    return config


def _trace_staged(staged: np.ndarray, config: PreprocessConfig, arithmetic: str, fused: bool) -> StageTrace:
    width, height = image_size(staged)
    rc = resize_config(width, height, config)
    if (height, width) == (rc.new_height, rc.new_width):
        resized = None
        pixels = staged.astype(np.float32)
    else:
        resized = resize_bicubic_aa(staged, rc.new_height, rc.new_width)
        pixels = resized.values
    composited = fill_transparent_bg(pixels, config.background, arithmetic=arithmetic)
    padded = pad_bottom_right(composited, rc.padded_height, rc.padded_width)
    scale, bias = scale_bias(config.image_mean, config.image_std)
    normalized = normalize_scale_bias(padded, scale, bias, fused=fused)
    patches = patchify(normalized, config.patch_size)
    return StageTrace(staged, rc, resized, composited, padded, normalized, patches)


def trace(
    image: Any, config: PreprocessConfig, *, arithmetic: Literal["cpu", "cuda"] = "cpu", fused: bool = False
) -> StageTrace:
    """Run one image through SPEC 3 and keep every intermediate.

    ``arithmetic`` picks the device's ``A / 255`` in the composite (SPEC 3.4);
    ``fused`` picks the single-rounding (FMA) normalize over a separate
    multiply and add; torch 2.13's CPU ``addcmul`` is fused on FMA hardware,
    as are Triton and nvcc, so ``fused=True`` is what models them here.
    """
    config = _check_config(config)
    check_arithmetic(arithmetic)
    return _trace_staged(to_chw_uint8(image, max_pixels=config.max_pixels), config, arithmetic, bool(fused))


def preprocess(
    images: Sequence[Any],
    config: PreprocessConfig,
    *,
    arithmetic: Literal["cpu", "cuda"] = "cpu",
    fused: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(pixel_values float32 (N, 3, p, p), grid_thws int64 (n, 3)) in request order (SPEC 3).

    Empty input gives (0, 3, p, p) and (0, 3). Every image is validated
    (staged) before any is resized, so a bad one fails before any work.
    """
    config = _check_config(config)
    check_arithmetic(arithmetic)
    if isinstance(images, (str, bytes)) or not isinstance(images, Sequence):
        raise TypeError(f"images must be a sequence (list/tuple) of images, got {type_name(images)}")
    p = config.patch_size
    staged = [to_chw_uint8(im, max_pixels=config.max_pixels) for im in images]
    traces = [_trace_staged(s, config, arithmetic, bool(fused)) for s in staged]
    if not traces:
        return np.zeros((0, 3, p, p), dtype=np.float32), np.zeros((0, 3), dtype=np.int64)
    pixel_values = np.concatenate([t.patches for t in traces], axis=0)
    grids = np.array([t.grid_thw for t in traces], dtype=np.int64).reshape(-1, 3)
    return pixel_values, grids
