"""The pictures a versions run draws from its verdicts' own figure records (semantics §20): for each column whose
video claim recorded one, the frame strips of C16 at its smallest differing clip (or a demonstration clip when
nothing differs), under ``video/`` of the output folder, and the section of versions.md that shows them.

Why from the records: the children that ran the engines wrote the data (`properties.video_claims.strips`); the
parent draws without loading any engine, as for every figure of deferlab's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from deferlab.reports.report.plots.video import strips_png

STRIP_CLAIM = "C16"  # the claim whose record carries the strip (C17 and C18 read the same sweep)


def slug(name: str) -> str:
    """A column name as a file-name part (``qwen3-vl:vllm-0.34.0`` -> ``qwen3-vl-vllm-0.34.0``)."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def video_strips(doc: dict[str, Any], out: Path) -> list[tuple[str, str]]:
    """Draw each column's C16 strip into ``out / "video"``; (column, relative path) per figure drawn."""
    drawn = []
    for column, per in sorted(doc.get("figures", {}).items()):
        figure = per.get(STRIP_CLAIM)
        if not figure or figure.get("kind") != "video-strips":
            continue
        verdict = doc["verdicts"].get(STRIP_CLAIM, {}).get(column, "")
        name = f"video/{slug(column)}.png"
        (out / "video").mkdir(parents=True, exist_ok=True)
        where = "smallest differing clip" if figure.get("differs") else "demonstration clip (nothing differs)"
        strips_png(figure, f"{column}: C16 {verdict}, frames taken ({where})", out / name)
        drawn.append((column, name))
    return drawn


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
