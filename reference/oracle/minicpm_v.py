"""MiniCPM-V 4.6's image geometry as transformers' ``MiniCPMV4_6ImageProcessorPil`` decides it: the trained side of
its C13 (semantics §18.9).

Why a restatement: C13 sweeps every size up to 4096 x 4096, where no Python loop over transformers could finish;
this is checked against transformers 5.24.0 run for real (``tests/reference/test_minicpm_v.py``), then stands in
for it. What the model is served for an image of ``w`` x ``h`` (S the slice resolution, 448; M the most slices, 9;
D the side divisor, patch x 4 for the ``16x`` downsampling: 56; ``snap(x, d) = max(round_half_even(x / d) * d, d)``):

1. The slice grid. ``n = min(ceil(w * h / S**2), M)``; ``n <= 1``: no slicing. Else, over the slice counts
   ``n - 1, n, n + 1`` (not 1, not over M) and every ``rows`` dividing the count (``cols`` the quotient), the
   smallest ``|log(w / h) - log(cols / rows)|`` wins; of equal errors the one with the most rows.
2. The source image (always resized, slicing or not: with no slicing its area is at most S**2 and it is scaled up):
   ``a = w / h``, ``h' = int(S / sqrt(a))``, ``w' = int(h' * a)``, then ``snap(w', D)`` x ``snap(h', D)``.
3. The refined image (sliced only): ``rw = snap(w, cols)``, ``rh = snap(h, rows)``; one slice is step 2's size of
   ``rw / cols`` x ``rh / rows``; the refined image is ``rows`` x ``cols`` of them, cut row-major.
4. Tokens: each piece (source, then every slice) of ``ph`` x ``pw`` pixels gets ``(ph / p) * (pw / p) / 16``.

Normalization (C15) is `reference.oracle.family_norm`'s (§18.1's arithmetic); the pixels are not restated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from deferlab.reference.oracle import qwen
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.validate import check_positive_int

__all__ = ["MiniCPMVGeometry", "geometry", "targets"]

_MAX_SIDE = 1 << 20
_FIELDS = ("max_slice_nums", "scale_resolution", "patch_size", "merge")
_NEAR = 1e-9  # errors this close are decided again by the scalar rule (math.log, as the processor computes them)


@dataclass(frozen=True)
class MiniCPMVGeometry:
    """What the geometry reads (the published MiniCPM-V 4.6 values: 9 slices, 448, patch 14; ``merge`` 4 for the
    ``16x`` downsampling, 2 for ``4x``)."""

    max_slice_nums: int = 9
    scale_resolution: int = 448
    patch_size: int = 14
    merge: int = 4

    @property
    def divisor(self) -> int:
        return self.patch_size * self.merge


def _geo(geo: Any) -> MiniCPMVGeometry:
    """``geo`` itself, or a family config declaring kind ``minicpmv`` and the same fields."""
    if isinstance(geo, MiniCPMVGeometry):
        return geo
    if getattr(geo, "kind", None) == "minicpmv" and all(hasattr(geo, k) for k in _FIELDS):
        return MiniCPMVGeometry(**{k: getattr(geo, k) for k in _FIELDS})
    raise InputTypeError(f"geo must be a MiniCPMVGeometry or a MiniCPMVConfig, got {type(geo).__name__}")


def _snap(x: Any, d: Any) -> Any:
    return np.maximum(np.rint(x / d) * d, d)


def _best(h: np.ndarray, w: np.ndarray, scale: int, divisor: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 2 over float64 arrays: the resized (height, width), scaled to about ``scale**2`` pixels."""
    a = w / h
    new_h = np.trunc(scale / np.sqrt(a))
    return _snap(new_h, divisor), _snap(np.trunc(new_h * a), divisor)


def _grid_scalar(h: int, w: int, geo: MiniCPMVGeometry) -> tuple[int, int]:
    """Step 1 for one size, in Python floats: (rows, cols), (0, 0) when not sliced."""
    log_ratio = math.log(w / h)
    n = min(math.ceil(w * h / geo.scale_resolution**2), geo.max_slice_nums)
    best, least = (0, 0), math.inf
    for count in range(max(n - 1, 2), min(n + 1, geo.max_slice_nums) + 1) if n > 1 else ():
        for rows in (r for r in range(1, count + 1) if count % r == 0):
            error = abs(log_ratio - math.log((count // rows) / rows))
            if error < least or (error == least and rows > best[0]):
                best, least = (rows, count // rows), error
    return best


def _candidates(n: int, geo: MiniCPMVGeometry) -> list[tuple[int, int]]:
    """(rows, cols) of the slice counts n-1..n+1 (not 1, at most the cap), the most rows first (then the fewest
    slices): so the first of equal errors is the one the rule keeps."""
    found = [
        (r, count // r)
        for count in range(max(n - 1, 2), min(n + 1, geo.max_slice_nums) + 1)
        for r in range(1, count + 1)
        if count % r == 0
    ]
    return sorted(found, key=lambda rc: -rc[0])  # stable: of equal rows, the fewer slices first


def _grids(h: np.ndarray, w: np.ndarray, geo: MiniCPMVGeometry) -> tuple[np.ndarray, np.ndarray]:
    """Step 1 vectorized, the sizes grouped by n: the least error of n's candidates (the most rows of equal
    ones); sizes whose two best errors are within `_NEAR` are decided again by `_grid_scalar`."""
    log_ratio = np.log(w / h).ravel()
    n = np.minimum(np.ceil(w * h / float(geo.scale_resolution**2)), geo.max_slice_nums).ravel()
    rows, cols = np.zeros(n.shape), np.zeros(n.shape)
    near: list[np.ndarray] = []
    for count in range(2, geo.max_slice_nums + 1):
        idx = np.flatnonzero(n == count)
        if not idx.size:
            continue
        pairs = _candidates(count, geo)
        logs = np.array([math.log(c / r) for r, c in pairs])
        error = np.abs(log_ratio[idx, None] - logs[None, :])
        k = error.argmin(axis=1)
        at = np.arange(idx.size)
        least = error[at, k]
        error[at, k] = np.inf
        second = error.min(axis=1)
        near.append(idx[np.abs(second - least) <= _NEAR * np.maximum(1.0, least)])
        rows[idx], cols[idx] = np.array(pairs)[k].T
    for i in np.concatenate(near) if near else ():
        rows[i], cols[i] = _grid_scalar(int(h.flat[i]), int(w.flat[i]), geo)
    return rows.reshape(h.shape), cols.reshape(h.shape)


def targets(heights: Any, widths: Any, geo: Any) -> tuple[np.ndarray, ...]:
    """(source h, source w, rows, cols, slice h, slice w) over broadcast integer arrays (sides 1..2**20), int64;
    rows, cols and the slice 0 where the image is not sliced (the module docstring's steps, in float64)."""
    geo = _geo(geo)
    h, w = qwen.sides(heights, widths, _MAX_SIDE, np.float64)
    src_h, src_w = _best(h, w, geo.scale_resolution, geo.divisor)
    rows, cols = _grids(h, w, geo)
    sliced = rows > 0
    safe_r, safe_c = np.where(sliced, rows, 1), np.where(sliced, cols, 1)
    piece_h, piece_w = _best(_snap(h, safe_r) / safe_r, _snap(w, safe_c) / safe_c, geo.scale_resolution, geo.divisor)
    out = (src_h, src_w, rows, cols, np.where(sliced, piece_h, 0), np.where(sliced, piece_w, 0))
    return tuple(np.asarray(v).astype(np.int64) for v in out)


def geometry(height: int, width: int, geo: Any) -> tuple[tuple[int, int], tuple[int, int, int, int], int]:
    """((source h, source w), (rows, cols, slice h, slice w), tokens) of one size (no size is refused)."""
    height, width, geo = check_positive_int("height", height), check_positive_int("width", width), _geo(geo)
    sh, sw, r, c, ph, pw = (int(v[()]) for v in targets(np.int64(height), np.int64(width), geo))
    p, per = geo.patch_size, geo.merge**2
    tokens = (sh // p) * (sw // p) // per + r * c * ((ph // p) * (pw // p) // per)
    return (sh, sw), (r, c, ph, pw), tokens
