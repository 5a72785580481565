"""Pad, normalize and patchify (semantics §3.5): constants, rounding forms, torch parity and the patch layout."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from deferlab.reference.oracle.normalize import (
    normalize_checkpoint,
    normalize_eager,
    normalize_scale_bias,
    pad_bottom_right,
    patchify,
    scale_bias,
)
from deferlab.reference.system.family_configs import CLIP_MEAN, CLIP_STD

means = st.tuples(*[st.floats(0.0, 1.0)] * 3)
stds = st.tuples(*[st.floats(0.05, 1.0)] * 3)
ALL_LEVELS = np.tile(np.arange(256, dtype=np.float32), (3, 1, 1))  # (3, 1, 256): every uint8 level per channel


def nearest_f32(q: Fraction) -> np.float32:
    """The float32 nearest to the rational q, ties to even (an FMA's single rounding, derived exactly)."""
    lo = np.float32(float(q))
    cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.float32(c).view(np.uint32)) & 1))


def test_k3_constants_match_the_facts() -> None:
    """mean = std = 0.5 gives scale f32(1/127.5) = 0.007843137718737125 and bias -1.0 (semantics §3.5)."""
    scale, bias = scale_bias((0.5,) * 3, (0.5,) * 3)
    assert scale.dtype == np.float32 and bias.dtype == np.float32
    assert scale.tolist() == [0.007843137718737125] * 3 and bias.tolist() == [-1.0] * 3


@given(means, stds)
def test_scale_bias_are_double_math_rounded_once(mean: tuple, std: tuple) -> None:
    """scale/bias are the float32 nearest to the Python-double values 1/(255 std) and -mean/std."""
    scale, bias = scale_bias(mean, std)
    for c in range(3):
        assert scale[c] == nearest_f32(Fraction(1.0 / (255.0 * std[c])))
        assert bias[c] == nearest_f32(Fraction(-mean[c] / std[c]))


@given(means, stds)
@example(mean=(0.0, 0.0, 2.122257387652354e-41), std=(1.0, 1.0, 1.0))  # subnormal bias: float64 is not exact
def test_fused_is_one_rounding_of_the_exact_value(mean: tuple, std: tuple) -> None:
    """fused=True equals round_f32(x * scale + bias) computed in exact rationals, for every uint8 level."""
    scale, bias = scale_bias(mean, std)
    got = normalize_scale_bias(ALL_LEVELS, scale, bias, fused=True)
    for c in range(3):
        for x in (0, 1, 33, 48, 127, 128, 200, 255):
            exact = Fraction(x) * Fraction(float(scale[c])) + Fraction(float(bias[c]))
            assert got[c, 0, x] == nearest_f32(exact)


@given(means, stds)
def test_unfused_is_two_float32_roundings(mean: tuple, std: tuple) -> None:
    """fused=False equals a float32 multiply then a float32 add (torch's mul then add)."""
    scale, bias = scale_bias(mean, std)
    got = normalize_scale_bias(ALL_LEVELS, scale, bias, fused=False)
    t = torch.from_numpy(ALL_LEVELS)
    want = torch.mul(t, torch.from_numpy(scale).reshape(3, 1, 1)) + torch.from_numpy(bias).reshape(3, 1, 1)
    assert np.array_equal(got, want.numpy())


@given(means, stds)
def test_torch_cpu_addcmul_is_modelled_by_fused(mean: tuple, std: tuple) -> None:
    """torch CPU addcmul(bias, x, scale) equals fused=True on this (FMA) machine, bit for bit."""
    scale, bias = scale_bias(mean, std)
    t = torch.addcmul(
        torch.from_numpy(bias).reshape(3, 1, 1), torch.from_numpy(ALL_LEVELS), torch.from_numpy(scale).reshape(3, 1, 1)
    )
    assert np.array_equal(normalize_scale_bias(ALL_LEVELS, scale, bias, fused=True), t.numpy())


@given(means, stds)
def test_eager_equals_torch_eager(mean: tuple, std: tuple) -> None:
    """normalize_eager equals torch's (x / 255 - mean) / std in float32 on CPU."""
    t = torch.from_numpy(ALL_LEVELS)
    m = torch.tensor(mean, dtype=torch.float32).reshape(3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).reshape(3, 1, 1)
    assert np.array_equal(normalize_eager(ALL_LEVELS, mean, std), ((t / 255.0 - m) / s).numpy())


@given(means, stds)
def test_checkpoint_equals_its_numpy_recipe(mean: tuple, std: tuple) -> None:
    """normalize_checkpoint equals the checkpoint's in-place NumPy steps (semantics §11.3)."""
    x = (np.arange(256) / 255.0).astype(np.float32)[None, :].repeat(3, 0)  # (3, 256) HWC-like per channel
    x = x.T.copy()  # (256, 3): channels last, as the checkpoint's HWC array
    x -= np.array(mean)
    x *= 1.0 / np.array(std)
    got = normalize_checkpoint(ALL_LEVELS, mean, std)[:, 0, :].T
    assert np.array_equal(got, x)


def test_scale_bias_claim_breaks_in_fp32_and_bf16() -> None:
    """The PR's "scale/bias equals (x/255 - mean)/std exactly" fails for mean = std = 0.5 (pinned: x = 127).

    Both forms round intermediates of size ~1 (x * scale ~ 0.996, x / 255 ~ 0.498)
    before cancelling against the bias / mean, so each is within 2**-23 (a
    float32 ulp of 1) of the true value (x - 127.5) / 127.5; yet they differ,
    and at x = 127 even their BF16 casts differ (the tower sees different inputs).
    """
    scale, bias = scale_bias((0.5,) * 3, (0.5,) * 3)
    x = np.full((3, 1, 1), 127, np.float32)
    unfused = normalize_scale_bias(x, scale, bias)[0, 0, 0]
    eager = normalize_eager(x, (0.5,) * 3, (0.5,) * 3)[0, 0, 0]
    truth = Fraction(127 * 2 - 255, 255)
    assert unfused != eager
    for v in (unfused, eager):
        assert abs(Fraction(float(v)) - truth) <= Fraction(1, 2**23)
    bf = torch.tensor([float(unfused), float(eager)], dtype=torch.float32).to(torch.bfloat16)
    assert bf[0] != bf[1]


@given(
    hnp.arrays(np.float32, st.tuples(st.integers(1, 2), st.just(3), st.integers(1, 9), st.integers(1, 9))), st.data()
)
def test_pad_bottom_right(x: np.ndarray, data: st.DataObject) -> None:
    """The image keeps its place at the top left; every padded pixel is 0 (before normalization)."""
    ph = data.draw(st.integers(x.shape[2], 12))
    pw = data.draw(st.integers(x.shape[3], 12))
    out = pad_bottom_right(x, ph, pw)
    h, w = x.shape[2:]
    assert out.shape == x.shape[:2] + (ph, pw) and out.dtype == x.dtype
    assert np.array_equal(out[..., :h, :w], x, equal_nan=True)
    assert (out[..., h:, :] == 0).all() and (out[..., :, w:] == 0).all()


def test_padding_normalizes_to_the_bias() -> None:
    """Padding is zero in pixel space, so after normalization it equals bias = -mean/std."""
    scale, bias = scale_bias(CLIP_MEAN, CLIP_STD)
    out = normalize_scale_bias(pad_bottom_right(np.full((3, 2, 2), 9, np.float32), 4, 4), scale, bias, fused=True)
    assert all((out[c, 2:, :] == bias[c]).all() and (out[c, :, 2:] == bias[c]).all() for c in range(3))


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.integers(1, 5))
def test_patchify_is_the_stated_permutation(b: int, c: int, gh: int, gw: int, p: int) -> None:
    """out[b*gh*gw + gy*gw + gx, c, py, px] == x[b, c, gy*p + py, gx*p + px]; every element used once."""
    x = np.arange(b * c * gh * p * gw * p, dtype=np.float32).reshape(b, c, gh * p, gw * p)
    out = patchify(x, p)
    assert out.shape == (b * gh * gw, c, p, p)
    assert np.array_equal(np.sort(out.ravel()), x.ravel())  # a permutation
    for bb, gy, gx, cc, py, px in np.ndindex(b, gh, gw, c, p, p):
        assert out[bb * gh * gw + gy * gw + gx, cc, py, px] == x[bb, cc, gy * p + py, gx * p + px]
    t = torch.from_numpy(x).view(b, c, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5).reshape(-1, c, p, p)
    assert np.array_equal(out, t.numpy())


@pytest.mark.cuda
def test_device_addcmul_is_fused(device: str) -> None:
    """On every device upstream's addcmul(bias, x, scale) equals the single-rounding form (CPU: measured FMA)."""
    for mean, std in (((0.5,) * 3, (0.5,) * 3), (CLIP_MEAN, CLIP_STD)):
        scale, bias = scale_bias(mean, std)
        t = torch.addcmul(
            torch.from_numpy(bias).reshape(3, 1, 1).to(device),
            torch.from_numpy(ALL_LEVELS).to(device),
            torch.from_numpy(scale).reshape(3, 1, 1).to(device),
        )
        assert np.array_equal(normalize_scale_bias(ALL_LEVELS, scale, bias, fused=True), t.cpu().numpy())
