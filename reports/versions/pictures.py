"""The pictures a versions run draws from its verdicts' own figure records (semantics §20): for each column whose
video claim recorded one, the frame strips of C16 at its smallest differing clip (or a demonstration clip when
nothing differs), under ``video/`` of the output folder, and the section of versions.md that shows them.

Why from the records: the children that ran the engines wrote the data (`properties.video_claims.strips`); the
parent draws without loading any engine, as for every figure of deferlab's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deferlab.reports.report.plots.video import STRIP_CLAIM, draw


def video_strips(doc: dict[str, Any], out: Path) -> list[tuple[str, str]]:
    """Draw each versions column's C16 strip into ``out / "video"``; (column, relative path) per figure drawn."""
    found = [
        (column, doc["verdicts"].get(STRIP_CLAIM, {}).get(column, ""), per.get(STRIP_CLAIM))
        for column, per in sorted(doc.get("figures", {}).items())
    ]
    return draw(found, out)


def markdown(drawn: list[tuple[str, str]]) -> list[str]:
    """versions.md's section of frame strips (empty when no column drew one)."""
    if not drawn:
        return []
    out = ["", "## Video: the frames each side takes (C16)", ""]
    out += ["Green: a frame the checkpoint's video processor (TRAINED) takes too; red: one it does not; triangles: "
            "the times told to the model. The model card's recipe (CARD) is drawn beside it.", ""]  # fmt: skip
    for column, name in drawn:
        out += [f"### {column}", "", f"![{column} frames taken]({name})", ""]
    return out
