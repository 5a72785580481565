"""Served vs trained, element by element: levels before normalization and ulps after (semantics §16.5).

Why a decomposition: an engine exposes only normalized float32 values, but its
two possible faults live in different steps (the resize and composite change
uint8 levels; the normalization changes float32 bits). Each served value is
mapped back to a level through the served path's own per-channel table of
256 values (read off the path by serving `level_probe`), and then compared
twice: its level with the checkpoint's level, and its value with the
checkpoint's normalization of that same level. Pure NumPy over arrays any
path returns; nothing here knows an engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from deferlab.reference.system.errors import InputValueError

PROBE_SIDE = 16  # a 16 x 16 image holds each of the 256 levels once per channel


def level_probe() -> np.ndarray:
    """uint8 (16, 16, 3): pixel (y, x) holds level 16*y + x in every channel (every level once)."""
    levels = np.arange(256, dtype=np.uint8).reshape(PROBE_SIDE, PROBE_SIDE)
    return np.repeat(levels[:, :, None], 3, axis=2)


def unpatchify(patches: np.ndarray, grid: Any, patch: int) -> np.ndarray:
    """One image's patches (gh*gw, 3, p, p) in row-major grid order back to (3, gh*p, gw*p)."""
    _, gh, gw = (int(v) for v in np.asarray(grid).reshape(3))
    arr = np.asarray(patches)
    if arr.shape != (gh * gw, 3, patch, patch):
        raise InputValueError(f"patches of shape {arr.shape} do not match grid {gh}x{gw} with patch size {patch}")
    return arr.reshape(gh, gw, 3, patch, patch).transpose(2, 0, 3, 1, 4).reshape(3, gh * patch, gw * patch)


def split_images(pixel_values: np.ndarray, grids: np.ndarray, patch: int) -> list[np.ndarray]:
    """A request's concatenated patches as one (3, H, W) array per image, in order."""
    out, start = [], 0
    for row in np.asarray(grids).reshape(-1, 3):
        n = int(row[0] * row[1] * row[2])
        out.append(unpatchify(np.asarray(pixel_values)[start : start + n], row, patch))
        start += n
    if start != len(pixel_values):
        raise InputValueError(f"{len(pixel_values)} patches but the grids account for {start}")
    return out


def table_from_probe(served_probe: np.ndarray) -> np.ndarray:
    """float32 (3, 256): the path's value for each level, read off its (3, H, W) output for `level_probe`."""
    region = np.asarray(served_probe, dtype=np.float32)[:, :PROBE_SIDE, :PROBE_SIDE]
    return region.reshape(3, 256)


def recover_levels(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """uint8 (3, H, W): per element, the level whose table value is nearest (ties: the lower level).

    Exact when the path's normalization error is under half the gap between neighbouring levels' values.
    The level is a function of the value alone (`nearest_level`); two shortcuts give that function's answer
    without its per-element arithmetic, because C14 recovers millions of values per example (InternVL's 13
    tiles of 448 x 448: 7.8 million): a value that is a table entry is that entry's level, and values that are
    all bfloat16 (widened to float32: the low 16 bits zero) take at most 65,536 distinct values, each computed
    once; a channel with any value that is not an entry takes the definition's arithmetic everywhere.
    `tests/reference/test_skew.py` checks both against `nearest_level` element by element.
    """
    raw = np.asarray(values)
    v = np.asarray(raw, dtype=np.float64)
    t = np.asarray(table, dtype=np.float64)
    out = np.empty(v.shape, dtype=np.uint8)
    for c in range(3):
        order = np.argsort(t[c], kind="stable")
        st = t[c][order]
        keys = _bfloat16_keys(raw[c])
        if keys is not None:
            present = np.flatnonzero(np.bincount(keys.ravel(), minlength=1 << 16))
            widened = (present.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            lut = np.zeros(1 << 16, dtype=np.uint8)
            lut[present] = nearest_level(widened, st, order)
            out[c] = lut[keys]
            continue
        idx = np.searchsorted(st, v[c])
        safe = np.minimum(idx, 255)
        hit = st[safe] == v[c]  # a table entry: searchsorted's left index is its lowest level (ties: the lower)
        out[c] = order[safe] if hit.all() else nearest_level(v[c], st, order, idx)
    return out


def nearest_level(x: np.ndarray, st: np.ndarray, order: np.ndarray, found: np.ndarray | None = None) -> np.ndarray:
    """The definition: the level (``order`` of the sorted table ``st``) nearest ``x`` (float64), ties to the lower
    neighbour in ``st``; a value past either end takes the end's level. ``found``: ``searchsorted(st, x)``."""
    idx = np.clip(np.searchsorted(st, x) if found is None else found, 1, 255)
    lower, upper = st[idx - 1], st[idx]
    return order[np.where(np.abs(x - lower) <= np.abs(upper - x), idx - 1, idx)]


def _bfloat16_keys(x: np.ndarray) -> np.ndarray | None:
    """float32 values whose low 16 bits are all zero (bfloat16 widened) as their 16-bit keys; None otherwise."""
    if x.dtype != np.float32 or x.size < 1 << 16:  # small arrays: the direct path is as fast
        return None
    bits = np.ascontiguousarray(x).view(np.uint32)
    if (bits & 0xFFFF).any():
        return None
    return bits >> 16


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int64: how many float32 values lie between ``a`` and ``b`` (0 iff bitwise equal; -0 and +0 are 1 apart)."""

    def ordered(x: np.ndarray) -> np.ndarray:
        i = np.asarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF) - 1, i)

    return np.abs(ordered(a) - ordered(b))


@dataclass(frozen=True)
class Skew:
    """One image served vs trained: the counts the skew table shows."""

    grids_equal: bool
    elements: int
    bitwise_equal: int
    max_levels: int
    max_ulps: int

    @property
    def bitwise_share(self) -> float:
        return self.bitwise_equal / self.elements if self.elements else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bitwise_share": self.bitwise_share}


def compare_image(
    served: np.ndarray, trained: np.ndarray, served_table: np.ndarray, trained_table: np.ndarray
) -> tuple[Skew, np.ndarray]:
    """(counts, |level difference| as (3, H, W)) for one image's (3, H, W) served and checkpoint values.

    Only the overlapping region is compared when the shapes differ (the grids then already disagree).
    """
    s, t = np.asarray(served, dtype=np.float32), np.asarray(trained, dtype=np.float32)
    h, w = min(s.shape[1], t.shape[1]), min(s.shape[2], t.shape[2])
    s, t = s[:, :h, :w], t[:, :h, :w]
    ls, lt = recover_levels(s, served_table), recover_levels(t, trained_table)
    dl = np.abs(ls.astype(np.int16) - lt.astype(np.int16))
    renorm = np.take_along_axis(np.asarray(trained_table, np.float32), ls.reshape(3, -1).astype(np.int64), axis=1)
    du = ulp_distance(s, renorm.reshape(s.shape))
    skew = Skew(
        grids_equal=served.shape == trained.shape,
        elements=int(s.size),
        bitwise_equal=int((s.view(np.uint32) == t.view(np.uint32)).sum()),
        max_levels=int(dl.max()) if dl.size else 0,
        max_ulps=int(du.max()) if du.size else 0,
    )
    return skew, dl
