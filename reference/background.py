"""Transparent-background compositing after the resize (SPEC 3.4), float32 exactly.

Upstream evaluates ``floor(clamp(a * rgb + (1 - a) * bg, 0, 255))`` as four
separate float32 kernels (multiply, ``1 - a``, multiply, add). NumPy's float32
ufuncs round each operation exactly like one such kernel, so this module is
bit-equal to it *given the same* ``a``. ``a`` is where devices differ: the CPU
divides ``A / 255`` (correctly rounded), CUDA multiplies by the float32
reciprocal ``1/255``; the two disagree for about half of the 256 alpha levels
and can move the floored result by one. ``arithmetic`` selects which one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from reference.config import BackgroundConfig
from reference.validate import check_arithmetic, check_float_image, check_positive_int, type_name

# SPEC 3.4: plain-pattern levels ("gray" is 128, not the chessboard's gray).
PLAIN_LEVELS = {"white": 255.0, "black": 0.0, "gray": 128.0}
_CUDA_RECIPROCAL = np.float32(1.0) / np.float32(255.0)  # what CUDA multiplies by for "/ 255"


def chessboard(h: int, w: int, bg: BackgroundConfig) -> np.ndarray:
    """(H, W) float32 chessboard: cells with ``(y//s + x//s) % 2 == (1 if top_left else 0)`` are gray.

    With ``square_on_top_left`` true, pixel (0, 0) is white and (0, s) gray.
    """
    h, w = check_positive_int("h", h), check_positive_int("w", w)
    s = bg.square_size
    parity = (np.arange(h)[:, None] // s + np.arange(w)[None, :] // s) % 2
    gray_parity = 1 if bg.square_on_top_left else 0
    return np.where(parity == gray_parity, np.float32(bg.gray_value), np.float32(bg.white_value)).astype(np.float32)


def background_values(h: int, w: int, bg: BackgroundConfig) -> np.ndarray:
    """(H, W) float32 background level per pixel for any pattern."""
    if not isinstance(bg, BackgroundConfig):
        raise TypeError(f"bg must be a BackgroundConfig, got {type_name(bg)}")
    if bg.pattern == "chessboard":
        return chessboard(h, w, bg)
    h, w = check_positive_int("h", h), check_positive_int("w", w)
    return np.full((h, w), PLAIN_LEVELS[bg.pattern], dtype=np.float32)


def _as_background(bg: BackgroundConfig | Mapping[str, Any]) -> BackgroundConfig:
    if isinstance(bg, BackgroundConfig):
        return bg
    if not isinstance(bg, Mapping):
        raise TypeError(f"bg must be a BackgroundConfig, a dict or None, got {type_name(bg)}")
    pattern = bg.get("pattern", "black")  # SPEC 3.4: a missing pattern means black
    if pattern not in ("chessboard", *PLAIN_LEVELS):
        raise ValueError(f"Invalid background pattern: {pattern}")
    return BackgroundConfig.from_dict(bg)


def alpha_fraction(alpha: np.ndarray, arithmetic: Literal["cpu", "cuda"] = "cpu") -> np.ndarray:
    """``clamp(A / 255, 0, 1)`` in float32 as the device computes it (true division or reciprocal)."""
    a = np.asarray(alpha, dtype=np.float32)
    if check_arithmetic(arithmetic) == "cpu":
        frac = a / np.float32(255.0)
    else:
        frac = a * _CUDA_RECIPROCAL
    return np.clip(frac, np.float32(0.0), np.float32(1.0))


def fill_transparent_bg(
    x: np.ndarray,
    bg: BackgroundConfig | Mapping[str, Any] | None,
    *,
    arithmetic: Literal["cpu", "cuda"] = "cpu",
) -> np.ndarray:
    """Composite (B,4,H,W) / (4,H,W) float32 over ``bg``; 3 channels pass through (SPEC 3.4).

    3 channels: returned unchanged (as float32). 4 channels and ``bg`` None:
    alpha dropped. A dict with no ``pattern`` is black; an unknown pattern
    raises ``ValueError("Invalid background pattern: ...")``. The result is
    always a new float32 array with 3 channels.
    """
    arr = check_float_image("x", x, channels=(3, 4))
    check_arithmetic(arithmetic)
    config = None if bg is None else _as_background(bg)
    f = arr.astype(np.float32)
    if f.shape[-3] == 3:
        return f  # astype already copied
    rgb = f[..., :3, :, :]
    if config is None:
        return np.ascontiguousarray(rgb)
    h, w = f.shape[-2:]
    if h == 0 or w == 0:
        return np.ascontiguousarray(rgb)
    back = background_values(h, w, config)
    a = alpha_fraction(f[..., 3:4, :, :], arithmetic)
    out = a * rgb  # float32 multiply
    out += (np.float32(1.0) - a) * back  # float32 rsub, multiply, add: each rounded
    np.clip(out, np.float32(0.0), np.float32(255.0), out=out)
    return np.floor(out, out=out)
