"""The video claims' figure: which frames each side takes from one clip, on the clip's own timeline (semantics §20).

Why a picture: "index 3: 45 != 46" says that two samplers part; a strip per side over the clip's seconds shows
how (one side drifts later, another stops early at a frame cap, a third repeats the last frame to pad), and the
times each side tells the model (triangles) show a timestamp bug at a glance. Drawn from the ``figure`` data a
video claim records (`properties.video_claims.strips`): no engine is loaded here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from deferlab.reference.system.errors import InputValueError  # noqa: E402
from deferlab.reports.report.plots import save as _save  # noqa: E402

SAME, OTHER, TOLD = "#1a9850", "#d73027", "#4575b4"
STRIP_CLAIM = "C16"  # the claim whose record carries the strip (C17 and C18 read the same sweep)
BYTES_CLAIM = "C20"  # the claim whose record carries the decoded images side by side
TRAINED = "TRAINED"


def check(figure: Any) -> dict[str, Any]:
    """``figure`` if it is a video-strips record; else one line naming what is wrong."""
    if not isinstance(figure, dict) or figure.get("kind") != "video-strips":
        raise InputValueError(f"a video strip needs a 'video-strips' figure record, got {type(figure).__name__}")
    for key in ("frames", "fps", "request", "sides"):
        if key not in figure:
            raise InputValueError(f"video-strips record without {key!r}: has {sorted(figure)}")
    if not figure["sides"]:
        raise InputValueError("video-strips record with no sides: nothing to draw")
    return figure


def strips_png(figure: dict[str, Any], title: str, path: Path) -> Path:
    """One row per side: a tick at each frame taken (green where TRAINED takes it too, red where not), a count of
    repeats, and the times told to the model as triangles; x is the clip's time in seconds (frames without a
    known rate: the frame number)."""
    figure = check(figure)
    fps = float(figure["fps"]) or 1.0
    unit = "s" if figure["fps"] else "frame"
    sides = figure["sides"]
    trained = next((set(s["indices"] or ()) for s in sides if s["side"] == TRAINED), set())
    fig, ax = plt.subplots(figsize=(10, 0.9 * len(sides) + 1.6))
    for row, side in enumerate(reversed(sides)):
        y = row
        if side["indices"] is None:
            ax.text(0, y, f"no frames: {side['note'][:90]}", va="center", fontsize=8, color="#555555")
            continue
        xs = [i / fps for i in side["indices"]]
        colours = [SAME if i in trained else OTHER for i in side["indices"]]
        ax.scatter(xs, [y] * len(xs), marker="|", s=260, c=colours, linewidths=1.6)
        repeats = len(side["indices"]) - len(set(side["indices"]))
        label = f"{len(side['indices'])} frames" + (f", {repeats} repeated" if repeats else "")
        label += " (cut)" if side.get("cut") else ""
        ax.text(figure["frames"] / fps * 1.01, y, label, va="center", fontsize=8)
        if side.get("times"):
            ax.scatter(side["times"], [y - 0.3] * len(side["times"]), marker="^", s=22, c=TOLD)
    ax.set_yticks(range(len(sides)), [s["side"] for s in reversed(sides)], fontsize=8)
    ax.set_ylim(-0.7, len(sides) - 0.4)
    ax.set_xlim(-0.02 * figure["frames"] / fps, figure["frames"] / fps * 1.25)
    ax.set_xlabel(f"source time ({unit}); clip {figure['frames']} frames at {figure['fps']:g} fps, {figure['request']}")
    ax.set_title(title, fontsize=10)
    ax.legend(
        handles=[
            Line2D([], [], marker="|", ls="", color=SAME, label="frame TRAINED takes too", markersize=12),
            Line2D([], [], marker="|", ls="", color=OTHER, label="frame TRAINED does not take", markersize=12),
            Line2D([], [], marker="^", ls="", color=TOLD, label="time told to the model (grid step)"),
        ],
        loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=3, fontsize=8, frameon=False,
    )  # fmt: skip
    fig.tight_layout()
    return _save(fig, path, dpi=110)


def slug(name: str) -> str:
    """A column name as a file-name part (``qwen3-vl:vllm-0.34.0`` -> ``qwen3-vl-vllm-0.34.0``)."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def draw(found: list[tuple[str, str, Any]], out: Path) -> list[tuple[str, str]]:
    """(column, verdict, figure record) each drawn as ``out / video / <column>.png`` when it is a strip record."""
    import numpy as np

    from deferlab.reports.report.plots.bytes import side_by_side

    drawn = []
    for column, verdict, figure in found:
        kind = (figure or {}).get("kind")
        if kind == "video-strips":
            name = f"video/{slug(column)}.png"
            where = (
                "the smallest differing clip both take, if any"
                if figure.get("differs")
                else "demonstration clip (nothing differs)"
            )
            (out / "video").mkdir(parents=True, exist_ok=True)
            strips_png(figure, f"{column}: C16 {verdict}, frames taken ({where})", out / name)
        elif kind == "bytes-side-by-side":
            name = f"bytes/{slug(column)}.png"
            (out / "bytes").mkdir(parents=True, exist_ok=True)
            pair = [np.asarray(figure[k], np.uint8) for k in ("trained", "served")]
            side_by_side(*pair, f"{column}: C20 {verdict}, {figure['class']} decoded by {figure['side']}", out / name)
        else:
            continue
        drawn.append((column, name))
    return drawn


def report_figures(rows: list[dict[str, Any]], out: Path) -> list[dict[str, str]]:
    """The report's figures entries (report.json's ``figures``) for the claim rows that recorded a strip."""
    found = [(r["policy"], r["verdict"], r.get("figure")) for r in rows if r.get("id") in (STRIP_CLAIM, BYTES_CLAIM)]
    return [
        {"name": f"video:{column}", "file": name, "title": f"Video frames taken, {column}",
         "caption": "Which frames each side takes from one clip (the smallest differing one, else a 4 s clip at 30 "
                    "fps): green where the checkpoint's video processor takes the frame too, red where not, "
                    "triangles for the times told to the model (semantics §20)."}
        for column, name in draw(found, out)
    ]  # fmt: skip
