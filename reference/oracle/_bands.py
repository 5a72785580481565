"""Evaluation engine of the separable resize (private to `reference.oracle.resample` and `reference.oracle.pipeline`).

It also holds the filter it evaluates (`aa_bicubic_weights`, the kernel
`reference.oracle.resample` documents and re-exports), so the engine, the
lower module, imports nothing of resample's: no import cycle.

Each pass multiplies by the banded filter matrix one *band block* at a time:
``block`` consecutive outputs, whose windows cover one contiguous input
span, form a small dense ``(outputs x span)`` matrix, so a pass is a few
hundred float64 BLAS products instead of a gather per tap. Every output is a
float64 dot product of the exact (float64) weights with the input, so the
result is the real-number resize up to float64 rounding (~1e-13 of a level)
whatever the blocking.

Layout decides the speed. A pass over rows (H) is ``M_block @ X[i0:i1, :]``:
the wide operand is read row by row and the result lands in whole output
rows. A pass over columns (W) is ``X[:, i0:i1] @ M_block.T``, on a strided
column slab, at about half the speed. So the image is resized H first, then
W: the slower column pass then runs on rows already reduced in number
(separable passes commute exactly; the float64 difference is a few ulps).

Memory is streamed: output rows are produced group by group, each group
reading only the input rows its windows need, converted to float64 on the fly
into a buffer of a few MB; a *sink* receives every finished ``(C, rows,
out_w)`` float64 group and turns it into what its caller keeps (rounded
values and tie distances, or pipeline levels). Every product is sized to stay
below OpenBLAS's threading threshold, so none wakes the BLAS thread pool
(waking it costs more than these products take). Nothing depends on anything
but the image's own shape, so a batch entry gets exactly the calls it would
get alone (bitwise batch == per image).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.validate import check_positive_int

ROW_BLOCK = 4  # outputs per band block of the row (H) pass: (4 x span) @ (span x width) wastes little
COL_BLOCK = 16  # outputs per band block of the column (W) pass: wider blocks amortize the strided slab
_GROUP_ROWS = 192  # output rows per group handed to the column pass and the sink
_INPUT_BYTES = 2 << 20  # float64 bytes of input rows converted at once for the row pass
_MAX_MNK = 4 * 65536  # OpenBLAS runs a product with M*N*K at most this on the calling thread only

A = -0.5  # PIL's / torch-antialias's Keys parameter

Block = tuple[int, int, int, int, np.ndarray]  # (o0, o1, i0, i1, m (o1-o0, i1-i0) float64, read-only)
Sink = Callable[[int, int, np.ndarray], None]


def _keys_cubic(d: np.ndarray) -> np.ndarray:
    x = np.abs(d)
    near = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    far = ((x - 5.0) * x + 8.0) * x * A - 4.0 * A
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


@lru_cache(maxsize=256)
def _weights(in_size: int, out_size: int, coordinates: str) -> tuple[np.ndarray, np.ndarray]:
    f32, f64 = np.float32, np.float64
    if coordinates == "float32":
        # torch (float input): scale = float(in)/float(out); centre rounded to float32.
        scale = f64(f32(in_size) / f32(out_size))
    else:
        scale = in_size / out_size
    support = 2.0 * scale if scale >= 1.0 else 2.0  # exact in float32 too (a doubling)
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    taps = 2 * math.ceil(support) + 1
    j = np.arange(taps, dtype=np.int64)
    center = scale * (np.arange(out_size, dtype=np.float64) + 0.5)
    if coordinates == "float32":
        invscale = f64(f32(invscale))
        center = center.astype(f32)
        sup = f32(support)
        lo = (center - sup).astype(f64)
        hi = (center + sup).astype(f64)
        # (j + xmin) - centre in float32, then (d + 0.5) * invscale rounded to float32.
        xmin = np.maximum(np.trunc(lo + 0.5), 0).astype(np.int64)
        d = (j[None, :] + xmin[:, None]).astype(f32) - center[:, None]
        arg = ((d.astype(f64) + 0.5) * invscale).astype(f32).astype(f64)
    else:
        lo, hi = center - support, center + support
        # C-style int(): truncation toward zero, then the clip to the image.
        xmin = np.maximum(np.trunc(lo + 0.5), 0).astype(np.int64)
        arg = (j[None, :] + xmin[:, None] - center[:, None] + 0.5) * invscale
    xend = np.minimum(np.trunc(hi + 0.5).astype(np.int64), in_size)
    xsize = np.clip(xend - xmin, 0, taps)
    w = np.where(j[None, :] < xsize[:, None], _keys_cubic(arg), 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = np.divide(w, total, out=w, where=total != 0)
    xmin.setflags(write=False)
    w.setflags(write=False)
    return xmin, w


COORDINATES = ("float32", "exact")


def aa_bicubic_weights(in_size: int, out_size: int, *, coordinates: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """(xmin int64 (out,), weights float64 (out, taps)) of torch's antialiased bicubic; cached, read-only.

    Output pixel ``i`` is ``sum_j weights[i, j] * x[xmin[i] + j]``; unused taps
    carry weight 0 (their index may run past the image and must be clipped).

    ``coordinates="float32"`` (default) places the filter where torch does for
    float32 input: ``scale = float32(in) / float32(out)``, the centre and each
    tap offset rounded to float32. At 4k widths that shifts the filter by up
    to ~1e-4 px and results by up to ~0.03 levels, far more than accumulation
    noise, so the oracle must model it. Kernel values and the normalisation
    stay exact (float64). ``"exact"`` is the ideal real-number filter.
    """
    if coordinates not in COORDINATES:
        raise InputValueError(f"coordinates must be one of {COORDINATES}, got {coordinates!r}")
    return _weights(check_positive_int("in_size", in_size), check_positive_int("out_size", out_size), coordinates)


@lru_cache(maxsize=256)
def band_blocks(in_size: int, out_size: int, coordinates: str, block: int) -> tuple[Block, ...]:
    """The filter of `aa_bicubic_weights` as dense band blocks of ``block`` outputs (cached, read-only).

    Block ``(o0, o1, i0, i1, m)``: outputs ``o0:o1`` are ``m @ x[i0:i1]``.
    The span runs from the first to the last *nonzero* tap of its outputs
    (a zero weight adds nothing to a float64 sum, so leaving it out changes
    no value).
    """
    xmin, w = aa_bicubic_weights(in_size, out_size, coordinates=coordinates)
    taps = w.shape[1]
    nz = w != 0
    has = nz.any(axis=1)
    lo = xmin + np.where(has, np.argmax(nz, axis=1), 0)
    hi = np.minimum(xmin + np.where(has, taps - np.argmax(nz[:, ::-1], axis=1), 0), in_size)
    rows, cols = np.nonzero(nz)  # row-major: rows ascending
    blocks = []
    for o0 in range(0, out_size, block):
        o1 = min(o0 + block, out_size)
        i0 = int(lo[o0:o1].min())
        i1 = max(int(hi[o0:o1].max()), i0 + 1)
        m = np.zeros((o1 - o0, i1 - i0), dtype=np.float64)
        a, b = np.searchsorted(rows, (o0, o1))
        r, j = rows[a:b], cols[a:b]
        m[r - o0, xmin[r] + j - i0] = w[r, j]
        m.setflags(write=False)
        blocks.append((o0, o1, i0, i1, m))
    return tuple(blocks)


class _Step(NamedTuple):
    """Row-pass work for part of a group: blocks ``k0:k1`` read input rows ``s0:s1``."""

    k0: int
    k1: int
    s0: int
    s1: int


class _Plan(NamedTuple):
    """How one image shape is resized: row groups, the row-pass steps of each, the tile sizes."""

    groups: tuple[tuple[int, int, tuple[_Step, ...]], ...]  # (r0, r1, steps); steps empty when H is unchanged
    h_blocks: tuple[Block, ...]
    w_blocks: tuple[Block, ...]
    row_tile: int  # columns per row-pass product
    col_tile: int  # rows per column-pass product
    most_rows: int  # rows in the largest group
    most_input: int  # input rows of the largest row-pass step


def _tile(size: int, per_unit: int) -> int:
    """Units per product so that ``units * per_unit <= _MAX_MNK`` (at least 16, at most ``size``)."""
    return max(1, min(size, max(16, _MAX_MNK // max(per_unit, 1))))


@lru_cache(maxsize=256)
def _plan(in_h: int, in_w: int, out_h: int, out_w: int, coordinates: str) -> _Plan:
    h_blocks = band_blocks(in_h, out_h, coordinates, ROW_BLOCK) if in_h != out_h else ()
    w_blocks = band_blocks(in_w, out_w, coordinates, COL_BLOCK) if in_w != out_w else ()
    groups = []
    if not h_blocks:
        groups = [(r0, min(r0 + _GROUP_ROWS, in_h), ()) for r0 in range(0, in_h, _GROUP_ROWS)]
    else:
        input_rows = max(ROW_BLOCK, _INPUT_BYTES // (8 * in_w))
        per_group = _GROUP_ROWS if w_blocks else input_rows
        start = 0
        while start < len(h_blocks):
            end = _run(h_blocks, start, per_group)
            steps, k = [], start
            while k < end:
                k1 = min(_run(h_blocks, k, input_rows), end)
                sub = h_blocks[k:k1]
                steps.append(_Step(k, k1, min(b[2] for b in sub), max(b[3] for b in sub)))
                k = k1
            groups.append((h_blocks[start][0], h_blocks[end - 1][1], tuple(steps)))
            start = end
    row_k = max((b[1] - b[0]) * (b[3] - b[2]) for b in h_blocks) if h_blocks else 1
    col_k = max((b[1] - b[0]) * (b[3] - b[2]) for b in w_blocks) if w_blocks else 1
    return _Plan(
        groups=tuple(groups),
        h_blocks=h_blocks,
        w_blocks=w_blocks,
        row_tile=_tile(in_w, row_k),
        col_tile=_tile(_GROUP_ROWS, col_k),
        most_rows=max(r1 - r0 for r0, r1, _ in groups),
        most_input=max((s.s1 - s.s0 for *_, steps in groups for s in steps), default=0),
    )


def _run(blocks: tuple[Block, ...], start: int, rows: int) -> int:
    """End index of the run of blocks from ``start`` covering at least ``rows`` outputs (or all that remain)."""
    count, k = 0, start
    while k < len(blocks) and count < rows:
        count += blocks[k][1] - blocks[k][0]
        k += 1
    return k


def _row_pass(src: np.ndarray, s0: int, blocks: tuple[Block, ...], dst: np.ndarray, r0: int, tile: int) -> None:
    """``dst[o - r0] = sum_i W[o, i] src[i - s0]`` for the blocks' outputs, ``tile`` columns per product."""
    width = src.shape[1]
    for t0 in range(0, width, tile):
        t1 = min(t0 + tile, width)
        for o0, o1, i0, i1, m in blocks:
            np.matmul(m, src[i0 - s0 : i1 - s0, t0:t1], out=dst[o0 - r0 : o1 - r0, t0:t1])


def _col_pass(src: np.ndarray, blocks: tuple[Block, ...], dst: np.ndarray, tile: int) -> None:
    """``dst[r, o] = sum_i src[r, i] W[o, i]`` (contraction over the last axis), ``tile`` rows per product."""
    rows = src.shape[0]
    for t0 in range(0, rows, tile):
        t1 = min(t0 + tile, rows)
        for o0, o1, i0, i1, m in blocks:
            np.matmul(src[t0:t1, i0:i1], m.T, out=dst[t0:t1, o0:o1])


def resize_image(
    x: np.ndarray, out_h: int, out_w: int, coordinates: str, sink: Sink, dest: np.ndarray | None = None
) -> None:
    """Resize the planes of one (C, H, W) image, group of output rows by group, calling ``sink(r0, r1, rows)``.

    At least one axis must change size (an unchanged axis is skipped: its
    weights are the identity). ``rows`` is a (C, r1-r0, out_w) float64
    array: a view of ``dest`` (C, out_h, out_w) when given (the groups fill
    it in order), else a scratch buffer that the next group overwrites.
    """
    c, in_h, in_w = x.shape
    if (in_h, in_w) == (out_h, out_w):
        raise ValueError("resize_image needs at least one axis to resize")
    plan = _plan(in_h, in_w, out_h, out_w, coordinates)
    convert = x.dtype != np.float64
    scratch = np.empty((c, plan.most_rows, out_w), dtype=np.float64) if dest is None else None
    both = bool(plan.h_blocks) and bool(plan.w_blocks)
    ubuf = np.empty((plan.most_rows, in_w), dtype=np.float64) if both else None
    if convert:
        xbuf = np.empty((plan.most_input if plan.h_blocks else plan.most_rows, in_w), dtype=np.float64)

    def as_f64(plane: np.ndarray, i0: int, i1: int) -> np.ndarray:
        if not convert:
            return plane[i0:i1]
        out = xbuf[: i1 - i0]
        np.copyto(out, plane[i0:i1], casting="unsafe")
        return out

    for r0, r1, steps in plan.groups:
        rows = dest[:, r0:r1] if dest is not None else scratch[:, : r1 - r0]
        for ch in range(c):
            if not plan.h_blocks:  # W only
                _col_pass(as_f64(x[ch], r0, r1), plan.w_blocks, rows[ch], plan.col_tile)
                continue
            u = ubuf[: r1 - r0] if both else rows[ch]
            for k0, k1, s0, s1 in steps:
                _row_pass(as_f64(x[ch], s0, s1), s0, plan.h_blocks[k0:k1], u, r0, plan.row_tile)
            if both:
                _col_pass(u, plan.w_blocks, rows[ch], plan.col_tile)
        sink(r0, r1, rows)
