"""A standalone reproducer per defect finding (semantics §21.4): ``F<n>-repro.py`` beside findings.md.

Why through `reports.repro`: `deferlab repro` already writes, for a failing verdict row, a script that imports
nothing of deferlab and calls the engine's own functions (run with pytest where the release is installed or its
wheel unpacked). A finding is told by its representative cell, so its reproducer is that cell's script, built on the
finding's own minimal input (a cell with two findings records one counterexample), tried on the finding's other
cells when no template fits the first. A finding no template fits says why, never a blank.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from deferlab.reference.system.engines import ENGINES
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.core.grouping import failure_text


def _row(doc: Mapping[str, Any], claim: str, column: str) -> dict[str, Any] | None:
    """The cell as `reports.repro` reads a verdict row: its policy label names family and served path."""
    col = doc["columns"].get(column)
    facts = ENGINES.get(col.get("engine")) if col else None
    if facts is None:
        return None
    family, path = col.get("family") or "", col.get("path")
    policy = (f"{family}:" if family else "") + facts.label + (f" {path}" if path else "")
    evidence = str(doc.get("evidence", {}).get(column, {}).get(claim) or "")
    return {"id": claim, "verdict": "fails", "policy": policy, "evidence": evidence,
            "counterexample": doc.get("counterexamples", {}).get(column, {}).get(claim),
            "provenance": doc.get("provenance", {}).get(column, {}).get(claim, {})}  # fmt: skip


def _cells(d: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    first = (d["minimal_cell"]["claim"], d["minimal_cell"]["column"])
    yield first
    yield from ((c["claim"], c["column"]) for c in d["cells"] if (c["claim"], c["column"]) != first)


def _inputs(d: Mapping[str, Any], claim: str, column: str, row: Mapping[str, Any]) -> Iterator[tuple[Any, str]]:
    """What a reproducer may be built on, best first: the finding's own minimal input and failure (its minimal
    cell's; a cell with two findings, a refusal and a sequence, records only one counterexample, so the second
    finding's reproducer showed its sibling's flaw), then the cell's recorded counterexample and failure."""
    cell = d.get("minimal_cell") or {}
    if (cell.get("claim"), cell.get("column")) == (claim, column) and d.get("minimal_input") is not None:
        own = d["minimal_input"]
        if own != row["counterexample"] and d.get("failure") and not _too_large(claim, own):
            yield own, str(d["failure"])
    yield row["counterexample"], failure_text(row["evidence"])


# C17's script runs the checkpoint's processor on black frames of the clip's size: a clip past this many pixels in
# all (frames x width x height) does not fit a user's machine (the pinned 900 frames of 1280x720, 829 million, took
# 24 GB and was killed on 24 GiB); its finding is then reproduced on its cell's recorded counterexample.
FRAME_PIXELS = 2**27
_CLIP = re.compile(r"Clip\(frames=(\d+), fps=[^,]+, width=(\d+), height=(\d+)\)")


def _too_large(claim: str, given: Any) -> bool:
    found = _CLIP.search(str(given)) if claim == "C17" else None
    return found is not None and int(found[1]) * int(found[2]) * int(found[3]) > FRAME_PIXELS


def write(doc: Mapping[str, Any], result: dict[str, Any], out: Path, source: str) -> list[Path]:
    """Each defect finding of ``result`` gets ``reproducer`` (``F<n>-repro.py`` in ``out``) or None and
    ``no_reproducer`` (why); returns the files written."""
    from deferlab.reports.core.claims import load_claim_statements
    from deferlab.reports.repro.cli import header
    from deferlab.reports.repro.templates import render

    statements = load_claim_statements()

    written = []
    for d in result["findings"]:
        d["reproducer"], d["no_reproducer"] = None, None
        if d["severity"] in ("float32-only", "cost"):
            d["no_reproducer"] = "informational: no defect to reproduce"
            continue
        for claim, column in _cells(d):
            row = _row(doc, claim, column)
            if row is None:
                continue
            row["statement"] = statements.get(claim, {}).get("statement", "")
            engine = doc["columns"][column]["engine"]
            made = None
            for given, failure in _inputs(d, claim, column, row):
                row = {**row, "counterexample": given, "evidence": failure}
                made = render(claim, given, failure, engine=engine, row=row)
                if made is not None:
                    break
            if made is None:
                continue
            code, what = made
            col = doc["columns"][column]
            system = {"name": f"{engine}-{col['version']}", "kind": engine, "version": col["version"]}
            text = header(row, system, col["version"], source, what, engine)
            text += f'"""Reproducer of finding {d["id"]} ({claim} on {column}): {what}."""\n\n' + code
            name = f"{d['id']}-repro.py"
            written.append(write_text_atomic(out / name, text))
            d["reproducer"] = name
            break
        else:
            d["no_reproducer"] = "no reproducer template of deferlab fits any of its cells' failures"
    return written
