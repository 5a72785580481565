"""deferlab's own restatement of LMDeploy's InternVL tile rule (semantics §19.3), pure Python and NumPy.

Written from the semantics, not from LMDeploy's code: for an image of ``w x h`` and bounds ``min_num..max_num``,
the candidate grids are every ``(cols, rows)`` with ``min_num <= cols*rows <= max_num``, visited in increasing
``cols*rows`` and, within one count, in the order CPython iterates the set LMDeploy builds (`candidates`). The
distance of a candidate is ``|w/h - cols/rows|`` in float64; a smaller distance takes over, and an equal one
takes over only when ``w*h > 0.5 * s * s * cols * rows``. The thumbnail adds one tile when ``use_thumbnail``
and the grid has more than one tile; the prompt gets ``tokens_per_tile`` tokens a tile.

`tiles_array` sweeps many sizes at once (the C13 exhaustive geometry); `tiles` is one size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Rule", "candidates", "tiles", "tiles_array"]


@dataclass(frozen=True)
class Rule:
    """The values LMDeploy's server passes its tiling (semantics §19.2 step 3): bounds and thumbnail from the
    checkpoint config (``max_num`` from a request's ``detail`` / ``max_dynamic_patch`` when it sends one), tile
    size ``vision_config.image_size``, tokens a tile from ``force_image_size``, ``patch_size``,
    ``downsample_ratio``."""

    min_num: int = 1
    max_num: int = 12
    image_size: int = 448
    use_thumbnail: bool = True
    tokens_per_tile: int = 256

    def __post_init__(self) -> None:
        for name in ("min_num", "max_num", "image_size", "tokens_per_tile"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.min_num > self.max_num:
            raise ValueError(f"min_num must be <= max_num, got {self.min_num} > {self.max_num}")


def candidates(min_num: int, max_num: int) -> list[tuple[int, int]]:
    """The grids in visiting order. Python's sort is stable, so the order within one tile count is the set's
    iteration order; the set is rebuilt here with the same elements inserted in the same order, which CPython
    iterates identically (small-int tuples hash the same in every process)."""
    pool = {
        (c, r)
        for n in range(min_num, max_num + 1)
        for c in range(1, n + 1)
        for r in range(1, n + 1)
        if min_num <= c * r <= max_num
    }
    return sorted(pool, key=lambda g: g[0] * g[1])


def tiles(width: int, height: int, rule: Rule) -> tuple[int, int, int]:
    """(cols, rows, tiles with the thumbnail) for one ``width x height`` image."""
    cols, rows, n = tiles_array(np.array([width]), np.array([height]), rule)
    return int(cols[0]), int(rows[0]), int(n[0])


def tiles_array(widths: np.ndarray, heights: np.ndarray, rule: Rule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cols, rows, tiles) int32 over broadcast positive integer arrays, candidate by candidate."""
    w, h = np.broadcast_arrays(np.asarray(widths, dtype=np.int64), np.asarray(heights, dtype=np.int64))
    if w.size and (w.min() < 1 or h.min() < 1):
        raise ValueError("sizes must be positive")
    ratio = w.astype(np.float64) / h
    area = (w * h).astype(np.float64)
    best = np.full(ratio.shape, np.inf)
    cols = np.ones(ratio.shape, dtype=np.int32)
    rows = np.ones(ratio.shape, dtype=np.int32)
    half_tile = 0.5 * rule.image_size * rule.image_size
    for c, r in candidates(rule.min_num, rule.max_num):
        d = np.abs(ratio - c / r)
        take = (d < best) | ((d == best) & (area > half_tile * c * r))
        best = np.minimum(best, d)
        cols = np.where(take, c, cols)
        rows = np.where(take, r, rows)
    n = cols * rows
    if rule.use_thumbnail:
        n = n + (n > 1)
    return cols, rows, n
