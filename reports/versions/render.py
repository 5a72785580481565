"""Writing ``deferlab versions``'s output: versions.md, versions.json and the claims x releases grid (PNG).

Kept apart from `reports.versions.matrix` (running and comparing) so each module
stays one job. Everything is built in a staging directory and renamed into
place whole (`reports.atomic`), so an interrupted run leaves the previous
matrix readable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deferlab.reports.atomic import staged_directory, write_text_atomic, write_with_atomic
from deferlab.reports.render import VERDICT_CELL
from deferlab.reports.versions.matrix import VLLM_PREFIX

COLOURS = {
    "holds": "#4caf50",
    "holds-with-caveat": "#aed581",
    "fails": "#e53935",
    "n/a": "#bdbdbd",
    "not-run": "#ffffff",
}


def grid_png(doc: dict[str, Any], path: Path) -> Path | None:
    """Claims (rows) x releases (columns), one coloured cell per verdict; None when no release ran."""
    versions, ids = doc["versions"], list(doc["verdicts"])
    if not versions:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    fig, ax = plt.subplots(figsize=(max(6.5, 1.6 + 1.45 * len(versions)), 1.6 + 0.42 * len(ids)))
    for row, cid in enumerate(ids):
        for col, version in enumerate(versions):
            verdict = doc["verdicts"][cid].get(version, "not-run")
            ax.add_patch(Rectangle((col, row), 1, 1, facecolor=COLOURS.get(verdict, "#ffffff"), edgecolor="#616161"))
            short = {"holds-with-caveat": "caveat", "not-run": "–"}.get(verdict, verdict)
            ax.text(col + 0.5, row + 0.5, short, ha="center", va="center", fontsize=8)
    engines = [v.startswith(VLLM_PREFIX) for v in versions]
    for col in range(1, len(versions)):
        if engines[col] != engines[col - 1]:  # SGLang's releases | vLLM's
            ax.axvline(col, color="black", linewidth=2.5)
    ax.set_xlim(0, len(versions))
    ax.set_ylim(len(ids), 0)
    matches = ["\n".join(doc["policy_match"][v]["matches"]) or "none" for v in versions]
    ax.set_xticks(
        [c + 0.5 for c in range(len(versions))],
        [f"{v}\n≈ {m}" for v, m in zip(versions, matches, strict=True)],
        minor=False,
    )
    ax.set_yticks([r + 0.5 for r in range(len(ids))], ids, fontsize=9)
    ax.tick_params(length=0)
    title = "Claim verdicts of real engine releases: SGLang (≈ the modelled policies giving the same verdicts)"
    if any(engines):
        title += ",\nvLLM (≈ claims.toml when its [claim.engines] expectations hold; C1-C12 are SGLang's PR: n/a)"
    ax.set_title(title, fontsize=10)
    ax.legend(
        handles=[Patch(facecolor=c, edgecolor="#616161", label=v) for v, c in COLOURS.items()],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        ncol=1,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout()
    write_with_atomic(path, lambda p: fig.savefig(p, dpi=120, bbox_inches="tight"))
    plt.close(fig)
    return path


def markdown(doc: dict[str, Any], statements: dict[str, dict[str, str]], regressions: list[dict[str, str]]) -> str:
    """versions.md: the matrix, which policy each release matches, errors, then the failing claims' evidence."""
    versions = doc["versions"]
    out = [f"# Claim verdicts across engine releases: SGLang, vLLM (profile `{doc['profile']}`)", ""]
    if versions:
        out += ["![claims x releases](versions.png)", ""]
        out += ["| claim | statement | " + " | ".join(versions) + " |", "|---|---|" + "---|" * len(versions)]
        for cid, per in doc["verdicts"].items():
            cells = [VERDICT_CELL.get(per.get(v, "not-run"), per.get(v)) for v in versions]
            stmt = statements.get(cid, {}).get("statement", "").replace("|", "\\|")
            out.append(f"| {cid} | {stmt[:110]} | " + " | ".join(cells) + " |")
        out += ["", "## Which modelled policy (SGLang) or claims.toml expectation (vLLM) each release matches", ""]
        out += [
            "| release | matches | closest | claims that differ from the closest | seconds |",
            "|---|---|---|---|---|",
        ]
        for v in versions:
            m = doc["policy_match"][v]
            diff = "; ".join(
                f"{c}: release {d['release']}, model {d[m['closest']]}" for c, d in m["differences"].items()
            )
            out.append(
                f"| {v} | {', '.join(m['matches']) or '**none**'} | {m['closest']} | {diff or '–'} | {doc['seconds'][v]} |"
            )
    if doc["errors"]:
        out += ["", "## Releases that could not be checked, or errored", ""]
        out += [f"- **{v}**: {e}" for v, e in doc["errors"].items()]
    out += ["", "## Regressions against the versions baseline", ""]
    out += [f"- {r['name']}: {r['baseline']} -> {r['current']}" for r in regressions] or ["None."]
    out += ["", "## Failing claims: the real code's minimal counterexamples", ""]
    for v in versions:
        for cid, ce in doc["counterexamples"].get(v, {}).items():
            ev = doc["evidence"][v].get(cid, "").replace("\n", " ")
            out.append(f"- **{v} {cid}**: {ev[:400]}")
            if ce:
                out.append(f"  - counterexample: `{str(ce)[:400]}`")
    out += ["", "## What ran", ""]
    for v in versions:
        sysinfo = doc["systems"].get(v, {})
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(sysinfo.get("stand_ins_by_kind", {}).items()))
        out.append(f"- {v}: {sysinfo.get('name')} ({sysinfo.get('kind')}); stand-in imports by kind: {kinds or 'none'}")
    return "\n".join(out) + "\n"


def write(out: Path, doc: dict[str, Any], statements: dict[str, dict[str, str]], regressions: list) -> None:
    """versions.json, versions.md and versions.png into ``out``, atomically as a whole."""
    with staged_directory(out) as stage:
        write_text_atomic(stage / "versions.json", json.dumps({**doc, "regressions": regressions}, indent=1) + "\n")
        grid_png(doc, stage / "versions.png")
        write_text_atomic(stage / "versions.md", markdown(doc, statements, regressions))
