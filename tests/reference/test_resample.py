"""The antialiased bicubic oracle: its own invariants, an independent 2-D convolution, and torch.

torch is imported here only, to compare with: the reference module never imports it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from deferlab.reference.oracle.resample import (
    TIE_EPSILON,
    ResampleResult,
    aa_bicubic_weights,
    classify_disagreement,
    resize_bicubic_aa,
    tie_epsilon,
)

U32 = 2.0**-24


def keys(d: float) -> float:
    """Keys cubic, a = -0.5, written independently of the module (scalar, float64)."""
    x = abs(d)
    if x < 1:
        return 1.5 * x**3 - 2.5 * x**2 + 1
    if x < 2:
        return -0.5 * x**3 + 2.5 * x**2 - 4 * x + 2
    return 0.0


def axis_matrix(n: int, m: int) -> np.ndarray:
    """(m, n) ideal real-number filter matrix, from the textbook definition (not the module's code)."""
    s = n / m
    stretch = max(s, 1.0)
    out = np.zeros((m, n))
    for i in range(m):
        c = s * (i + 0.5)
        lo, hi = max(int(c - 2 * stretch + 0.5), 0), min(int(c + 2 * stretch + 0.5), n)
        w = np.array([keys((j - c + 0.5) / stretch) for j in range(lo, hi)])
        out[i, lo:hi] = w / w.sum()
    return out


def direct_conv(x: np.ndarray, m_h: int, m_w: int) -> np.ndarray:
    """Independent 2-D float64 convolution: out[i, j] = sum_yx Wh[i, y] Ww[j, x] x[y, x], no separable passes."""
    wh, ww = axis_matrix(x.shape[-2], m_h), axis_matrix(x.shape[-1], m_w)
    return np.einsum("iy,jx,...yx->...ij", wh, ww, x.astype(np.float64))


def torch_weights(n: int, m: int, dtype: torch.dtype = torch.float32) -> np.ndarray:
    """torch's own (m, n) weights along W, read off by resizing the identity (each output is one weight)."""
    eye = torch.eye(n, dtype=dtype).reshape(n, 1, 1, n)
    out = torch.nn.functional.interpolate(eye, size=(1, m), mode="bicubic", align_corners=False, antialias=True)
    return out.reshape(n, m).T.double().numpy()


def dense(n: int, m: int, coordinates: str = "float32") -> np.ndarray:
    xmin, w = aa_bicubic_weights(n, m, coordinates=coordinates)
    out = np.zeros((m, n))
    for j in range(w.shape[1]):
        idx = np.minimum(xmin + j, n - 1)
        np.add.at(out, (np.arange(m), idx), w[:, j])
    return out


def torch_resize(x: np.ndarray, out_h: int, out_w: int) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(x)).float()
    return torch.nn.functional.interpolate(t, size=(out_h, out_w), mode="bicubic", align_corners=False, antialias=True)


sizes = st.tuples(st.integers(1, 300), st.integers(1, 300))


@given(sizes)
@example((3840, 1800))
@example((5, 3))
def test_weights_equal_torch_float32_weights(nm: tuple[int, int]) -> None:
    """Our float32-coordinate weights are within 16 u of the float32 weights torch uses (u = 2**-24)."""
    n, m = nm
    assert np.abs(dense(n, m) - torch_weights(n, m)).max() <= 16 * U32


@given(sizes)
def test_exact_weights_equal_torch_float64_weights(nm: tuple[int, int]) -> None:
    """With exact coordinates our weights equal torch's float64 path to rounding noise."""
    n, m = nm
    assert np.abs(dense(n, m, "exact") - torch_weights(n, m, torch.float64)).max() <= 1e-12


@pytest.mark.parametrize("coordinates", ["float32", "exact"])
def test_hand_computed_weights(coordinates: str) -> None:
    """4 -> 2: centre 1.0, stretch 2, offsets -0.25, 0.25, 0.75, 1.25 give K = 111, 111, 29, -9 (/128), so /242.

    2 -> 1 averages the two pixels by symmetry; n -> n is the identity.
    """
    xmin, w = aa_bicubic_weights(4, 2, coordinates=coordinates)
    assert xmin.tolist() == [0, 0]
    assert np.array_equal(w[0, :4], np.array([111, 111, 29, -9]) / 242)
    assert np.array_equal(w[1, :4], np.array([-9, 29, 111, 111]) / 242)
    assert aa_bicubic_weights(2, 1, coordinates=coordinates)[1][0, :2].tolist() == [0.5, 0.5]
    assert np.array_equal(dense(5, 5, coordinates), np.eye(5))


@given(sizes)
def test_weight_rows_are_normalized_windows(nm: tuple[int, int]) -> None:
    """Each row sums to 1, starts inside the image, and uses at most 2*ceil(support)+1 taps."""
    n, m = nm
    xmin, w = aa_bicubic_weights(n, m)
    assert np.allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (xmin >= 0).all() and (xmin < n).all()
    assert w.shape[1] <= 2 * math.ceil(2 * max(n / m, 1.0) + 1e-6) + 1
    assert not w.flags.writeable and aa_bicubic_weights(n, m)[1] is w  # cached, read-only


@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 40), st.integers(1, 40), st.integers(0, 255))
def test_constant_stays_constant(h: int, w: int, oh: int, ow: int, level: int) -> None:
    """A constant image resizes to exactly the same constant (weights sum to 1, rounding absorbs the rest)."""
    res = resize_bicubic_aa(np.full((3, h, w), level, np.uint8), oh, ow)
    assert (res.values == level).all()
    assert np.abs(res.exact - level).max() <= 1e-9


@given(
    hnp.arrays(np.uint8, st.tuples(st.integers(1, 3), st.integers(1, 24), st.integers(1, 24))),
    st.integers(1, 24),
    st.integers(1, 24),
)
@example(np.tile(np.arange(0, 240, 10, dtype=np.uint8), (1, 5, 1)), 3, 7)  # a ramp
def test_separable_passes_equal_direct_2d_convolution(x: np.ndarray, oh: int, ow: int) -> None:
    """With exact coordinates the W-then-H passes equal an independent float64 2-D convolution."""
    res = resize_bicubic_aa(x, oh, ow, coordinates="exact")
    if x.shape[-2:] == (oh, ow):
        return
    assert np.abs(res.exact - direct_conv(x, oh, ow)).max() <= 1e-9


def test_ramp_interior_is_reproduced() -> None:
    """Away from the borders a linear ramp resizes to the ramp sampled at the output centres."""
    x = np.tile(np.arange(64, dtype=np.float64) * 3.0, (1, 4, 1))
    res = resize_bicubic_aa(x, 4, 16, coordinates="exact")
    centres = (np.arange(16) + 0.5) * 4 - 0.5
    interior = slice(3, 13)  # windows of +-8 px stay inside
    assert np.abs(res.exact[0, 0, interior] - 3.0 * centres[interior]).max() <= 1e-9


@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 4), st.integers(1, 12), st.integers(1, 12))))
def test_same_size_is_identity(x: np.ndarray) -> None:
    """At the target size: no resize, no rounding; values are the input as float32, tie distance +inf."""
    res = resize_bicubic_aa(x, x.shape[1], x.shape[2])
    assert res.values.dtype == np.float32 and np.array_equal(res.values, x.astype(np.float32))
    assert np.isinf(res.tie_distance).all() and np.array_equal(res.uint8, x)


@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(2, 20), st.integers(2, 20))))
def test_batch_equals_per_image(x: np.ndarray) -> None:
    """Resizing a batch equals resizing each image alone, bitwise (upstream batches same-shape sources)."""
    oh, ow = max(1, x.shape[2] // 2), max(1, x.shape[3] // 3)
    batch = resize_bicubic_aa(x, oh, ow)
    for b in range(x.shape[0]):
        single = resize_bicubic_aa(x[b], oh, ow)
        assert np.array_equal(batch.exact[b], single.exact) and np.array_equal(batch.values[b], single.values)


@st.composite
def torch_cases(draw: st.DrawFn) -> tuple[np.ndarray, int, int]:
    h, w = draw(st.integers(1, 48)), draw(st.integers(2, 48))
    oh = draw(st.integers(1, max(1, h)))  # the pipeline only downscales ...
    ow = draw(st.integers(2, max(2, w)))  # ... and output width 1 hits a torch defect (pinned below)
    if draw(st.booleans()):
        oh, ow = draw(st.integers(1, 64)), draw(st.integers(2, 64))  # upscales too
    seed = draw(st.integers(0, 2**32 - 1))
    x = np.random.default_rng(seed).integers(0, 256, (1, 3, h, w), dtype=np.uint8)
    return x, oh, ow


@given(torch_cases())
def test_torch_error_stays_within_the_bound(case: tuple[np.ndarray, int, int]) -> None:
    """|torch float32 result - exact| <= tie_epsilon, and every rounded disagreement is an explained tie."""
    x, oh, ow = case
    ref = resize_bicubic_aa(x, oh, ow)
    raw = torch_resize(x, oh, ow)
    eps = tie_epsilon(x.shape[2], oh, x.shape[3], ow)
    assert np.abs(raw.double().numpy() - ref.exact).max() <= eps
    rounded = raw.round().clamp(0, 255).numpy()
    assert classify_disagreement(ref, rounded, eps).all()


@settings(max_examples=1, deadline=None)
@given(st.just(0))
def test_mismatch_rate_against_torch(_: int) -> None:
    """On 40 seeded random downscales every disagreement with torch is an explained tie; the rate is reported."""
    rng = np.random.default_rng(20260809)
    total = differing = 0
    for _case in range(40):
        h, w = rng.integers(8, 64, 2)
        oh, ow = int(rng.integers(2, h + 1)), int(rng.integers(2, w + 1))
        x = rng.integers(0, 256, (1, 3, h, w), dtype=np.uint8)
        ref = resize_bicubic_aa(x, oh, ow)
        got = torch_resize(x, oh, ow).round().clamp(0, 255).numpy()
        assert classify_disagreement(ref, got).all()
        total += got.size
        differing += int((got != ref.values).sum())
    print(f"resample vs torch CPU: {differing} of {total} elements differ ({differing / total:.4%}), all ties")
    assert differing <= total * 0.01  # ties are rare: a rate above 1% would mean a systematic offset


def test_large_resize_needs_float32_coordinates() -> None:
    """At 4k widths torch's float32 filter placement moves results by > 0.01 level; our default models it."""
    x = np.random.default_rng(1).integers(0, 256, (1, 1, 4, 3840), dtype=np.uint8)
    raw = torch_resize(x, 4, 1800).double().numpy()
    modelled = resize_bicubic_aa(x, 4, 1800).exact
    ideal = resize_bicubic_aa(x, 4, 1800, coordinates="exact").exact
    assert np.abs(raw - ideal).max() > 0.01
    assert np.abs(raw - modelled).max() <= tie_epsilon(4, 4, 3840, 1800)


# (8000, 2, 7168): kimi-k3 resizes a 2 x 8000 image to 1 x 7168 (one-side limit), so the pipeline meets it.
@pytest.mark.parametrize(("h", "w", "oh"), [(5, 1, 3), (5, 2, 3), (50, 50, 20), (7, 1, 9), (8000, 2, 7168)])
def test_torch_width_one_output_defect_is_caught(h: int, w: int, oh: int) -> None:
    """Output width 1 with a height change: the oracle is right (direct convolution) and flags torch CPU if wrong.

    torch 2.13 CPU antialiased interpolate replicates the first output row
    down the column; such a difference is never an explained tie.
    """
    x = np.random.default_rng(h * 100 + w).integers(0, 256, (1, 3, h, w), dtype=np.uint8)
    ref = resize_bicubic_aa(x, oh, 1, coordinates="exact")
    assert np.abs(ref.exact - direct_conv(x, oh, 1)).max() <= 1e-9
    ref = resize_bicubic_aa(x, oh, 1)
    got = torch_resize(x, oh, 1).round().clamp(0, 255).numpy()
    explained = classify_disagreement(ref, got)
    torch_is_right = np.abs(torch_resize(x, oh, 1).double().numpy() - ref.exact).max() <= tie_epsilon(h, oh, w, 1)
    assert bool(explained.all()) == bool(torch_is_right)


def test_tie_epsilon_constant_covers_4x_downscales() -> None:
    """TIE_EPSILON bounds every resize of at most 4x per axis (checked on a spread of sizes)."""
    for n in (8, 17, 64, 333, 1000, 4096):
        for m in {max(1, math.ceil(n / 4)), max(1, n // 2), max(1, n - 1), n}:
            assert tie_epsilon(n, m, n, m) <= TIE_EPSILON
    assert TIE_EPSILON < 0.05  # still tight enough to mean something


def test_classify_disagreement_rules() -> None:
    """Explained = equal, or one level off within epsilon of a tie; two levels or far from a tie never."""
    ref = ResampleResult(
        values=np.array([10, 10, 10, 10], np.float32),
        exact=np.array([10.4999, 10.3, 10.4999, 9.9], np.float64),
        tie_distance=np.array([1e-4, 0.2, 1e-4, 0.4]),
    )
    other = np.array([11, 11, 12, 10], np.float32)
    assert classify_disagreement(ref, other).tolist() == [True, False, False, True]
    with pytest.raises(ValueError, match="shape"):
        classify_disagreement(ref, np.zeros(3))


@pytest.mark.cuda
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(torch_cases())
def test_device_resize_disagreements_are_ties(device: str, case: tuple[np.ndarray, int, int]) -> None:
    """On each device, torch's rounded resize differs from the oracle only by explained ties."""
    x, oh, ow = case
    ref = resize_bicubic_aa(x, oh, ow)
    t = torch.from_numpy(np.ascontiguousarray(x)).float().to(device)
    raw = torch.nn.functional.interpolate(t, size=(oh, ow), mode="bicubic", align_corners=False, antialias=True)
    eps = tie_epsilon(x.shape[2], oh, x.shape[3], ow)
    assert classify_disagreement(ref, raw.round().clamp(0, 255).cpu().numpy(), eps).all()


@pytest.mark.parametrize(
    ("shape", "oh", "ow"),
    [
        ((1, 500, 4000), 200, 1700),  # several row groups, column tiles and input steps in the H pass
        ((1, 400, 2600), 400, 500),  # W only, a 5x downscale: several row tiles per column-pass group
        ((2, 1, 900, 2000), 300, 2000),  # H only, batched, several row groups
        ((1, 300, 260), 700, 600),  # an upscale past one group
    ],
)
def test_large_resize_equals_dense_filters(shape: tuple[int, ...], oh: int, ow: int) -> None:
    """Past one row group / product tile, the exact values still equal the dense filter matrices applied in full."""
    x = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    res = resize_bicubic_aa(x, oh, ow, coordinates="exact")
    want = axis_matrix(shape[-2], oh) @ x.astype(np.float64) @ axis_matrix(shape[-1], ow).T
    assert np.abs(res.exact - want).max() <= 1e-9
    assert np.array_equal(res.values, np.clip(np.rint(res.exact), 0, 255).astype(np.float32))
