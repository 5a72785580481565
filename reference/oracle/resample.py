"""Antialiased bicubic resize, as torch's ``interpolate(bicubic, antialias=True)`` (semantics §3.3).

The oracle places the filter where torch does for float32 input (float32
scale, centres and tap offsets: see `aa_bicubic_weights`), evaluates the
kernel, its normalisation and both passes exactly in float64, then applies
upstream's ``round_()`` (half to even) and ``clamp_(0, 255)``. torch computes
weights and sums in float32, so the two can only disagree where the exact
value sits within float32 noise of a ``.5`` rounding tie;
`ResampleResult.tie_distance` says how close every element is, and
`classify_disagreement` accepts a disagreement only when it is one level and
within `TIE_EPSILON` (or a bound from `tie_epsilon`) of a tie. Measured on
7.4M elements of random downscales: 1.6e-5 of them differ, every one a tie,
and torch's largest error is 7% of the bound.

Known torch defect, *not* modelled: torch 2.13's CPU antialiased interpolate
with an output width of 1 and a changed height repeats the first output row
down the column (kimi-k3 meets it for 1- or 2-px-wide images taller than
7168 px); `classify_disagreement` flags those elements as unexplained.

Kernel (semantics §13.1): per axis, ``scale = in/out``;
``support = 2*scale`` for a downscale, else 2; Keys cubic with a = -0.5 on
``(j - center + 0.5) * min(1, 1/scale)`` with ``center = scale*(i + 0.5)``;
window ``[int(center - support + 0.5), int(center + support + 0.5))`` clipped
to the image, taps outside dropped and the rest renormalised to sum 1. torch
resizes the last axis (W) first, then H (the order its float32 error bound,
`tie_epsilon`, follows); an axis whose size is unchanged is skipped (its
weights would be the identity anyway).

The weights (`aa_bicubic_weights`, re-exported here) are computed in
`reference.oracle._bands`, beside the engine that is their only other user,
so the engine does not import this module. Evaluation there: float64 BLAS products over dense band
blocks of the filter, H pass first (exact separable passes commute; the
float64 results agree with the W-first order and with a direct 2-D
convolution to ~1e-13), streamed over groups of output rows so no
full-size float64 intermediate is made beyond ``exact`` itself.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from deferlab.reference.oracle._bands import COORDINATES, aa_bicubic_weights, resize_image
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.validate import check_float_image, check_positive_int

_U32 = 2.0**-24  # unit roundoff of float32
# Bound on |torch's float32 weight - ours| in units of u: a handful of float32
# operations for the kernel value, its running sum and the normalising division.
_WEIGHT_ROUNDINGS = 16
__all__ = [
    "COORDINATES",
    "ResampleResult",
    "aa_bicubic_weights",
    "classify_disagreement",
    "resize_bicubic_aa",
    "round_rows",
    "tie_epsilon",
]


class ResampleResult(NamedTuple):
    """The resize as upstream rounds it, plus what a comparison needs to judge a disagreement."""

    values: np.ndarray  # float32, integer-valued: round half to even, then clamp to [0, 255]
    exact: np.ndarray  # float64 value before rounding
    tie_distance: np.ndarray  # |frac(exact) - 0.5|; +inf where nothing was resized

    @property
    def uint8(self) -> np.ndarray:
        return self.values.astype(np.uint8)


def resize_bicubic_aa(x: np.ndarray, out_h: int, out_w: int, *, coordinates: str = "float32") -> ResampleResult:
    """Resize (C,H,W) or (B,C,H,W) ``x`` to ``(out_h, out_w)``: both separable passes, then round and clamp.

    Same size: no resize and no rounding (upstream returns the float cast), so
    ``values`` equal the input as float32 and ``tie_distance`` is +inf.
    ``coordinates`` is passed to `aa_bicubic_weights` (torch's float32 filter
    placement by default). Batch entries are independent.
    """
    if coordinates not in COORDINATES:
        raise InputValueError(f"coordinates must be one of {COORDINATES}, got {coordinates!r}")
    arr = check_float_image("x", x)
    out_h = check_positive_int("out_h", out_h)
    out_w = check_positive_int("out_w", out_w)
    if arr.shape[-2] == 0 or arr.shape[-1] == 0:
        raise InputValueError(f"x must have at least one pixel, got shape {arr.shape}")
    if arr.shape[-2:] == (out_h, out_w):
        exact = arr.astype(np.float64)
        return ResampleResult(arr.astype(np.float32), exact, np.full(exact.shape, np.inf))
    batch = arr.reshape((-1,) + arr.shape[-3:])
    shape = batch.shape[:2] + (out_h, out_w)
    exact = np.empty(shape, dtype=np.float64)
    values = np.empty(shape, dtype=np.float32)
    tie = np.empty(shape, dtype=np.float64)
    for b in range(batch.shape[0]):

        def finish(r0: int, r1: int, rows: np.ndarray, b: int = b) -> None:
            round_rows(rows, values[b, :, r0:r1], tie[b, :, r0:r1])

        resize_image(batch[b], out_h, out_w, coordinates, finish, dest=exact[b])
    out_shape = arr.shape[:-2] + (out_h, out_w)
    return ResampleResult(values.reshape(out_shape), exact.reshape(out_shape), tie.reshape(out_shape))


def round_rows(exact: np.ndarray, values: np.ndarray, tie: np.ndarray) -> None:
    """Upstream's rounding of exact resize values, into ``values`` (float32) and ``tie`` (float64), no temporaries.

    ``values = clip(rint(exact), 0, 255)`` (half to even) and
    ``tie = |exact - floor(exact) - 0.5|``, evaluated in that order (``tie``
    holds the rounded values for a moment).
    """
    np.rint(exact, out=tie)
    np.clip(tie, 0.0, 255.0, out=values)
    np.floor(exact, out=tie)
    np.subtract(exact, tie, out=tie)
    np.subtract(tie, 0.5, out=tie)
    np.abs(tie, out=tie)


def _pass_error(in_size: int, out_size: int, magnitude: float) -> tuple[float, float]:
    """(float32 error bound, bound on |output|) of one torch pass over inputs bounded by ``magnitude``."""
    if in_size == out_size:
        return 0.0, magnitude
    _, w = aa_bicubic_weights(in_size, out_size)
    n = w.shape[1]
    spread = float(np.abs(w).sum(axis=1).max())  # sum |w| >= 1 (negative lobes)
    gamma = n * _U32 / (1 - n * _U32)
    return (gamma * spread + n * _WEIGHT_ROUNDINGS * _U32) * magnitude, spread * magnitude


def tie_epsilon(in_h: int, out_h: int, in_w: int, out_w: int) -> float:
    """Worst-case |torch float32 result - `resize_bicubic_aa` exact| for one resize of values in [0, 255].

    Per pass of n taps: the standard bound for an n-term float32 dot product,
    ``gamma_n * sum |w x|`` with ``gamma_n = n u / (1 - n u)``, ``u = 2**-24``,
    plus torch's own float32 weights, each within ``16 u`` of ours (a few
    float32 roundings in the kernel and the normalisation; measured <= 12 u by
    ``tests/reference/test_resample.py``). The W-pass error is carried through
    the H pass, amplified by at most ``max sum |w|``.
    """
    err_w, mag = _pass_error(in_w, out_w, 255.0)
    err_h, _ = _pass_error(in_h, out_h, mag)
    spread_h = 1.0
    if in_h != out_h:
        spread_h = float(np.abs(aa_bicubic_weights(in_h, out_h)[1]).sum(axis=1).max())
    return err_h + spread_h * err_w


# Up to a 4x downscale per axis (17 taps per pass): covers every resize the
# kimi-k3 area limit causes under the default max_pixels (sqrt(178,956,970 /
# (65536 * 196)) ~ 3.7). Images so elongated that the one-side limit (7168 px)
# shrinks them further need their own bound: pass epsilon=tie_epsilon(...).
TIE_EPSILON: float = tie_epsilon(4096, 1024, 4096, 1024)


def classify_disagreement(ref: ResampleResult, other_values: np.ndarray, epsilon: float | None = None) -> np.ndarray:
    """Per element: True where ``other_values`` agrees with ``ref.values`` or differs by an explained tie.

    A difference is explained only when it is exactly one level and the exact
    value lies within ``epsilon`` (default `TIE_EPSILON`) of a ``.5`` tie; so
    ``~classify_disagreement(ref, other)`` marks the disagreements nothing
    explains (a bug in one of the two).
    """
    eps = TIE_EPSILON if epsilon is None else float(epsilon)
    other = np.asarray(other_values, dtype=np.float64)
    if other.shape != ref.values.shape:
        raise InputValueError(f"other_values must have shape {ref.values.shape}, got {other.shape}")
    diff = np.abs(other - ref.values.astype(np.float64))
    return (diff == 0) | ((diff == 1) & (ref.tie_distance <= eps))
