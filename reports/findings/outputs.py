"""What a findings document leaves beside it (semantics §21.4): each defect's picture and standalone reproducer,
then findings.json and findings.md, written the same way by `deferlab findings`, `versions` and `report`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.findings import pictures, render, repro


def write(doc: Mapping[str, Any], result: dict[str, Any], out: Path, source: str) -> list[Path]:
    """F<n>.png and F<n>-repro.py (or why each has none, into ``result``), findings.json and findings.md into
    ``out``; returns the pictures drawn. ``doc`` is the versions-like document the findings were grouped from."""
    drawn = pictures.draw(doc, result, out)
    repro.write(doc, result, out, source)
    write_text_atomic(out / "findings.json", json.dumps(result, indent=1) + "\n")
    write_text_atomic(out / "findings.md", render.markdown(result))
    return drawn
