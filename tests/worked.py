"""Semantics §3.2's worked Kimi-K3 NaViT values, read from the table in ``docs/semantics.md`` itself.

Why from the document: the values were worked out by hand there, and the oracle's own tests
(`tests/reference/test_navit.py`) and the served harness's (`tests/claims/test_served_props.py`) both check
against them. Read from the one table, the tests and the document cannot drift apart: a changed row is
checked on the next run, and a table that no longer parses fails the collection.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SEMANTICS = Path(__file__).resolve().parents[1] / "docs" / "semantics.md"
HEADING = "**Worked values, Kimi-K3"
ROWS = 13  # the table's rows: fewer means a row was lost or no longer parses

# (w, h) -> (new_w, new_h, pad_w, pad_h, grid, tokens)
Worked = dict[tuple[int, int], tuple[int, int, int, int, tuple[int, ...], int]]


@cache
def worked_k3(path: Path = SEMANTICS) -> Worked:
    """The rows of the table under `HEADING` (``| w x h | new_w, new_h | pad_w, pad_h | (1, gh, gw) | tokens |``)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADING))
    rows: Worked = {}
    for line in lines[start + 1 :]:
        if rows and not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"\d+x\d+", cells[0]):
            continue  # the blank line, the header and its rule
        w, h = (int(v) for v in cells[0].split("x"))
        new_w, new_h, pad_w, pad_h = (int(v) for v in re.findall(r"\d+", cells[1] + " " + cells[2]))
        rows[(w, h)] = (new_w, new_h, pad_w, pad_h, tuple(int(v) for v in re.findall(r"\d+", cells[3])), int(cells[4]))
    if len(rows) < ROWS:
        raise ValueError(f"{path}: the table under {HEADING!r} holds {len(rows)} rows, not the {ROWS} worked values")
    return rows
