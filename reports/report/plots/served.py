"""The skew table's figures: a heatmap (classes x paths) and, per path, its worst images side by side.

Why pictures: "max 37 levels" says that a path differs; the checkpoint's
levels, the served levels and where they differ say how (a white halo
around transparency, a shifted edge, a blocky NEAREST palette). Drawn from
`reports.report.served.skew.Column`s, written atomically like every figure.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import BoundaryNorm, ListedColormap  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

from deferlab.reports.report.plots import save as _save  # noqa: E402
from deferlab.reports.report.served.skew import Column  # noqa: E402

# Max |level difference| bins: 0 (bitwise in levels), 1 (C14's resize allowance), then wider and wider.
LEVEL_BOUNDS = [0, 1, 2, 5, 17, 65, 256]
LEVEL_COLOURS = ["#1a9850", "#a6d96a", "#fee08b", "#fdae61", "#f46d43", "#a50026"]
LEVEL_LABELS = ["0", "1", "2-4", "5-16", "17-64", "65-255"]
REFUSED, NO_INPUT = "#9e9e9e", "#ffffff"
WORST_OVER = 1  # levels: worse than C14's allowance gets its picture


def slug(name: str) -> str:
    """A path's name as a file-name part (``vllm-0.33.0 (served)`` -> ``vllm-0.33.0-served``)."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def _label(name: str) -> str:
    """A column label in short lines (``deferlab-model/PR_33921 (eager)`` -> three lines)."""
    return name.replace("/", "/\n").replace(" (", "\n(").replace(", ", ",\n")


def _text_colour(rgba: tuple[float, ...]) -> str:
    return "white" if 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.55 else "black"


def _cell(col: dict[str, Any], cls: str) -> tuple[Any, str]:
    """(face colour, text) of one heatmap cell from report.json's column form."""
    cmap, norm = ListedColormap(LEVEL_COLOURS), BoundaryNorm(LEVEL_BOUNDS, len(LEVEL_COLOURS))
    cell = (col.get("cells") or {}).get(cls)
    if col.get("table_error") or cell is None:
        return REFUSED, "no table" if col.get("table_error") else ""
    if cell["status"] == "refused":
        return REFUSED, "refused"
    if cell["status"] != "ok":
        return NO_INPUT, "–"
    grids = "" if cell["grid_agreement"] == 1.0 else " grid≠"
    share = 100 * (cell["bitwise_share"] or 0.0)
    return cmap(norm(min(cell["max_levels"], 255))), f"{cell['max_levels']} lv{grids}\n{share:.1f}% bitwise"


def skew_heatmap(served: dict[str, Any], path: Path) -> Path | None:
    """Rows: image classes; columns: paths; colour: max level difference; text: levels and bitwise share.

    Drawn from report.json's ``served`` entry, so a report's table can be redrawn from its JSON alone.
    """
    columns, classes = served.get("columns") or [], [c["name"] for c in served.get("classes") or []]
    if not columns:
        return None
    fig, ax = plt.subplots(figsize=(2.6 + 1.9 * len(columns), 1.6 + 0.42 * len(classes)))
    for j, col in enumerate(columns):
        for i, cls in enumerate(classes):
            face, text = _cell(col, cls)
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=face, edgecolor="#616161", linewidth=0.6))
            rgba = matplotlib.colors.to_rgba(face)
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7, color=_text_colour(rgba))
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(classes), 0)
    ax.set_xticks([j + 0.5 for j in range(len(columns))], [_label(c["name"]) for c in columns], fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(classes))], classes, fontsize=8)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    handles = [
        Patch(facecolor=c, edgecolor="#616161", label=f"{lab} levels")
        for c, lab in zip(LEVEL_COLOURS, LEVEL_LABELS, strict=True)
    ]
    handles.append(Patch(facecolor=REFUSED, edgecolor="#616161", label="refused by the path"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(
        f"Served vs trained ({served.get('config')}): max |uint8 level difference| from the checkpoint's processor\n"
        "text: max levels, and the share of values bitwise equal to the checkpoint's (grid≠: a grid differs)",
        fontsize=10,
        pad=12,
    )
    fig.tight_layout()
    return _save(fig, path)


def worst_cases(column: Column, path: Path) -> Path | None:
    """One row per class whose worst image is over `WORST_OVER` levels: checkpoint | served | |difference|, each
    cut to the region that differs (`reports.report.served.skew.crop_box`), the row saying which region."""
    rows = [
        (cls, c.worst.cropped())
        for cls, c in column.cells.items()
        if c.worst is not None and c.worst.max_levels > WORST_OVER
    ]
    if not rows:
        return None
    fig, axes = plt.subplots(len(rows), 3, figsize=(9.6, 2.5 * len(rows) + 0.6), squeeze=False, layout="constrained")
    for (cls, w), (a, b, c) in zip(rows, axes, strict=True):
        a.imshow(w.trained, interpolation="nearest")
        b.imshow(w.served, interpolation="nearest")
        im = c.imshow(w.diff, cmap="magma", vmin=0, vmax=max(int(w.diff.max()), 1), interpolation="nearest")
        fig.colorbar(im, ax=c, shrink=0.85, label="levels")
        a.set_ylabel(f"{cls}\n{w.origin}\n{w.crop_text()}", fontsize=7)
        a.set_title("checkpoint (trained)", fontsize=8)
        b.set_title("served", fontsize=8)
        c.set_title(f"|difference| (max over channels), max {w.max_levels}", fontsize=8)
        for ax in (a, b, c):
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle(f"{column.name}: the worst image per class over {WORST_OVER} level, cut to where it differs")
    return _save(fig, path)


def _heatmap(served: dict[str, Any], name: str, title: str, directory: Path) -> list[dict[str, str]]:
    if skew_heatmap(served, directory / f"{name}.png") is None:
        return []
    caption = (
        "Max |uint8 level difference| from the trained side per image class (rows) and served path (columns), "
        "with the share of values bitwise equal; grey: the path refuses the class."
    )
    return [{"name": name, "file": f"{name}.png", "title": title, "caption": caption}]


def served_figures(served: dict[str, Any], columns: list[Column], directory: Path) -> list[dict[str, str]]:
    """Every served figure into ``directory``: Kimi-K3's heatmap and each other family's (from report.json's
    ``served``), then one worst-case PNG per path that has any (from the step's `Column`s, which keep the images)."""
    out = _heatmap(served, "served_skew", "Served vs trained (skew table)", directory)
    for entry in served.get("families") or []:
        name = f"served_skew_{slug(entry['family'])}_{entry['engine']}"
        doc = {**entry, "config": f"{entry['display']}, config {entry['config']}"}
        out += _heatmap(doc, name, f"Served vs trained, {entry['display']} on {entry['engine']}", directory)
    for col in columns:
        family = "" if col.family == "kimi-k3" else f"{slug(col.family)}_"
        name = f"served_worst_{family}{slug(col.name)}"
        if worst_cases(col, directory / f"{name}.png") is not None:
            out.append(
                {
                    "name": name,
                    "file": f"{name}.png",
                    "title": f"Worst served images: {col.name}",
                    "caption": f"Per class over {WORST_OVER} level: the trained side's levels, {col.name}'s levels "
                    "(read back through its own normalization) and their |difference|, cut to the region that "
                    "differs (the row names the region and the full size).",
                }
            )
    return out
