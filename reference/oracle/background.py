"""Transparent-background compositing after the resize (semantics §3.4), float32 exactly.

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

from deferlab.reference.system.config import BackgroundConfig
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.validate import check_arithmetic, check_float_image, check_positive_int, type_name

# semantics §3.4: plain-pattern levels ("gray" is 128, not the chessboard's gray).
PLAIN_LEVELS = {"white": 255.0, "black": 0.0, "gray": 128.0}
_CUDA_RECIPROCAL = np.float32(1.0) / np.float32(255.0)  # what CUDA multiplies by for "/ 255"


def chessboard(h: int, w: int, bg: BackgroundConfig) -> np.ndarray:
    """(H, W) float32 chessboard: cells with ``(y//s + x//s) % 2 == (1 if top_left else 0)`` are gray.

    With ``square_on_top_left`` true, pixel (0, 0) is white and (0, s) gray.
    """
    h, w = check_positive_int("h", h), check_positive_int("w", w)
    return _chessboard_rows(0, h, w, bg)


def _chessboard_rows(r0: int, r1: int, w: int, bg: BackgroundConfig) -> np.ndarray:
    """Rows ``r0:r1`` of the (., w) chessboard: two row patterns (even / odd cell rows), picked per row."""
    s = bg.square_size
    gray_parity = 1 if bg.square_on_top_left else 0
    gray, white = np.float32(bg.gray_value), np.float32(bg.white_value)
    col_parity = (np.arange(w) // s) % 2
    patterns = np.empty((2, w), dtype=np.float32)  # [cell-row parity, x]
    for row_parity in (0, 1):
        patterns[row_parity] = np.where((row_parity + col_parity) % 2 == gray_parity, gray, white)
    return patterns[(np.arange(r0, r1) // s) % 2]


def background_rows(r0: int, r1: int, w: int, bg: BackgroundConfig) -> np.ndarray:
    """Rows ``r0:r1`` of `background_values` (``(r1 - r0, w)`` float32), for row-streamed compositing."""
    if bg.pattern == "chessboard":
        return _chessboard_rows(r0, r1, w, bg)
    return np.full((r1 - r0, w), PLAIN_LEVELS[bg.pattern], dtype=np.float32)


def background_values(h: int, w: int, bg: BackgroundConfig) -> np.ndarray:
    """(H, W) float32 background level per pixel for any pattern."""
    if not isinstance(bg, BackgroundConfig):
        raise InputTypeError(f"bg must be a BackgroundConfig, got {type_name(bg)}")
    h, w = check_positive_int("h", h), check_positive_int("w", w)
    return background_rows(0, h, w, bg)


def _as_background(bg: BackgroundConfig | Mapping[str, Any]) -> BackgroundConfig:
    if isinstance(bg, BackgroundConfig):
        return bg
    if not isinstance(bg, Mapping):
        raise InputTypeError(f"bg must be a BackgroundConfig, a dict or None, got {type_name(bg)}")
    pattern = bg.get("pattern", "black")  # semantics §3.4: a missing pattern means black
    if pattern not in ("chessboard", *PLAIN_LEVELS):
        raise InputValueError(f"Invalid background pattern: {pattern}")
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
    """Composite (B,4,H,W) / (4,H,W) float32 over ``bg``; 3 channels pass through (semantics §3.4).

    3 channels: returned unchanged (as float32). 4 channels and ``bg`` None:
    alpha dropped. A dict with no ``pattern`` is black; an unknown pattern
    raises ``ValueError("Invalid background pattern: ...")``. The result is
    always a new float32 array with 3 channels.
    """
    arr = check_float_image("x", x, channels=(3, 4))
    check_arithmetic(arithmetic)
    config = None if bg is None else _as_background(bg)
    if arr.shape[-3] == 3:
        return arr.astype(np.float32)  # always a copy
    h, w = arr.shape[-2:]
    if config is None or h == 0 or w == 0:
        return np.array(arr[..., :3, :, :], dtype=np.float32, order="C")  # a C-contiguous copy, never a view
    f = arr if arr.dtype == np.float32 else arr.astype(np.float32)  # every step below works on float32 values
    out = np.empty(arr.shape[:-3] + (3, h, w), dtype=np.float32)
    composite_into(f[..., :3, :, :], f[..., 3:4, :, :], background_values(h, w, config), arithmetic, out)
    return out


def composite_into(
    rgb: np.ndarray,
    alpha: np.ndarray,
    back: np.ndarray,
    arithmetic: str,
    out: np.ndarray,
    dest: np.ndarray | None = None,
) -> None:
    """``floor(clamp(a * rgb + (1 - a) * back, 0, 255))`` as upstream's float32 kernels, written in place.

    ``rgb`` (..., 3, H, W) and ``alpha`` (..., 1, H, W) float32 (uint8 too:
    its levels convert to float32 exactly); ``back`` (H, W) float32;
    ``out`` float32 like ``rgb`` receives the clamped sum, and its floor goes
    to ``dest`` (``out`` itself when None; an integer array takes the levels
    exactly). Same operations, same roundings as the four kernels: ``a * rgb``
    per channel, ``(1 - a) * back`` (the same for every channel, so computed
    once), their sum, the clamp and the floor, each rounded to float32.
    """
    a = alpha_fraction(alpha, arithmetic)
    weighted_back = np.subtract(np.float32(1.0), a, dtype=np.float32)
    np.multiply(weighted_back, back, out=weighted_back)
    np.multiply(a, rgb, out=out, dtype=np.float32)
    np.add(out, weighted_back, out=out)
    np.clip(out, np.float32(0.0), np.float32(255.0), out=out)
    np.floor(out, out=out if dest is None else dest, casting="unsafe")
