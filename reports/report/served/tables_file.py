"""The results file of an engine's family-tables child (`reports.report.served.family`): what the report reads back.

Why a file of fields and arrays rather than a pickle: the child runs the engine's code (a release of its own, its
pinned companions), and what it hands back must be data the parent reads without running anything of the child's;
the columns are plain values (names, counts, one-line refusals) and numeric arrays (the worst image of each cell,
its tables). ``OUT`` is the JSON (per family its ``n/a`` line, or its classes and columns), ``OUT`` with the
suffix ``.npz`` the arrays, written first, so a JSON that is there is whole. Read back, every `Column`, `Cell` and
`Worst` equals the child's, field for field.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.report.served.skew import Cell, Column, Worst

SCHEMA = 1
ARRAYS = ("trained_values", "served_values", "trained_table", "served_table", "diff_levels")
_PLAIN_CELL = tuple(f.name for f in fields(Cell) if f.name != "worst")
_PLAIN_COLUMN = tuple(f.name for f in fields(Column) if f.name != "cells")


def arrays_path(out: Path) -> Path:
    return Path(out).with_suffix(".npz")


def write(found: dict[str, dict[str, Any]], out: Path) -> None:
    """``found`` (family -> ``{"na": line}`` or ``{"columns": [Column], "classes": [...]}``) into ``out`` and its
    arrays file."""
    arrays: dict[str, np.ndarray] = {}
    doc: dict[str, Any] = {"schema": SCHEMA, "families": {}}
    for family, got in found.items():
        entry = {k: v for k, v in got.items() if k != "columns"}
        if "columns" in got:
            entry["columns"] = [_column(c, f"{family}/{i}", arrays) for i, c in enumerate(got["columns"])]
        doc["families"][family] = entry
    np.savez(arrays_path(out), **arrays)
    write_text_atomic(Path(out), json.dumps(doc, default=_scalar) + "\n")


def _scalar(value: Any) -> Any:
    """A numpy scalar among the counts, as the Python number it holds (anything else is no field of a table)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not a field of a family table")


def _column(col: Column, key: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    cells = {}
    for cls, cell in col.cells.items():
        entry: dict[str, Any] = {k: getattr(cell, k) for k in _PLAIN_CELL}
        worst = cell.worst
        if worst is not None:
            name = f"{key}/{len(arrays) // len(ARRAYS)}"
            arrays.update({f"{name}/{a}": getattr(worst, a) for a in ARRAYS})
            entry["worst"] = {"arrays": name, "origin": worst.origin, "max_levels": worst.max_levels,
                              "crop": worst.crop, "full": worst.full}  # fmt: skip
        cells[cls] = entry
    return {**{k: getattr(col, k) for k in _PLAIN_COLUMN}, "cells": cells}


def read(out: Path) -> dict[str, dict[str, Any]]:
    """What `write` wrote: family -> its ``n/a`` line, or its classes and `Column` objects; ValueError when the
    file is not one (another schema)."""
    doc = json.loads(Path(out).read_text())
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{out}: family tables of schema {doc.get('schema')!r}; accepted: {SCHEMA}")
    with np.load(arrays_path(out), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    found = {}
    for family, entry in doc["families"].items():
        got = {k: v for k, v in entry.items() if k != "columns"}
        if "columns" in entry:
            got["columns"] = [_read_column(c, arrays) for c in entry["columns"]]
        found[family] = got
    return found


def _read_column(entry: dict[str, Any], arrays: dict[str, np.ndarray]) -> Column:
    col = Column(**{k: entry[k] for k in _PLAIN_COLUMN})
    for cls, c in entry["cells"].items():
        cell = Cell(**{k: c[k] for k in _PLAIN_CELL})
        w = c.get("worst")
        if w is not None:
            crop, full = (tuple(w[k]) if w[k] is not None else None for k in ("crop", "full"))
            cell.worst = Worst(w["origin"], *(arrays[f"{w['arrays']}/{a}"] for a in ARRAYS), w["max_levels"],
                               crop, full)  # fmt: skip
        col.cells[cls] = cell
    return col
