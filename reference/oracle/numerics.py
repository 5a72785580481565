"""Bit-level float helpers: BF16 rounding as torch casts float32 -> bfloat16.

The owner casts the FP32 patches to the tower's BF16; "BF16 bit-identical"
claims are checked on these values. torch rounds to nearest, ties to even,
on the float32 bit pattern; values past the largest finite BF16 (after
rounding) become infinity; float32 subnormals round like any other value (no
flush to zero). A NaN stays a NaN, but its bits are implementation-defined
(measured: torch 2.13 CPU writes 0xFFFF, c10's scalar conversion 0x7FC0, CUDA's
intrinsic 0x7FFF); we write 0x7FC0 and compare NaNs as NaNs, never by bits.
The pipeline never produces NaN.
"""

from __future__ import annotations

import numpy as np

from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.validate import as_array

_BF16_NAN = np.uint16(0x7FC0)


def float32_bits(x: np.ndarray) -> np.ndarray:
    """The uint32 bit patterns of float32 ``x`` (same shape)."""
    arr = as_array("x", x)
    if arr.dtype != np.float32:
        raise InputTypeError(f"x must be float32, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr).view(np.uint32).copy()


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """uint16 BF16 patterns of float32 ``x``, round-to-nearest-even; NaN -> 0x7FC0 (a quiet NaN).

    In uint32: no non-NaN pattern can overflow (the largest, 0xFF800000 for
    -inf, plus 0x8000 stays below 2**32); a NaN's lane may wrap, and is
    replaced by the canonical NaN anyway.
    """
    arr = as_array("x", x)
    if arr.dtype != np.float32:
        raise InputTypeError(f"x must be float32, got dtype {arr.dtype}")
    bits = np.ascontiguousarray(arr).view(np.uint32)
    rounded = (bits >> np.uint32(16)) & np.uint32(1)
    rounded += bits
    rounded += np.uint32(0x7FFF)
    rounded >>= np.uint32(16)
    out = rounded.astype(np.uint16)
    out[np.isnan(arr)] = _BF16_NAN
    return out


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 ``x`` rounded to the nearest BF16 value (ties to even), returned as float32."""
    return (bf16_bits(x).astype(np.uint32) << np.uint32(16)).view(np.float32)
