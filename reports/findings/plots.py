"""The two finding pictures drawn from impact data (semantics §21.7): a geometry finding's token map over sizes and
a tower-input finding's levels at its minimal input.

Why these two: "919 of 4,270 sizes differ, 2560 tokens against 256" says that a tile choice parts from the
checkpoint's; a map of served/trained tokens over (width, height) says where (a band of near-square sizes, a
threshold) and how much (the colour's distance from 1). A pixel finding's numbers (bf16 elements, ulps, levels,
PSNR) say that the tower gets other values; the two sides' levels side by side with their difference amplified
say which channels and elements, and how the difference is laid out. Both are read from the ``impact`` a failing
cell's test recorded: nothing is rerun.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from deferlab.reference.system.errors import InputValueError  # noqa: E402
from deferlab.reports.core.atomic import save_figure  # noqa: E402

REFUSED = -1  # a side's token count at a size it refuses (the map's convention)
GAIN = 8  # the levels difference is amplified this much, then clipped to 255
WINDOW = 256  # the most elements a levels picture shows (the first differing ones, with a margin)
MARGIN = 4  # elements kept either side of the differing ones


def check_map(record: Any) -> dict[str, Any]:
    """``record`` if it is a token map (C13's impact ``map``); else one line naming what is wrong."""
    accepted = "accepted: {'kind': 'token-map', 'widths', 'heights', 'served', 'trained'} (rows = heights)"
    if not isinstance(record, dict) or record.get("kind") != "token-map":
        raise InputValueError(f"token map: got {type(record).__name__} of kind {_kind(record)!r}; {accepted}")
    missing = [k for k in ("widths", "heights", "served", "trained") if k not in record]
    if missing:
        raise InputValueError(f"token map without {', '.join(missing)}; {accepted}")
    shape = (len(record["heights"]), len(record["widths"]))
    for side in ("served", "trained"):
        got = np.asarray(record[side]).shape
        if got != shape or 0 in shape:
            raise InputValueError(f"token map {side} has shape {got}, not (heights, widths) {shape}; {accepted}")
    return record


def _kind(record: Any) -> Any:
    return record.get("kind") if isinstance(record, dict) else None


def _logarithmic(values: np.ndarray) -> bool:
    """A log axis for sizes drawn geometrically over more than a decade (a linear grid stays linear)."""
    if len(values) < 3 or values.min() <= 0 or values.max() / values.min() <= 10:
        return False
    steps = np.diff(values)
    return bool(steps[-1] > 4 * max(steps[0], 1e-9))


def _edges(values: Sequence[float], log: bool) -> np.ndarray:
    """Cell edges around sorted centres (midpoints; geometric ones on a log axis), one cell's width at the ends."""
    v = np.asarray(values, np.float64)
    if len(v) == 1:
        return np.array([v[0] * 0.9, v[0] * 1.1]) if log else np.array([v[0] - 0.5, v[0] + 0.5])
    mids = np.sqrt(v[1:] * v[:-1]) if log else (v[1:] + v[:-1]) / 2
    first = v[0] ** 2 / mids[0] if log else 2 * v[0] - mids[0]
    last = v[-1] ** 2 / mids[-1] if log else 2 * v[-1] - mids[-1]
    return np.concatenate([[first], mids, [last]])


def token_map_png(record: dict[str, Any], title: str, path: Path, minimal: Sequence[int] | None = None) -> Path:
    """served/trained tokens over (width, height) on a diverging colour scale centred at 1 (log2), refusals in
    their own colours, ``minimal`` (width, height) starred; the axes are logarithmic when the sizes are drawn
    geometrically over more than a decade."""
    record = check_map(record)
    widths, heights = list(record["widths"]), list(record["heights"])
    order_w, order_h = np.argsort(widths), np.argsort(heights)
    served = np.asarray(record["served"], np.float64)[np.ix_(order_h, order_w)]
    trained = np.asarray(record["trained"], np.float64)[np.ix_(order_h, order_w)]
    w, h = np.asarray(widths, np.float64)[order_w], np.asarray(heights, np.float64)[order_h]
    refused_s, refused_t = served == REFUSED, trained == REFUSED
    valid = ~refused_s & ~refused_t & (trained > 0) & (served > 0)
    ratio = np.full(served.shape, np.nan)
    ratio[valid] = np.log2(served[valid] / trained[valid])
    span = max(float(np.nanmax(np.abs(ratio))) if valid.any() else 0.0, 1.0)
    log_w, log_h = _logarithmic(w), _logarithmic(h)
    ew, eh = _edges(w, log_w), _edges(h, log_h)
    fig, ax = plt.subplots(figsize=(8.6, 6.4))
    mesh = ax.pcolormesh(ew, eh, np.ma.masked_invalid(ratio), cmap="RdBu_r", vmin=-span, vmax=span, shading="flat")
    handles = []
    for mask, colour, label in (
        (refused_s & ~refused_t, "#222222", "refused by the engine only"),
        (refused_t & ~refused_s, "#bbbbbb", "refused by the checkpoint only"),
        (refused_s & refused_t, "#f2e6c9", "refused by both"),
    ):
        if mask.any():
            ax.pcolormesh(ew, eh, np.ma.masked_where(~mask, np.ones(mask.shape)), cmap=ListedColormap([colour]),
                          shading="flat")  # fmt: skip
            handles.append(Patch(color=colour, label=f"{label} ({int(mask.sum())})"))
    ax.set_xscale("log" if log_w else "linear")
    ax.set_yscale("log" if log_h else "linear")
    ax.set_xlabel("width (px)")
    ax.set_ylabel("height (px)")
    ticks = [t for t in range(-math.ceil(span), math.ceil(span) + 1) if abs(t) <= span]
    bar = fig.colorbar(mesh, ax=ax, ticks=ticks)
    bar.ax.set_yticklabels([f"{2.0**t:g}x" for t in ticks])
    bar.set_label("served / trained tokens (log scale; white: equal)")
    differ = int((valid & (served != trained)).sum())
    if minimal is not None and len(minimal) == 2:
        mw, mh = minimal
        ax.plot([mw], [mh], marker="*", markersize=16, color="#ffd700", markeredgecolor="black", ls="")
        at = _at(record, mw, mh)
        handles.append(plt.Line2D([], [], marker="*", ls="", color="#ffd700", markeredgecolor="black",
                                  markersize=12, label=f"minimal input {mw}x{mh}{at}"))  # fmt: skip
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, fontsize=8, frameon=False)
    ax.set_title(
        f"{title}\n{differ} of {served.size} sizes give other tokens; {int((refused_s ^ refused_t).sum())} refused "
        "on one side only",
        fontsize=10,
    )
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)


def _at(record: dict[str, Any], width: int, height: int) -> str:
    """`` (S served, T trained)`` when the map holds the minimal size, else ``""``."""
    try:
        i, j = list(record["heights"]).index(height), list(record["widths"]).index(width)
    except ValueError:
        return " (not on the map's grid)"
    return f": {record['served'][i][j]} tokens served, {record['trained'][i][j]} trained"


def check_levels(pixels: Any) -> tuple[np.ndarray, np.ndarray]:
    """(trained, served) levels of a ``pixels`` impact record as (channels, elements) int arrays; else one line
    naming what is wrong."""
    accepted = "accepted: 'served_levels' and 'trained_levels', nested lists of one shape (channels, elements)"
    if not isinstance(pixels, dict) or "served_levels" not in pixels or "trained_levels" not in pixels:
        got = sorted(pixels) if isinstance(pixels, dict) else type(pixels).__name__
        raise InputValueError(f"pixels record has {got}; {accepted}")
    s, t = (np.asarray(pixels[k], np.int32) for k in ("served_levels", "trained_levels"))
    if s.ndim == 1:
        s, t = s[None], t[None]
    if s.shape != t.shape or s.ndim != 2 or s.size == 0:
        raise InputValueError(f"pixels levels have shapes {s.shape} (served) and {t.shape} (trained); {accepted}")
    return t, s


def _window(differ: np.ndarray) -> tuple[int, int]:
    """The elements shown: those holding the first differing ones (a margin each side), at most `WINDOW`."""
    cols = np.nonzero(differ.any(axis=0))[0]
    n = differ.shape[1]
    if not len(cols):
        return 0, min(n, WINDOW)
    start = max(int(cols[0]) - MARGIN, 0)
    stop = min(int(cols[-1]) + MARGIN + 1, n, start + WINDOW)
    return start, stop


def levels_png(pixels: dict[str, Any], title: str, path: Path) -> Path:
    """Trained and served levels (rows = channels, columns = elements) one above the other so an element lines up
    in both, then ``|served - trained| x GAIN`` clipped to 255, all cropped to the differing elements; the title
    states the §21.7 numbers."""
    trained, served = check_levels(pixels)
    differ = served != trained
    start, stop = _window(differ)
    t, s = trained[:, start:stop], served[:, start:stop]
    diff = np.clip(np.abs(s - t) * GAIN, 0, 255)
    channels = trained.shape[0]
    names = ["R", "G", "B"] if channels == 3 else [f"c{i}" for i in range(channels)]
    fig, axes = plt.subplots(3, 1, figsize=(9.5, 1.2 + 1.05 * 3 * max(channels, 1) ** 0.5), sharex=True)
    extent = (start - 0.5, stop - 0.5, channels - 0.5, -0.5)
    for ax, image, label, cmap in (
        (axes[0], t, "trained (checkpoint) levels", "gray"),
        (axes[1], s, "served (engine) levels", "gray"),
        (axes[2], diff, f"|served - trained| x{GAIN}, clipped at 255", "magma"),
    ):
        ax.imshow(image, cmap=cmap, vmin=0, vmax=255, aspect="auto", interpolation="nearest", extent=extent)
        ax.set_yticks(range(channels), names, fontsize=8)
        ax.set_title(label, fontsize=9, loc="left")
    shown = f"elements {start}-{stop - 1} of {trained.shape[1]}"
    shown += " (the differing ones)" if differ.any() else " (none differs)"
    axes[2].set_xlabel(f"element (per channel); {shown}")
    fig.suptitle(f"{title}\n{_numbers(pixels, int(differ.sum()))}", fontsize=9.5)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)


def _numbers(p: dict[str, Any], differ: int) -> str:
    """The title's numbers: what the tower sees (bf16), then levels and PSNR, as recorded."""
    psnr = p.get("psnr_db", "?")
    psnr = psnr if isinstance(psnr, str) else f"{psnr:.1f}"
    return (
        f"{p.get('bf16_differ', '?')} of {p.get('compared', '?')} values differ in bf16 (largest "
        f"{p.get('max_bf16_ulps', '?')} bf16 ulps); {p.get('differ', differ)} differ in levels (largest "
        f"{p.get('max_levels', '?')}); PSNR {psnr} dB" + (f"; at {p['input']}" if p.get("input") else "")
    )
