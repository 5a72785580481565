"""Transparent-background compositing (semantics §3.4): patterns, the exhaustive float32 table, CPU vs CUDA arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from deferlab.reference.oracle.background import alpha_fraction, background_values, chessboard, fill_transparent_bg
from deferlab.reference.system.config import BackgroundConfig

BG_LEVELS = (255, 180, 200, 128, 0)  # white, K3 gray, default chessboard gray, "gray", black


def f32_of(q: Fraction) -> np.float32:
    """The float32 nearest to the rational ``q`` (ties to even), derived without float division."""
    lo = np.float32(float(q))  # within a float32 ulp or so; fix up by exact comparison
    cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.float32(c).view(np.uint32)) & 1))


def alpha_table(arithmetic: str) -> np.ndarray:
    """a = clamp(A/255, 0, 1) for A = 0..255: true float32 division (cpu) or A * f32(1/255) (cuda)."""
    if arithmetic == "cpu":
        return np.array([f32_of(Fraction(a, 255)) for a in range(256)], np.float32)
    recip = f32_of(Fraction(1, 255))
    return np.array([f32_of(Fraction(a) * Fraction(float(recip))) for a in range(256)], np.float32)


def derived_composite(rgb: np.ndarray, a: np.ndarray, bg: float) -> np.ndarray:
    """floor(clamp(a*rgb + (1-a)*bg)) with each float32 op taken as the exact float64 result rounded once.

    Exact because every product and sum here fits in 53 bits (8-bit integers
    times 24-bit fractions, magnitudes <= 255), so float64 adds no rounding.
    """
    f64 = np.float64
    t1 = (a.astype(f64) * rgb.astype(f64)).astype(np.float32)
    om = (1.0 - a.astype(f64)).astype(np.float32)
    t2 = (om.astype(f64) * f64(bg)).astype(np.float32)
    s = (t1.astype(f64) + t2.astype(f64)).astype(np.float32)
    return np.floor(np.clip(s, 0, 255))


def full_grid() -> tuple[np.ndarray, np.ndarray]:
    a, c = np.meshgrid(np.arange(256, dtype=np.float32), np.arange(256, dtype=np.float32), indexing="ij")
    return a, c


@pytest.mark.parametrize("arithmetic", ["cpu", "cuda"])
@pytest.mark.parametrize("level", BG_LEVELS)
def test_exhaustive_alpha_rgb_table(arithmetic: str, level: int) -> None:
    """All 256 alpha x 256 colour values over each background level equal the direct float32 derivation."""
    A, C = full_grid()
    x = np.stack([C, C, C, A])  # (4, 256, 256): row = alpha, column = colour
    bg = BackgroundConfig(pattern="chessboard", square_size=1024, white_value=level, gray_value=level)
    got = fill_transparent_bg(x, bg, arithmetic=arithmetic)
    expected = derived_composite(C, alpha_table(arithmetic)[A.astype(int)], float(level))
    assert got.dtype == np.float32 and got.shape == (3, 256, 256)
    assert all(np.array_equal(got[ch], expected) for ch in range(3))


def test_alpha_fraction_matches_independent_derivation() -> None:
    """Our float32 A/255 (cpu) and A*f32(1/255) (cuda) equal the rational derivations."""
    alphas = np.arange(256, dtype=np.float32)
    assert np.array_equal(alpha_fraction(alphas, "cpu"), alpha_table("cpu"))
    assert np.array_equal(alpha_fraction(alphas, "cuda"), alpha_table("cuda"))


def test_cpu_cuda_flip_counts_match_the_facts() -> None:
    """126 of 256 alpha levels differ between the arithmetics; 669 composited values flip over the 5 levels (semantics §14.8)."""
    assert int((alpha_table("cpu") != alpha_table("cuda")).sum()) == 126
    A, C = full_grid()
    x = np.stack([C, C, C, A])
    flips = 0
    for level in BG_LEVELS:
        bg = {"pattern": "chessboard", "chessboard_square_size": 1024, "chessboard_white_value": level}
        cpu = fill_transparent_bg(x, bg, arithmetic="cpu")[0]
        cuda = fill_transparent_bg(x, bg, arithmetic="cuda")[0]
        assert np.abs(cpu - cuda).max() <= 1  # a flip is one level
        flips += int((cpu != cuda).sum())
    assert flips == 669


@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 2), st.just(4), st.integers(1, 20), st.integers(1, 20))))
def test_cpu_arithmetic_equals_torch_cpu(x: np.ndarray) -> None:
    """arithmetic='cpu' is bit-equal to upstream's four float32 torch kernels on CPU (K3 chessboard)."""
    bg = BackgroundConfig(pattern="chessboard", square_size=8, gray_value=180)
    t = torch.from_numpy(x).float()
    alpha = (t[:, 3:4] / 255.0).clamp(0.0, 1.0)
    back = torch.from_numpy(chessboard(x.shape[2], x.shape[3], bg))
    expected = (alpha * t[:, :3] + (1.0 - alpha) * back).clamp(0.0, 255.0).floor_()
    assert np.array_equal(fill_transparent_bg(x.astype(np.float32), bg), expected.numpy())


@pytest.mark.parametrize("top_left", [True, False])
@pytest.mark.parametrize("square", [1, 3, 8, 16])
def test_chessboard_layout(top_left: bool, square: int) -> None:
    """Cell (y//s + x//s) % 2 == (1 if top_left else 0) is gray; with top_left, (0,0) white and (0,s) gray."""
    bg = BackgroundConfig(
        pattern="chessboard", square_size=square, white_value=250, gray_value=90, square_on_top_left=top_left
    )
    board = chessboard(3 * square + 1, 2 * square + 2, bg)
    for y in range(board.shape[0]):
        for x in range(board.shape[1]):
            gray = (y // square + x // square) % 2 == (1 if top_left else 0)
            assert board[y, x] == (90 if gray else 250)
    assert board[0, 0] == (250 if top_left else 90)
    assert board[0, square] == (90 if top_left else 250)


@pytest.mark.parametrize(("pattern", "level"), [("white", 255), ("black", 0), ("gray", 128)])
def test_plain_patterns(pattern: str, level: int) -> None:
    """white 255, black 0, gray 128 (not the chessboard's 200)."""
    values = background_values(3, 5, BackgroundConfig(pattern=pattern))
    assert values.dtype == np.float32 and (values == level).all()


def test_alpha_zero_gives_background_and_255_gives_colour() -> None:
    """Fully transparent pixels become the background, opaque ones keep their colour (every pattern)."""
    x = np.zeros((4, 4, 20), np.float32)
    x[:3] = 77
    x[3, :2] = 0
    x[3, 2:] = 255
    for pattern in ("chessboard", "white", "black", "gray"):
        bg = BackgroundConfig(pattern=pattern)
        out = fill_transparent_bg(x, bg)
        assert np.array_equal(out[:, :2], np.broadcast_to(background_values(4, 20, bg)[:2], (3, 2, 20)))
        assert (out[:, 2:] == 77).all()


def test_three_channels_pass_through_and_none_drops_alpha() -> None:
    """3 channels are returned unchanged; 4 channels with no config lose the alpha, not composited."""
    rgb = np.random.default_rng(0).integers(0, 256, (2, 3, 5, 6)).astype(np.float32)
    assert np.array_equal(fill_transparent_bg(rgb, BackgroundConfig(pattern="white")), rgb)
    rgba = np.concatenate([rgb, np.zeros((2, 1, 5, 6), np.float32)], axis=1)
    out = fill_transparent_bg(rgba, None)
    assert out.shape == (2, 3, 5, 6) and np.array_equal(out, rgb) and out.flags.c_contiguous


def test_dict_configs() -> None:
    """A dict without 'pattern' means black; an unknown pattern raises 'Invalid background pattern'."""
    x = np.zeros((4, 2, 2), np.float32)
    x[:3] = 200
    assert (fill_transparent_bg(x, {"type": "white"}) == 0).all()
    assert (fill_transparent_bg(x, {"pattern": "white"}) == 255).all()
    with pytest.raises(ValueError, match="Invalid background pattern: checker"):
        fill_transparent_bg(x, {"pattern": "checker"})


@pytest.mark.cuda
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 2), st.just(4), st.integers(1, 20), st.integers(1, 20))))
def test_device_arithmetic_equals_torch_on_that_device(device: str, x: np.ndarray) -> None:
    """On each device, upstream's torch composite equals the oracle with that device's arithmetic, bit for bit."""
    bg = BackgroundConfig(pattern="chessboard", square_size=8, gray_value=180)
    t = torch.from_numpy(x).float().to(device)
    alpha = (t[:, 3:4] / 255.0).clamp(0.0, 1.0)
    back = torch.from_numpy(chessboard(x.shape[2], x.shape[3], bg)).to(device)
    expected = (alpha * t[:, :3] + (1.0 - alpha) * back).clamp(0.0, 255.0).floor_().cpu().numpy()
    assert np.array_equal(fill_transparent_bg(x.astype(np.float32), bg, arithmetic=device), expected)


@pytest.mark.cuda
def test_cuda_divides_by_multiplying_with_the_reciprocal(device: str) -> None:
    """torch on the device computes A / 255 exactly as our arithmetic of the same name (all 256 levels)."""
    alphas = torch.arange(256, dtype=torch.float32, device=device)
    got = (alphas / 255.0).clamp(0.0, 1.0).cpu().numpy()
    assert np.array_equal(got, alpha_fraction(np.arange(256, dtype=np.float32), device))
