"""BF16 rounding (`reference.oracle.numerics`) against torch's float32 -> bfloat16 cast and hand-computed edges."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from deferlab.reference.oracle.numerics import bf16_bits, float32_bits, to_bf16


def f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def torch_bits(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


@given(hnp.arrays(np.uint32, st.integers(1, 64)))
@example(np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x00000001, 0x807FFFFF, 0x7FC00001, 0xFFFFFFFF], np.uint32))
def test_bits_equal_torch_on_any_bit_pattern(bits: np.ndarray) -> None:
    """For any float32 bit pattern our BF16 bits equal torch's cast; NaNs map to NaNs (their bits are torch's own)."""
    x = bits.view(np.float32)
    ours, theirs = bf16_bits(x), torch_bits(x)
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], theirs[~nan])
    as_f32 = (np.stack([ours, theirs]).astype(np.uint32) << 16).view(np.float32)
    assert np.isnan(as_f32[:, nan]).all()


@pytest.mark.parametrize(
    ("bits", "expected"),
    [
        (0x3F800000, 0x3F80),  # 1.0 exact
        (0x3F808000, 0x3F80),  # exactly half way, even below: ties to even (down)
        (0x3F818000, 0x3F82),  # exactly half way, odd below: ties to even (up)
        (0x3F808001, 0x3F81),  # just above half: up
        (0x3F807FFF, 0x3F80),  # just below half: down
        (0x7F7FFFFF, 0x7F80),  # float32 max rounds past the largest BF16: +inf
        (0x7F7F7FFF, 0x7F7F),  # just below that halfway: the largest finite BF16
        (0x7F800000, 0x7F80),  # +inf stays
        (0xFF800000, 0xFF80),  # -inf stays
        (0x7FC00000, 0x7FC0),  # NaN -> canonical quiet NaN
        (0xFFC12345, 0x7FC0),  # negative NaN with payload -> canonical
        (0x7F800001, 0x7FC0),  # signalling NaN -> canonical
        (0x00000001, 0x0000),  # smallest subnormal rounds to +0
        (0x00008000, 0x0000),  # subnormal tie, even below: down
        (0x00018000, 0x0002),  # subnormal tie, odd below: up
        (0x807FFFFF, 0x8080),  # largest negative subnormal rounds to the smallest negative normal
        (0x80000000, 0x8000),  # -0 keeps its sign
    ],
)
def test_edge_patterns(bits: int, expected: int) -> None:
    """Hand-computed BF16 roundings: ties to even, overflow to inf, NaN canonical, subnormals, signed zero."""
    x = np.array([f32(bits)], np.float32)
    assert int(bf16_bits(x)[0]) == expected
    value = to_bf16(x)[0]
    assert (np.isnan(value) and expected == 0x7FC0) or int(float32_bits(np.array([value]))[0]) == expected << 16


@given(hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(width=32, allow_nan=False)))
def test_to_bf16_is_idempotent_and_nearest(x: np.ndarray) -> None:
    """Rounding twice changes nothing, and the result is no farther than half a BF16 ulp (finite inputs)."""
    y = to_bf16(x)
    assert np.array_equal(to_bf16(y), y)
    finite = np.isfinite(y)
    step = np.abs(x[finite].astype(np.float64)) * 2.0**-8 + 2.0**-133  # half ulp bound (relative + subnormal)
    assert (np.abs(y[finite].astype(np.float64) - x[finite]) <= step).all()
