"""The skew table: per served path and image class, how far what the engine serves is from what the model was
trained on (semantics §16.3, §16.5).

Why a table beside the claims: C14 says pass or fail with one counterexample;
the table says how much and where, for every path of the run side by side
(grid agreement, share of bitwise-equal values, max uint8 levels before
normalization, max float32 ulps after). Each image is served alone, so one
refused image cannot hide the others; a path that raises on a class gets the
cell ``refused: <one line>`` and never stops the step. The worst image per
cell (largest level difference) is kept, as arrays, for the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle import skew
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reports.report.served.images import CLASSES, Sample


def one_line(error: BaseException) -> str:
    """An exception as one line (its type and first line), at most 200 characters."""
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text}"[:200]


@dataclass
class Worst:
    """A cell's worst image: its values (3, H, W) on both sides and their tables; levels read back on demand."""

    origin: str
    trained_values: np.ndarray
    served_values: np.ndarray
    trained_table: np.ndarray
    served_table: np.ndarray
    diff_levels: np.ndarray  # (3, H, W)
    max_levels: int
    crop: tuple[int, int, int, int] | None = None  # (x0, y0, x1, y1) of the compared image the arrays hold
    full: tuple[int, int] | None = None  # (width, height) of the compared image, when cropped

    @property
    def trained(self) -> np.ndarray:
        """The checkpoint's uint8 levels (H, W, 3)."""
        return skew.recover_levels(self.trained_values, self.trained_table).transpose(1, 2, 0)

    @property
    def served(self) -> np.ndarray:
        """The served uint8 levels (H, W, 3), read back through the path's own table."""
        return skew.recover_levels(self.served_values, self.served_table).transpose(1, 2, 0)

    @property
    def diff(self) -> np.ndarray:
        """Max |level difference| over the channels (H, W)."""
        return self.diff_levels.max(axis=0).astype(np.uint8)

    def cropped(self) -> Worst:
        """This image cut to where it differs (`crop_box`); itself when cut already. The arrays of a long thin
        image shrink from the whole image to at most `CROP_LIMIT` pixels a side."""
        if self.crop is not None:
            return self
        x0, y0, x1, y1 = crop_box(self.diff)
        cut = (slice(None), slice(y0, y1), slice(x0, x1))
        h, w = self.diff_levels.shape[1:]
        return Worst(
            self.origin,
            self.trained_values[cut],
            self.served_values[cut],
            self.trained_table,
            self.served_table,
            self.diff_levels[cut],
            self.max_levels,
            (x0, y0, x1, y1),
            (w, h),
        )

    def crop_text(self) -> str:
        """The crop in words, for a caption: ``x 1203-1239, y 0-9 of 7400x9``."""
        if self.crop is None or self.full is None:
            return "uncropped"
        x0, y0, x1, y1 = self.crop
        return f"x {x0}-{x1}, y {y0}-{y1} of {self.full[0]}x{self.full[1]}"


CROP_MARGIN = 4  # pixels kept around the differing ones
CROP_LIMIT = 64  # at most this many pixels a side
CROP_RATIO = 4  # and the longer side at most this many times the shorter, where the image allows


def _window(lo: int, hi: int, size: int, centre: int, bound: int) -> tuple[int, int]:
    """A ``size``-long span inside ``lo..hi`` (itself inside ``0..bound``) around ``centre``."""
    size = min(size, bound)
    start = min(max(centre - size // 2, lo), max(lo, hi - size))
    start = min(max(0, start), bound - size)
    return start, start + size


def crop_box(diff: np.ndarray) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1): the bounding box of the pixels that differ, plus `CROP_MARGIN`, cut to at most
    `CROP_LIMIT` a side and `CROP_RATIO`:1 around the largest difference (the whole image when none differs)."""
    h, w = diff.shape
    ys, xs = np.nonzero(diff)
    if ys.size == 0:
        return 0, 0, w, h
    y0, y1 = max(0, int(ys.min()) - CROP_MARGIN), min(h, int(ys.max()) + 1 + CROP_MARGIN)
    x0, x1 = max(0, int(xs.min()) - CROP_MARGIN), min(w, int(xs.max()) + 1 + CROP_MARGIN)
    bh, bw = min(y1 - y0, CROP_LIMIT), min(x1 - x0, CROP_LIMIT)
    bw, bh = min(bw, max(CROP_RATIO * bh, bh)), min(bh, max(CROP_RATIO * bw, bw))
    cy, cx = (int(v) for v in np.unravel_index(int(np.argmax(diff)), diff.shape))
    ya, yb = _window(y0, y1, bh, cy, h)
    xa, xb = _window(x0, x1, bw, cx, w)
    return xa, ya, xb, yb


@dataclass
class Cell:
    """One (path, class) cell: counts over the class's images, and the worst one."""

    images: int = 0
    served: int = 0  # images the path served and the checkpoint accepted
    refused: int = 0
    refusal: str | None = None  # the first refusal's one line
    checkpoint_refused: int = 0
    grids_equal: int = 0
    elements: int = 0
    bitwise_equal: int = 0
    max_levels: int = 0
    max_ulps: int = 0
    worst: Worst | None = field(default=None, repr=False)

    @property
    def status(self) -> str:
        if self.served:
            return "ok"
        return "refused" if self.refused else "no-input"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (report.json's ``served.cells[]``), without the worst image's arrays."""
        ok = self.served > 0
        return {
            "status": self.status,
            "images": self.images,
            "served": self.served,
            "refused": self.refused,
            "refusal": self.refusal,
            "checkpoint_refused": self.checkpoint_refused,
            "grid_agreement": self.grids_equal / self.served if ok else None,
            "bitwise_share": self.bitwise_equal / self.elements if ok and self.elements else None,
            "max_levels": self.max_levels if ok else None,
            "max_ulps": self.max_ulps if ok else None,
            "worst": self.worst.origin if self.worst is not None else None,
        }


def _probe_image() -> Image.Image:
    return Image.fromarray(skew.level_probe(), "RGB")


def grid_row(grids: Any) -> np.ndarray:
    """The first image's grid row (3,) of a path's grids."""
    return np.asarray(grids).reshape(-1, 3)[0]


def _first_image(pv: np.ndarray, grids: np.ndarray, patch: int) -> np.ndarray:
    return skew.split_images(np.asarray(pv, np.float32), np.asarray(grids).reshape(-1, 3), patch)[0]


def probe_config(cfg: PreprocessConfig) -> PreprocessConfig:
    """``cfg`` with limits raised just enough that the 16 x 16 probe is not resized (normalization does not depend
    on the geometry; the table must come from unresized levels)."""
    side = -(-skew.PROBE_SIDE // cfg.patch_size)  # patches per side
    return cfg.with_(
        in_patch_limit=max(cfg.in_patch_limit, side * side),
        patch_limit_on_one_side=max(cfg.patch_limit_on_one_side, side),
    )


def normalization_table(serve: Callable[[list[Any], PreprocessConfig], tuple[Any, Any]], cfg: PreprocessConfig) -> Any:
    """float32 (3, 256): the values ``serve`` gives each level, read off its output for `skew.level_probe` (a
    ValueError when the path resized the probe after all, e.g. a checkpoint config it reads instead of ``cfg``)."""
    from deferlab.reference.oracle.navit import resize_config

    pcfg = probe_config(cfg)
    pv, grids = serve([_probe_image()], pcfg)
    want = resize_config(skew.PROBE_SIDE, skew.PROBE_SIDE, pcfg).grid_thw
    got = tuple(int(v) for v in np.asarray(grids).reshape(-1, 3)[0])
    if got != want or (want[1] * pcfg.patch_size, want[2] * pcfg.patch_size) < (skew.PROBE_SIDE, skew.PROBE_SIDE):
        raise ValueError(f"the 16x16 level probe came back with grid {got}, not {want}: resized, no table")
    return skew.table_from_probe(_first_image(pv, grids, pcfg.patch_size))


class Trained:
    """The checkpoint oracle's side, computed once per image and shared by every path."""

    def __init__(self, cfg: PreprocessConfig, oracle: Any = None) -> None:
        if oracle is None:
            from deferlab.reference.oracle import checkpoint as oracle
        self.cfg, self.oracle = cfg, oracle
        self.table = normalization_table(oracle.preprocess, cfg)
        self._cache: dict[int, tuple[np.ndarray, np.ndarray] | str] = {}

    def of(self, sample: Sample) -> tuple[np.ndarray, np.ndarray] | str:
        """(values (3, H, W), grid (3,)) of one image, or the oracle's refusal in one line."""
        key = id(sample)
        if key not in self._cache:
            try:
                pv, grids = self.oracle.preprocess([sample.image], self.cfg)
                self._cache[key] = (_first_image(pv, grids, self.cfg.patch_size), grid_row(grids))
            except Exception as e:  # noqa: BLE001 - the oracle refusing an input is recorded, not fatal
                self._cache[key] = one_line(e)
        return self._cache[key]


def served_pair(
    path: Any, sample: Sample, trained: Any, cell: Cell, read: Callable[[Any, Any], tuple[Any, Any]]
) -> tuple[Any, Any, Any, Any] | None:
    """(trained values, trained grid, served values, served grid) of one image, ``read`` turning the path's
    output into its values and grid row; None when a side refused (counted in ``cell``, the path's in one line)."""
    cell.images += 1
    ref = trained.of(sample)
    if isinstance(ref, str):
        cell.checkpoint_refused += 1
        return None
    try:
        served, grid = read(*path.serve([sample.image], trained.cfg))
    except Exception as e:  # noqa: BLE001 - a path refusing a class is a finding of the table, not a crash
        cell.refused += 1
        cell.refusal = cell.refusal or one_line(e)
        return None
    return (*ref, served, grid)


def compare_sample(path: Any, sample: Sample, trained: Trained, table: np.ndarray, cell: Cell) -> None:
    """Serve ``sample`` through ``path`` and add it to ``cell`` (a raise is a refusal, recorded in one line)."""
    patch = trained.cfg.patch_size
    pair = served_pair(path, sample, trained, cell, lambda pv, g: (_first_image(pv, g, patch), grid_row(g)))
    if pair is None:
        return
    values, grid_ref, served, grid = pair
    result, diff = skew.compare_image(served, values, table, trained.table)
    cell.served += 1
    cell.grids_equal += int(result.grids_equal and np.array_equal(grid, grid_ref))
    cell.elements += result.elements
    cell.bitwise_equal += result.bitwise_equal
    cell.max_ulps = max(cell.max_ulps, result.max_ulps)
    if cell.worst is None or result.max_levels > cell.worst.max_levels:
        h, w = diff.shape[1:]
        cell.worst = Worst(
            sample.origin, values[:, :h, :w], served[:, :h, :w], trained.table, table, diff, result.max_levels
        )
    cell.max_levels = max(cell.max_levels, result.max_levels)


@dataclass
class Column:
    """One path's column: its identity, its normalization table (or why none), its cells by class."""

    name: str
    label: str
    path: str
    system: str
    dtype: str
    real_code: bool
    table_error: str | None = None
    cells: dict[str, Cell] = field(default_factory=dict)
    family: str = "kimi-k3"  # the model family the path serves (`reports.report.served.family` for the others)

    def to_dict(self) -> dict[str, Any]:
        keep = ("name", "label", "path", "system", "dtype", "real_code", "table_error")
        return {**{k: getattr(self, k) for k in keep}, "cells": {c: v.to_dict() for c, v in self.cells.items()}}


def column(
    path: Any,
    samples: dict[str, list[Sample]],
    trained: Any,
    say: Callable[[str], None],
    *,
    table: Callable[[], np.ndarray] | None = None,
    compare: Callable[..., None] | None = None,
) -> Column:
    """Every class's cell for one path (its table read first: without one, every cell says why). ``table`` and
    ``compare``: how a model family's path is read (`reports.report.family.skew`); default Kimi-K3's."""
    col = Column(path.name, path.label, path.path, path.system, path.dtype, bool(path.real_code))
    try:
        found = table() if table is not None else normalization_table(path.serve, trained.cfg)
    except Exception as e:  # noqa: BLE001 - a path that cannot serve the probe still gets its column
        col.table_error = one_line(e)
        say(f"served: {path.name}: no normalization table ({col.table_error})")
        return col
    for cls in CLASSES:
        cell = col.cells[cls] = Cell()
        for sample in samples.get(cls, []):
            (compare or compare_sample)(path, sample, trained, found, cell)
    say(f"served: {path.name}: {sum(c.served for c in col.cells.values())} images compared")
    return col


def skew_table(
    paths: Sequence[Any],
    cfg: PreprocessConfig,
    samples: dict[str, list[Sample]],
    *,
    progress: Callable[[str], None] | None = None,
    oracle: Any = None,
) -> list[Column]:
    """One `Column` per path over ``samples`` (class -> images), against the checkpoint oracle (or ``oracle``)."""
    say = progress or (lambda _m: None)
    trained = Trained(cfg, oracle)
    return [column(p, samples, trained, say) for p in paths]


def table_dict(columns: list[Column], samples: dict[str, list[Sample]]) -> dict[str, Any]:
    """report.json's ``served`` entry: the classes (with their inputs) and one column per path."""
    return {
        "classes": [{"name": c, "inputs": [s.origin for s in samples.get(c, [])]} for c in CLASSES],
        "columns": [c.to_dict() for c in columns],
    }
