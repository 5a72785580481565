"""The skew table of the model families beyond Kimi-K3 (semantics §18): per engine path of a family
(`reference.system.served.FamilyPath`) and image class, how far what the engine serves is from the family's
trained side (`reference.oracle.trained.Trained`).

Why a child process: a Qwen or InternVL path computes with the transformers and torchvision its release pins
(`impl.loader.companions`), loaded before any of the engine's code, which cannot share the report's process (its
own transformers, the engine loaded for Kimi-K3 without them). So each engine a report names runs

    python -m deferlab.reports.report.served.family ENGINE SPEC FAMILIES OUT

once, a task of the report's local executor (`reports.report.served.report`), loaded through the one loader
(`impl.loader.__main__.load`) with the companions of every family asked, and writes, per family, the columns
(`reports.report.served.skew.Column`, the worst images already cropped) or the ``n/a`` line into the results file
OUT (`reports.report.served.tables_file`: fields and arrays, no pickle); its output is the report's
``runs/served-ENGINE.log``.

The cells are Kimi-K3's (`reports.report.served.skew.Cell`): a family path gives values (N, C, L) with a grid
row and its own per-level table (``levels``), so levels are read back through each side's table; values are
compared only where the grids agree (another grid covers other pixels: C13's finding, counted in the grid
share); the worst image is laid out as a picture (Qwen: the patches in place, first frame; InternVL: the tiles in
their grid, the thumbnail left out). The inputs are Kimi-K3's generated images and at most two corpus files a
class (`SAMPLES`). A normalization-only family has no pixels to compare (C15 alone judges it).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.oracle import skew as oracle_skew
from deferlab.reference.system import engines, families
from deferlab.reports.report.served import images, skew, tables_file
from deferlab.reports.report.served.skew import Cell, Column, Worst, one_line

SAMPLES = {"per_class": 2, "corpus": 2}  # `images.samples` arguments of the families' tables
NORMALIZATION_ONLY = "n/a: judged on normalization only (C15); the engine ships its pixels raw (semantics §18.3)"
GEOMETRY_ONLY = "n/a: judged on geometry and normalization (C13, C15); its pixels are not restated (semantics §18.9)"


def _qwen_picture(v: np.ndarray, g: list[int], cfg: Any) -> np.ndarray:
    _, gh, gw = g
    m, p, c = cfg.merge_size, cfg.patch_size, v.shape[1]
    t = v.shape[2] // (p * p)  # the temporal patch off the rows (ERNIE/MiMo configs hold none)
    blocks = v.reshape(gh // m, gw // m, m, m, c, t, p, p)[:, :, :, :, :, 0]
    return blocks.transpose(4, 0, 2, 5, 1, 3, 6).reshape(c, gh * p, gw * p)


def _internvl_picture(v: np.ndarray, g: list[int], cfg: Any) -> np.ndarray:
    rows, cols, _ = g
    s, c = cfg.image_size, v.shape[1]
    return v[: rows * cols].reshape(rows, cols, c, s, s).transpose(2, 0, 3, 1, 4).reshape(c, rows * s, cols * s)


# per family kind (its config type declares it); ERNIE-4.5-VL and MiMo-V2.5 lay their patches out as Qwen's (§18.9)
PICTURES = {"qwen": _qwen_picture, "internvl": _internvl_picture, "ernie": _qwen_picture, "mimo": _qwen_picture,
            "glm4v": _qwen_picture}  # fmt: skip


def layout(values: np.ndarray, grid: Any, cfg: Any) -> np.ndarray:
    """(C, H, W): one image's values (N, C, L) as the picture they cover."""
    v = np.asarray(values, np.float32)
    g = [int(x) for x in np.asarray(grid).reshape(-1)[:3]]
    picture = PICTURES.get(getattr(cfg, "kind", None))
    if picture is None:
        raise TypeError(f"no picture of a {type(cfg).__name__}: the family is judged on normalization only")
    return picture(v, g, cfg)


class TrainedSide:
    """The family's trained side, computed once per image and shared by every path of the table."""

    def __init__(self, family: str, cfg: Any) -> None:
        from deferlab.reference.oracle.trained import Trained

        self.trained, self.cfg = Trained(family), cfg
        self.table = self.trained.levels(cfg)
        self._cache: dict[int, tuple[np.ndarray, np.ndarray] | str] = {}

    def of(self, sample: images.Sample) -> tuple[np.ndarray, np.ndarray] | str:
        """(values (N, C, L), grid (3,)) of one image, or the trained side's refusal in one line."""
        key = id(sample)
        if key not in self._cache:
            image = Image.fromarray(sample.image) if isinstance(sample.image, np.ndarray) else sample.image
            try:
                values, grids = self.trained.serve([image], self.cfg)
                self._cache[key] = (values, grids[0])
            except Exception as e:  # noqa: BLE001 - the trained side refusing an input is recorded, not fatal
                self._cache[key] = one_line(e)
        return self._cache[key]


def _channels_first(values: np.ndarray) -> np.ndarray:
    """(N, C, L) -> (C, N, L): the layout `reference.oracle.skew.compare_image` reads channel by channel."""
    return np.ascontiguousarray(np.asarray(values, np.float32).transpose(1, 0, 2))


def compare_sample(path: Any, sample: images.Sample, trained: TrainedSide, table: np.ndarray, cell: Cell) -> None:
    """Serve ``sample`` through ``path`` and add it to ``cell`` (a raise is a refusal, recorded in one line)."""
    pair = skew.served_pair(path, sample, trained, cell, lambda v, g: (v, skew.grid_row(g)))
    if pair is None:
        return
    want, want_grid, values, grid = pair
    cell.served += 1
    if np.shape(values) != want.shape or not np.array_equal(grid, want_grid):
        return  # another geometry: its values cover other pixels (C13's finding, not C14's)
    cell.grids_equal += 1
    result, _ = oracle_skew.compare_image(_channels_first(values), _channels_first(want), table, trained.table)
    cell.elements += result.elements
    cell.bitwise_equal += result.bitwise_equal
    cell.max_ulps = max(cell.max_ulps, result.max_ulps)
    if cell.worst is None or result.max_levels > cell.worst.max_levels:
        served, picture = layout(values, grid, trained.cfg), layout(want, want_grid, trained.cfg)
        _, diff = oracle_skew.compare_image(served, picture, table, trained.table)
        worst = Worst(sample.origin, picture, served, trained.table, table, diff, result.max_levels)
        cell.worst = worst.cropped()  # a 256 x 256 (or 448 x 448 tiles) picture leaves the child as its region
    cell.max_levels = max(cell.max_levels, result.max_levels)


def family_table(
    paths: Sequence[Any], family: str, cfg: Any, samples: dict[str, list[images.Sample]], say: Callable[[str], None]
) -> list[Column]:
    """One `Column` per path of ``family`` over ``samples`` (class -> images), against its trained side."""
    trained = TrainedSide(family, cfg)
    out = []
    for p in paths:
        col = skew.column(p, samples, trained, say, table=lambda p=p: np.asarray(p.levels(cfg), np.float32),
                          compare=compare_sample)  # fmt: skip
        col.family = family
        out.append(col)
    return out


def engine_paths(engine: str, spec: str, family: str) -> list[Any] | str:
    """The engine's float32 paths of ``family`` on the loaded ``spec`` (the processor's own values; the tower's
    BF16 is their cast), or the ``n/a`` line where the release (or deferlab) has none: its plugin's
    ``hooks.table_paths``."""
    return _hooks(engine).table_paths(spec, family)


def companions(engine: str, names: Sequence[str]) -> tuple[str, ...]:
    """The companions the engine's paths of ``names`` compute with (the one load must have them all): its plugin's
    ``hooks.table_companions``."""
    return tuple(_hooks(engine).table_companions(names))


def _hooks(engine: str) -> Any:
    return importlib.import_module(engines.engine(engine).hooks)


def has_tables(engine: str) -> bool:
    """Whether the engine's plugin gives the skew table's paths (``hooks.table_paths``): an engine without them is
    ``n/a`` in the table, its claims still judged."""
    return bool(engines.engine(engine).hooks) and hasattr(_hooks(engine), "table_paths")


def pixel_families(engine: str, spec: str, names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(the families of ``names`` beyond Kimi-K3 whose pixels the engine's ``spec`` serves, family -> ``n/a``
    line for the others): the registry's facts, before anything loads."""
    wanted, na = [], {}
    tables = has_tables(engine)
    for name in (n for n in names if n != families.DEFAULT):
        fam = families.family(name)
        scoped = {"full": None, "geometry": GEOMETRY_ONLY}.get(fam.scope, NORMALIZATION_ONLY)
        reason = fam.not_served(engine, spec) or scoped
        if reason is None and not tables:
            reason = (
                f"n/a: {engines.engine(engine).display}'s plugin gives no paths for the skew table (hooks.table_paths)"
            )
        if reason is None:
            wanted.append(name)
        else:
            na[name] = reason
    return wanted, na


def child(engine: str, spec: str, names: Sequence[str], out: Path) -> int:
    """The child's work: load once, then each family's table (or ``n/a`` line) written into the results file
    ``out`` (`tables_file.write`)."""
    from deferlab.impl.loader.__main__ import load
    from deferlab.reference.oracle.trained import config

    load(engine, spec, companions(engine, names))
    samples = images.samples(**SAMPLES)
    found: dict[str, Any] = {}
    for family in names:
        made = engine_paths(engine, spec, family)
        if isinstance(made, str):
            found[family] = {"na": made}
            continue
        columns = family_table(made, family, config(family), samples, lambda m: print(m, flush=True))
        found[family] = {"columns": columns, "classes": skew.table_dict([], samples)["classes"]}
    tables_file.write(found, out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    engine, spec, names, out = list(sys.argv[1:] if argv is None else argv)
    return child(engine, spec, [n for n in names.split(",") if n], Path(out))


if __name__ == "__main__":  # pragma: no cover - the report starts it (`reports.report.served.report`)
    sys.exit(main())
