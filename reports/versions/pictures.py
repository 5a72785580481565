"""The pictures a versions run draws from its verdicts' own figure records (semantics §20): for each column whose
video claim recorded one, the frame strips of C16 at its smallest differing clip (or a demonstration clip when
nothing differs), under ``video/`` of the output folder, and the section of versions.md that shows them.

Why from the records: the children that ran the engines wrote the data (`properties.video_claims.strips`); the
parent draws without loading any engine, as for every figure of deferlab's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deferlab.reports.report.plots.video import BYTES_CLAIM, STRIP_CLAIM, draw


def video_strips(doc: dict[str, Any], out: Path) -> list[tuple[str, str]]:
    """Draw each versions column's C16 strip into ``out / "video"``; (column, relative path) per figure drawn."""
    found = [
        (column, doc["verdicts"].get(claim, {}).get(column, ""), per.get(claim))
        for column, per in sorted(doc.get("figures", {}).items())
        for claim in (STRIP_CLAIM, BYTES_CLAIM)
        if per.get(claim)
    ]
    return draw(found, out)


def markdown(drawn: list[tuple[str, str]]) -> list[str]:
    """versions.md's section of frame strips (empty when no column drew one)."""
    if not drawn:
        return []
    out = ["", "## Requests as sent: the frames each side takes (C16), the decoded images (C20)", ""]
    out += ["Strips: green, a frame the checkpoint's video processor (TRAINED) takes too; red, one it does not; "
            "triangles, the times told to the model; the model card's recipe (CARD) beside it. Images: the "
            "checkpoint's decode, the engine's, and their amplified difference.", ""]  # fmt: skip
    for column, name in drawn:
        what = "frames taken" if name.startswith("video/") else "decoded image"
        out += [f"### {column}, {what}", "", f"![{column} {what}]({name})", ""]
    return out
