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
                self._cache[key] = (_first_image(pv, grids, self.cfg.patch_size), np.asarray(grids).reshape(-1, 3)[0])
            except Exception as e:  # noqa: BLE001 - the oracle refusing an input is recorded, not fatal
                self._cache[key] = one_line(e)
        return self._cache[key]


def compare_sample(path: Any, sample: Sample, trained: Trained, table: np.ndarray, cell: Cell) -> None:
    """Serve ``sample`` through ``path`` and add it to ``cell`` (a raise is a refusal, recorded in one line)."""
    cell.images += 1
    ref = trained.of(sample)
    if isinstance(ref, str):
        cell.checkpoint_refused += 1
        return
    try:
        pv, grids = path.serve([sample.image], trained.cfg)
        served = _first_image(pv, grids, trained.cfg.patch_size)
        grid = np.asarray(grids).reshape(-1, 3)[0]
    except Exception as e:  # noqa: BLE001 - a path refusing a class is a finding of the table, not a crash
        cell.refused += 1
        cell.refusal = cell.refusal or one_line(e)
        return
    values, grid_ref = ref
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

    def to_dict(self) -> dict[str, Any]:
        keep = ("name", "label", "path", "system", "dtype", "real_code", "table_error")
        return {**{k: getattr(self, k) for k in keep}, "cells": {c: v.to_dict() for c, v in self.cells.items()}}


def column(path: Any, samples: dict[str, list[Sample]], trained: Trained, say: Callable[[str], None]) -> Column:
    """Every class's cell for one path (its table read first: without one, every cell says why)."""
    col = Column(path.name, path.label, path.path, path.system, path.dtype, bool(path.real_code))
    try:
        table = normalization_table(path.serve, trained.cfg)
    except Exception as e:  # noqa: BLE001 - a path that cannot serve the probe still gets its column
        col.table_error = one_line(e)
        say(f"served: {path.name}: no normalization table ({col.table_error})")
        return col
    for cls in CLASSES:
        cell = col.cells[cls] = Cell()
        for sample in samples.get(cls, []):
            compare_sample(path, sample, trained, table, cell)
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
