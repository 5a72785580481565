"""report.md's served-vs-trained sections: the skew table and C13's exhaustive geometry sweep.

Plain markdown from report.json's ``served`` entry and the ``geometry``
records of ``sweeps``, so a report can be re-rendered from its JSON alone.
"""

from __future__ import annotations

from typing import Any

from deferlab.reports.report.sections import esc as _esc


def skew_cell(cell: dict[str, Any] | None) -> str:
    """One table cell: ``3 lv, 97.1% bitwise, 126 ulps`` (``grid≠ k/n`` when grids differ), or why none."""
    if cell is None:
        return "–"
    if cell["status"] == "refused":
        return f"refused: {_esc(cell['refusal'])}"[:160]
    if cell["status"] != "ok":
        return "–" if not cell["checkpoint_refused"] else "checkpoint refuses"
    text = f"{cell['max_levels']} lv, {100 * (cell['bitwise_share'] or 0):.1f}% bitwise, {cell['max_ulps']} ulps"
    if cell["grid_agreement"] != 1.0:
        text += f", grids agree {100 * cell['grid_agreement']:.0f}%"
    if cell["refused"]:
        text += f" ({cell['refused']} refused: {_esc(cell['refusal'])})"
    return text


def skew_rows(served: dict[str, Any]) -> list[str]:
    """The table (classes x paths) of one ``served`` entry (Kimi-K3's or a family's) and its columns' notes."""
    cols = served["columns"]
    lines = [
        "| class | inputs | " + " | ".join(_esc(c["name"]) for c in cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for cls in served["classes"]:
        cells = [skew_cell((c.get("cells") or {}).get(cls["name"])) for c in cols]
        lines.append(f"| {cls['name']} | {len(cls['inputs'])} | " + " | ".join(cells) + " |")
    for c in cols:
        if c.get("table_error"):
            lines.append(f"\n{_esc(c['name'])}: no normalization table ({_esc(c['table_error'])}).")
    return lines


def family_lines(entry: dict[str, Any]) -> list[str]:
    """One (family, engine) of ``served.families``: its table, or its ``n/a`` line, or why it has none."""
    head = f"#### {entry['display']} on {entry['engine']} {entry['spec']} (config `{entry['config']}`)"
    if entry.get("na"):
        return [head, "", _esc(entry["na"])]
    if entry.get("error") or not entry.get("columns"):
        return [head, "", f"No table: {_esc(entry.get('error') or 'no path')}."]
    return [head, "", *skew_rows(entry)]


def served_section(served: dict[str, Any] | None) -> list[str]:
    """Kimi-K3's skew table (classes x paths) and each other family's, or why there is none."""
    if not served:
        return ["Served vs trained not run (see Steps)."]
    lines = []
    if served["columns"]:
        lines += [
            f"Config `{served.get('config')}`. Per image class and served path, against the checkpoint's own "
            "processor (`reference.oracle.checkpoint`): max |uint8 level| difference before normalization (lv), "
            "share of values bitwise equal, max float32 ulps between the served value and the checkpoint's "
            "normalization of the served level (semantics §16.5). Values are compared as the path returns them "
            "(FP32; a BF16 path is cast later).",
            "",
            *skew_rows(served),
        ]
    for engine, why in (served.get("load_errors") or {}).items():
        lines.append(f"\n{engine} could not be loaded: {_esc(why)}")
    if served.get("families"):
        lines += [
            "Kimi-K3 not asked (`--model`): its table is not run." if not served["columns"] else "",
            "",
            "Other model families (semantics §18): the same cells against each family's trained side "
            "(`reference.oracle.trained`), each engine path at float32 run in a child process with its release's "
            "transformers and torchvision; values are compared where the grids agree.",
        ]
        for entry in served["families"]:
            lines += ["", *family_lines(entry)]
    return lines


def geometry_section(sweeps: list[dict[str, Any]]) -> list[str]:
    """C13 exhaustive: per path and geometry, how it was swept and the mismatches with the first five."""
    rows = [s for s in sweeps if s.get("kind") == "geometry"]
    if not rows:
        return ["C13 exhaustive geometry not run (see Steps)."]
    lines = ["| path | geometry | verdict | route | sizes | mismatches | function |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        sizes = f"{r['sizes']:,}" if isinstance(r.get("sizes"), int) else "–"
        lines.append(
            f"| {_esc(r['path'])} | {r['geometry']} | {r['verdict']} | {r['route']} | {sizes} | "
            f"{r.get('mismatches', '–')} | `{_esc(r.get('function', '–'))}` |"
        )
    notes = []
    for r in rows:
        if r.get("note"):
            notes.append(f"- {_esc(r['path'])} / {r['geometry']}: {_esc(r['note'])}")
        for m in r.get("first_mismatches") or []:
            notes.append(
                f"- {_esc(r['path'])} / {r['geometry']} {m['width']}x{m['height']}: engine {m['engine']}, oracle {m['oracle']}"
            )
        for d in r.get("oracle_disagreements") or []:
            notes.append(f"- oracle check, {r['geometry']}: {_esc(d)}")
    checked = {(r["geometry"], r.get("function")): r["check"] for r in rows if r.get("check")}
    if checked:
        sizes = sorted({c["sizes"] for c in checked.values()})
        notes.append(
            f"- Compiled functions were checked against the interpreted ones on {', '.join(map(str, sizes))} sizes "
            "each (every size up to 64 x 64, boundary sides, random sizes up to 16384) before the sweep."
        )
    return lines + ([""] + notes if notes else [])
