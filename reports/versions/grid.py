"""versions.png: claims (rows) x release columns (`reports.versions.render` writes it beside versions.md).

Why a module of its own: the picture is one job (colours, legend, labels) and keeps render.py under 400 lines.
A failing cell is coloured by its severity class (semantics §21.1: crash darkest red, sequence red, tower-input
orange, float32-only and cost pale: informational), its verdict and class written in it; the legend lists
every colour, so the picture reads without versions.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deferlab.reference.system.engines import engine as engine_facts
from deferlab.reference.system.impact import LABELS, Severity
from deferlab.reports.core.atomic import save_figure
from deferlab.reports.versions import columns as cols
from deferlab.reports.versions.matrix import severity_of

COLOURS = {
    "holds": "#4caf50",
    "holds-with-caveat": "#aed581",
    "fails": "#e53935",
    "n/a": "#bdbdbd",
    "not-run": "#ffffff",
}
# a failing cell by its class (semantics §21.1): defects in reds and orange, the informational ones pale
SEVERITY_COLOURS = {
    Severity.CRASH: "#7f0000",
    Severity.SEQUENCE: "#e53935",
    Severity.TOWER_INPUT: "#fb8c00",
    Severity.FLOAT32_ONLY: "#fff59d",
    Severity.COST: "#d7d2b4",
}


def legend_colours() -> dict[str, str]:
    """The PNG legend: label -> colour, the verdicts with ``fails`` split into its classes, worst first."""
    fails = {f"fails: {s.label}" + ("" if s.defect else " (informational)"): SEVERITY_COLOURS[s]
             for s in sorted(Severity, reverse=True)}  # fmt: skip
    return {"holds": COLOURS["holds"], "holds-with-caveat": COLOURS["holds-with-caveat"], **fails,
            "n/a": COLOURS["n/a"], "not-run": COLOURS["not-run"]}  # fmt: skip


def grid_png(doc: dict[str, Any], path: Path) -> Path | None:
    """Claims (rows) x releases (columns), one coloured cell per verdict; None when no release ran."""
    versions, ids = doc["versions"], list(doc["verdicts"])
    if not versions:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    severity = severity_of(doc)
    fig, ax = plt.subplots(figsize=(max(6.5, 1.6 + 1.45 * len(versions)), 1.6 + 0.42 * len(ids)))
    for row, cid in enumerate(ids):
        for col, version in enumerate(versions):
            verdict = doc["verdicts"][cid].get(version, "not-run")
            label = severity.get(version, {}).get(cid) if verdict == "fails" else None
            colour = SEVERITY_COLOURS[LABELS[label]] if label else COLOURS.get(verdict, "#ffffff")
            ax.add_patch(Rectangle((col, row), 1, 1, facecolor=colour, edgecolor="#616161"))
            short = {"holds-with-caveat": "caveat", "not-run": "–"}.get(verdict, verdict)
            ink = "white" if label == Severity.CRASH.label else "black"
            ax.text(col + 0.5, row + 0.5, f"{short}\n{label}" if label else short, ha="center", va="center",
                    fontsize=7 if label else 8, color=ink)  # fmt: skip
    engines = [cols.parse(v).engine for v in versions]
    for col in range(1, len(versions)):
        if engines[col] != engines[col - 1]:  # one engine's releases | the next's
            ax.axvline(col, color="black", linewidth=2.5)
    ax.set_xlim(0, len(versions))
    ax.set_ylim(len(ids), 0)
    matches = ["\n".join(doc["policy_match"][v]["matches"]) or "none" for v in versions]
    ax.set_xticks(
        [c + 0.5 for c in range(len(versions))],
        [f"{_wrapped(v)}\n≈ {m}" for v, m in zip(versions, matches, strict=True)],
        minor=False,
        fontsize=8,
    )
    ax.set_yticks([r + 0.5 for r in range(len(ids))], ids, fontsize=9)
    ax.tick_params(length=0)
    modelled = [engine_facts(e).display for e in dict.fromkeys(engines) if engine_facts(e).seam]
    others = [engine_facts(e).display for e in dict.fromkeys(engines) if not engine_facts(e).seam]
    parts = [f"{', '.join(modelled)} (≈ the modelled policies giving the same verdicts)"] if modelled else []
    if others:
        parts.append(f"{', '.join(others)} (≈ claims.toml when its [claim.engines] expectations hold; C1-C12 are "
                     "SGLang's PR: n/a)")  # fmt: skip
    title = "Claim verdicts of real engine releases: " + ",\n".join(parts)
    ax.set_title(title, fontsize=10)
    ax.legend(
        handles=[Patch(facecolor=c, edgecolor="#616161", label=v) for v, c in legend_colours().items()],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        ncol=1,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def _wrapped(column: str) -> str:
    """A column name on up to three short lines (family, release, path), so neighbouring labels never overlap."""
    return column.replace(":", ":\n", 1).replace(" ", "\n", 1)
