"""The SGLang Kimi-K3 owner-side pipeline end to end (semantics §3), one image at a time.

stage -> NaViT resize config -> resize (skipped at the same size) ->
composite over ``config.background`` -> zero pad -> scale/bias normalize ->
patchify -> concatenate in request order. The oracle processes images one by
one on purpose: upstream groups and batches them (semantics §3.6) and claims that
grouping never changes the output, which is exactly what comparing against a
per-image reference checks.

Each step is a public function of its own module, so a second semantics (the
checkpoint's PIL processor, semantics §11) can reuse the shared steps and replace
only the ones that differ. `trace` runs those functions one after the other
and keeps every intermediate; `preprocess` keeps only the patches, so it runs
the same float operations streamed (rows of the resize, composited and
rounded into uint8 levels, normalized straight into patch order) and is
bit-equal to concatenating `trace(...).patches`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from deferlab.reference.oracle._bands import resize_image
from deferlab.reference.oracle.background import background_rows, composite_into, fill_transparent_bg
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.oracle.normalize import (
    normalize_levels_into,
    normalize_scale_bias,
    pad_bottom_right,
    patchify,
    scale_bias,
)
from deferlab.reference.oracle.resample import ResampleResult, resize_bicubic_aa
from deferlab.reference.oracle.stage import image_size, to_chw_uint8
from deferlab.reference.system.config import PreprocessConfig, ResizeConfig
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.validate import check_arithmetic, type_name


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
        raise InputTypeError(
            f"config must be a PreprocessConfig (see reference.system.profiles.profile), got {type_name(config)}"
        )
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
    """Run one image through semantics §3 and keep every intermediate.

    ``arithmetic`` picks the device's ``A / 255`` in the composite (semantics §3.4);
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
    """(pixel_values float32 (N, 3, p, p), grid_thws int64 (n, 3)) in request order (semantics §3).

    Empty input gives (0, 3, p, p) and (0, 3). Every image is validated
    (staged) before any is resized, so a bad one fails before any work.
    """
    config = _check_config(config)
    check_arithmetic(arithmetic)
    if isinstance(images, (str, bytes)) or not isinstance(images, Sequence):
        raise InputTypeError(f"images must be a sequence (list/tuple) of images, got {type_name(images)}")
    p = config.patch_size
    staged = [to_chw_uint8(im, max_pixels=config.max_pixels) for im in images]
    if not staged:
        return np.zeros((0, 3, p, p), dtype=np.float32), np.zeros((0, 3), dtype=np.int64)
    configs = [resize_config(*image_size(s), config) for s in staged]
    scale, bias = scale_bias(config.image_mean, config.image_std)
    pixel_values = np.empty((sum(rc.num_patches for rc in configs), 3, p, p), dtype=np.float32)
    start = 0
    for s, rc in zip(staged, configs, strict=True):
        _patches_into(s, rc, config, arithmetic, bool(fused), scale, bias, pixel_values[start : start + rc.num_patches])
        start += rc.num_patches
    grids = np.array([rc.grid_thw for rc in configs], dtype=np.int64).reshape(-1, 3)
    return pixel_values, grids


_CHUNK_BYTES = 1 << 20  # float32 bytes per composited row chunk


def _patches_into(
    staged: np.ndarray,
    rc: ResizeConfig,
    config: PreprocessConfig,
    arithmetic: str,
    fused: bool,
    scale: np.ndarray,
    bias: np.ndarray,
    out: np.ndarray,
) -> None:
    """One image's patches, bit-equal to ``_trace_staged(...).patches``, written into ``out``.

    The same steps with the same float operations, streamed: the resize
    hands over rows group by group (`reference.oracle._bands`), each group is
    rounded, composited and stored as uint8 pixel levels (every value past
    the rounding is an integer in [0, 255], so the levels hold them exactly;
    padding is level 0, as zero-padded pixels are), and the levels are
    normalized straight into patch order. Alpha that no background consumes
    is not resized (channels are independent, it would be dropped).
    """
    c, h, w = staged.shape
    nh, nw = rc.new_height, rc.new_width
    levels = np.empty((3, rc.padded_height, rc.padded_width), dtype=np.uint8)
    levels[:, nh:, :] = 0
    levels[:, :nh, nw:] = 0
    bg = config.background
    blend = c == 4 and bg is not None
    if (h, w) == (nh, nw):
        if not blend:
            levels[:, :h, :w] = staged[:3]
        else:
            step = max(1, _CHUNK_BYTES // (12 * w))
            scratch = np.empty((3, min(step, h), w), dtype=np.float32)
            for r0 in range(0, h, step):
                r1 = min(r0 + step, h)
                back = background_rows(r0, r1, w, bg)
                tmp = scratch[:, : r1 - r0]
                composite_into(staged[:3, r0:r1], staged[3:4, r0:r1], back, arithmetic, tmp, levels[:, r0:r1, :w])
    else:
        resized: list[np.ndarray] = [np.empty((4, 0, nw), dtype=np.float32)]

        def finish(r0: int, r1: int, rows: np.ndarray) -> None:
            np.rint(rows, out=rows)  # upstream's round_() then clamp_(0, 255)
            if not blend:
                np.clip(rows, 0.0, 255.0, out=levels[:, r0:r1, :nw], casting="unsafe")
                return
            if resized[0].shape[1] < r1 - r0:
                resized[0] = np.empty((4, r1 - r0, nw), dtype=np.float32)
            v = resized[0][:, : r1 - r0]
            np.clip(rows, 0.0, 255.0, out=v)
            composite_into(v[:3], v[3:4], background_rows(r0, r1, nw, bg), arithmetic, v[:3], levels[:, r0:r1, :nw])

        resize_image(staged if blend else staged[:3], nh, nw, "float32", finish)
    normalize_levels_into(levels, scale, bias, config.patch_size, out, fused=fused)
