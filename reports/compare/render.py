"""``deferlab compare``'s document and files: the verdict diff (compare.json), compare.md, compare.png,
compare.xml (JUnit) and the logs.

Kept apart from `reports.compare.cli` (resolving the sides) and `reports.compare.running` (running their
claims) so each module stays one job; the change of each claim is the one comparison's
(`reports.core.diff`, scope "review"), and the exit status is set here, with the document. Everything is built in a staging directory and renamed into
place whole (`reports.core.atomic.staged_directory`): an interrupted compare leaves
no partial output, and a previous one under the same name stays readable.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system.families import FAMILIES
from deferlab.reports.compare import cells
from deferlab.reports.core import diff as core_diff
from deferlab.reports.core import grouping, junit, summary
from deferlab.reports.core.atomic import save_figure, staged_directory, write_text_atomic
from deferlab.reports.core.claims import VERDICT_CELL
from deferlab.reports.versions.render import COLOURS

SCHEMA_VERSION = 1
FILES = {"md": "compare.md", "json": "compare.json", "junit": "compare.xml"}
MARK = {"newly failing": "▲ newly failing", "newly holding": "▼ newly holding", "failing differently": "≠ fails differently", "changed": "changed"}  # fmt: skip
SECTIONS = (
    ("newly failing", "Newly failing: HEAD's minimal counterexamples"),
    ("failing differently", "Failing differently: a new failure signature on HEAD"),
    ("newly holding", "Newly holding: what BASE's failure was"),
    ("still failing", "Still failing, unchanged (one entry per distinct failure)"),
)


# --- the diff: compare.json -------------------------------------------------------------------------------------------------------
diff = cells.diff  # the diff's entries, one per (claim, verdict column)


def document(
    sides: dict[str, Any],
    names: dict[str, str],
    results: dict[str, dict[str, Any]],
    profile: str,
    statements: dict[str, dict[str, str]],
    *,
    strict: bool = False,
    fill: bool = True,
) -> dict[str, Any]:
    """The ``compare.json`` document (``fill``: `reports.compare.cells.diff`'s). Exit status: 1 when a claim is newly failing on HEAD (a review's gate,
    `reports.core.diff.regressions`), or fails differently under the strict switch and the derandomized
    profile; else 3 when a side could not run its claims or a claim test errored; else 0."""
    rows = {role: results[role]["rows"] for role in ("BASE", "HEAD")}
    claims = diff(rows["BASE"], rows["HEAD"], statements, fill=fill)
    by_change = {c: [x["name"] for x in claims if x["change"] == c] for c in core_diff.CHANGES}
    label = {role: names.get(role) or sides[role].spec for role in rows}
    gated = core_diff.signatures_gated(profile, profile, strict)
    gating = [
        x["name"] for x in claims if x["change"] == "newly failing" or (gated and x["change"] == "failing differently")
    ]

    def failures(roles: tuple[str, ...], wanted: list[str]) -> list[dict[str, Any]]:
        entries = []
        for role in roles:
            picked = [r for r in rows[role] if cells.name_of(str(r["id"]), cells.where_of(r)) in wanted]
            entries += grouping.failure_entries(picked, lambda r, role=role: _where(role, label[role], r))
        return grouping.group_failures(entries)

    errors = {role: results[role]["error"] for role in rows if results[role]["error"]}
    unrun = [role for role in rows if not results[role]["rows"]]
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "profile": profile,
        "strict": strict,
        "base": _side_doc(sides["BASE"], names.get("BASE"), results["BASE"]),
        "head": _side_doc(sides["HEAD"], names.get("HEAD"), results["HEAD"]),
        "claims": claims,
        "changes": by_change,
        "regressions": gating,
        "failures": {
            "newly failing": failures(("HEAD",), by_change["newly failing"]),
            "failing differently": failures(("BASE", "HEAD"), by_change["failing differently"]),
            "still failing": failures(("BASE", "HEAD"), [x["name"] for x in claims if x["change"] == "unchanged"]),
            "newly holding": failures(("BASE",), by_change["newly holding"]),
        },
        "errors": errors,
        "sides_not_run": unrun,
        "rows": {role: [dict(r) for r in side] for role, side in rows.items()},  # typed rows as their JSON
        "exit_status": 1 if gating else (3 if errors else 0),
    }


def _where(role: str, label: str, row: dict[str, Any]) -> str:
    """Where a failure was seen: the side and its code, and the column unless it is Kimi-K3's default."""
    where = cells.where_of(row)
    return f"{role} {label}" + (f" {where}" if where else "")


def _side_doc(side: Any, name: str | None, result: dict[str, Any]) -> dict[str, Any]:
    system = result.get("system") or {}
    keep = {k: system.get(k) for k in ("name", "version", "kind", "commit", "load_seconds") if k in system}
    return {
        **{k: v for k, v in asdict(side).items() if k != "identity"},
        "name": name or system.get("name"),
        "system": keep,
        "seconds": result.get("seconds"),
        "error": result.get("error"),
    }


# --- the files ---------------------------------------------------------------------------------------------------
def _label(side: dict[str, Any]) -> str:
    return str(side.get("name") or side["spec"])


def headline(doc: dict[str, Any]) -> str:
    """One line: what changed and the exit status it gives."""
    ch = doc["changes"]
    parts = [f"{len(ch[c])} {c}" + (f" ({', '.join(ch[c])})" if ch[c] and c != "unchanged" else "") for c in ch]
    lead = "**Claims newly failing on HEAD: exit 1.**" if ch["newly failing"] else "No claim newly failing."
    if not ch["newly failing"] and doc.get("regressions"):
        lead = "**Claims failing differently on HEAD (strict switch, profile ci): exit 1.**"
    if doc["sides_not_run"]:
        lead = f"**{' and '.join(doc['sides_not_run'])} could not run its claims: exit {doc['exit_status']}.**"
    return f"{lead} " + "; ".join(parts) + "."


def summary_markdown(doc: dict[str, Any]) -> list[str]:
    """The one-screen part: sides, headline, the verdict table (what a CI job summary shows)."""
    b, h = doc["base"], doc["head"]
    out = [
        f"# Claims, BASE -> HEAD: `{b['spec']}` -> `{h['spec']}` (profile `{doc['profile']}`)",
        "",
        headline(doc),
        "",
    ]
    out += ["| side | SPEC | what ran | commit | seconds |", "|---|---|---|---|---|"]
    for role, s in (("BASE", b), ("HEAD", h)):
        commit = s.get("revision") or s["system"].get("commit") or "–"
        out.append(f"| {role} | `{s['spec']}` | {_label(s)} ({s['kind']}) | {str(commit)[:12]} | {s.get('seconds')} |")
    families = cells.by_family(doc["claims"])
    lines = cells.family_lines(doc["claims"])
    if lines:
        out += ["", "Each model family's changes:", "", *lines]
    for family, entries in families.items():
        out += ["", f"### {FAMILIES[family].display}"] if len(families) > 1 else []
        out += ["", *_table(entries)]
    return out


def _table(entries: list[dict[str, Any]]) -> list[str]:
    """The verdict table of ``entries``, a column naming the verdict column when any is not Kimi-K3's default."""
    named = any(c.get("column") for c in entries)
    head = (
        "| claim | column | statement | BASE | HEAD | change |"
        if named
        else "| claim | statement | BASE | HEAD | change |"
    )
    out = [head, "|---|---|---|---|---|" + ("---|" if named else "")]
    for c in entries:
        stmt = grouping.short(c["statement"], 100).replace("|", "\\|")
        verdicts = [VERDICT_CELL.get(c[k], c[k]) for k in ("base", "head")]
        if c.get("undocumented"):  # a way of failing claims.toml does not document (semantics §17.1)
            verdicts[1] += " (new signature)"
        change = f"**{c['change']}**" if c["change"] != "unchanged" else "–"
        where = f" {c.get('column') or '(default)'} |" if named else ""
        out.append(f"| {c['id']} |{where} {stmt} | {verdicts[0]} | {verdicts[1]} | {change} |")
    return out


def markdown(doc: dict[str, Any], statements: dict[str, dict[str, str]] | None = None) -> str:
    """compare.md: the summary, the figure, then one entry per distinct failure per kind of change."""
    stmts = statements or {c["id"]: {"statement": c["statement"]} for c in doc["claims"]}
    out = summary_markdown(doc) + ["", "![BASE and HEAD verdicts, changes marked](compare.png)"]
    for key, title in SECTIONS:
        groups = doc["failures"].get(key, [])
        out += ["", f"## {title}", ""]
        out += grouping.markdown_groups(groups, stmts) if groups else ["None."]
        if key == "failing differently":  # the ways of failing HEAD has and BASE had not, each in full
            for c in doc["claims"]:
                if c["change"] == key and c.get("new_signatures"):
                    out += ["", f"New on HEAD for **{c.get('name', c['id'])}**:", ""]
                    out += [f"- `{sig.replace('`', chr(39))}`" for sig in c["new_signatures"]]
        if key == "still failing":  # undocumented ways of failing on HEAD, whatever the change
            for c in doc["claims"]:
                if c.get("undocumented"):
                    out += ["", f"Not documented in claims.toml, on HEAD, for **{c.get('name', c['id'])}** (new):", ""]
                    out += [f"- `{sig.replace('`', chr(39))}`" for sig in c["undocumented"]]
    made = doc.get("reproducers") or {}
    if made.get("written") or made.get("missing"):
        title = {"sglang": "SGLang", "vllm": "vLLM"}.get(str(doc["head"].get("engine", "sglang")), "the engine")
        out += ["", f"## Reproducers: standalone pytest files calling {title}'s own functions", ""]
        out += [f"- [`{p}`]({p}): `deferlab repro {p}` (or pytest where {title} is installed)" for p in made["written"]]
        out += [f"- no reproducer: {m}" for m in made["missing"]]
    if doc["errors"]:
        out += ["", "## Sides that could not run their claims, or errored", ""]
        out += [f"- **{role}** (`{doc[role.lower()]['spec']}`): {e}" for role, e in doc["errors"].items()]
    out += ["", f"Exit status {doc['exit_status']}: 1 when a claim is newly failing, 3 when a side could not run."]
    return "\n".join(out) + "\n"


def png(doc: dict[str, Any], path: Path) -> Path:
    """Claims (rows) x BASE, HEAD (columns), one coloured cell per verdict; a changed claim's HEAD cell is
    framed and its change written beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    claims = doc["claims"]
    fig, ax = plt.subplots(figsize=(6.4, 1.9 + 0.34 * len(claims)))
    for row, c in enumerate(claims):
        for col, key in enumerate(("base", "head")):
            v = c[key]
            changed = key == "head" and c["change"] != "unchanged"
            ax.add_patch(
                Rectangle(
                    (col, row),
                    1,
                    1,
                    facecolor=COLOURS.get(v, "#ffffff"),
                    edgecolor="#000000" if changed else "#616161",
                    linewidth=3 if changed else 0.8,
                    zorder=3 if changed else 2,
                )
            )
            short = {"holds-with-caveat": "caveat", "not-run": "–"}.get(v, v)
            ax.text(col + 0.5, row + 0.5, short, ha="center", va="center", fontsize=8, zorder=4)
        if c["change"] != "unchanged":
            ax.text(2.1, row + 0.5, MARK[c["change"]], ha="left", va="center", fontsize=9, weight="bold")
    ax.set_xlim(0, 3.6)
    ax.set_ylim(len(claims), 0)
    ax.set_xticks([0.5, 1.5], [f"BASE\n{_label(doc['base'])}", f"HEAD\n{_label(doc['head'])}"])
    ax.set_yticks([r + 0.5 for r in range(len(claims))], [c.get("name", c["id"]) for c in claims], fontsize=9)
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title("Claim verdicts, BASE -> HEAD (framed: changed on HEAD)", fontsize=10)
    ax.legend(
        handles=[Patch(facecolor=col, edgecolor="#616161", label=v) for v, col in COLOURS.items()],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.09),
        ncol=len(COLOURS),
        fontsize=8,
        frameon=False,
        handlelength=1.2,
        columnspacing=1.0,
    )
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def junit_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """HEAD's claim rows for JUnit, each noting its change against BASE (system: HEAD's name)."""
    change = {c["name"]: c for c in doc["claims"]}
    out = []
    for r in doc["rows"]["HEAD"]:
        c = change.get(cells.name_of(str(r["id"]), cells.where_of(r)))
        note = f"{c['change']} (BASE {c['base']})" if c and c["change"] != "unchanged" else ""
        out.append({**r, "system": _label(doc["head"]), "note": note})
    return out


def reproducers(stage: Path, doc: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """``repro/<claim>-<system>.py`` for every failing claim of each side (`reports.repro.cli`); the files written
    (relative to the output folder) and one line per failing claim no template fits."""
    from deferlab.reports.repro import cli as repro

    made: dict[str, list[str]] = {"written": [], "missing": []}
    same = _label(doc["base"]) == _label(doc["head"])  # e.g. two checkouts of one version: keep both sides' files
    for role in ("BASE", "HEAD"):
        side = doc[role.lower()]
        source = f"deferlab compare {doc['base']['spec']} {doc['head']['spec']} ({role}, profile {doc['profile']})"
        system = results[role].get("system") or {}
        name = _label(side) + (f"-{role.lower()}" if same else "")
        system = {**system, "name": name, "commit": side.get("revision") or system.get("commit")}
        engine = side.get("engine") or "sglang"
        written, missing = repro.write_reproducers(
            doc["rows"][role], system, side["run_spec"], stage, source=source, engine=engine
        )
        made["written"] += [p.relative_to(stage).as_posix() for p in written]
        made["missing"] += missing
    return made


def write(
    out: Path, doc: dict[str, Any], results: dict[str, dict[str, Any]], *, junit_file: Path | None = None, log: TextIO
) -> dict[str, list[str]]:
    """Every output file into ``out``, atomically as a whole; then ``junit_file`` and the CI job summary, if asked.
    Returns the reproducers written and the failing claims that got none (`reproducers`)."""
    rows = junit_rows(doc)
    with staged_directory(out) as stage:
        made = reproducers(stage, doc, results)
        doc = {**doc, "reproducers": made}
        write_text_atomic(stage / "compare.json", json.dumps(doc, indent=1, default=str) + "\n")
        png(doc, stage / "compare.png")
        write_text_atomic(stage / "compare.md", markdown(doc))
        junit.write_junit(rows, stage / "compare.xml", suite="deferlab compare (HEAD)")
        for role, r in results.items():
            write_text_atomic(stage / "logs" / f"{role.lower()}.log", r.get("log", ""))
    if junit_file is not None:
        junit.write_junit(rows, junit_file, suite="deferlab compare (HEAD)")
    if summary.append_step_summary("\n".join(summary_markdown(doc)) + "\n") is not None:
        print("[deferlab] compare: summary appended to $GITHUB_STEP_SUMMARY", file=log, flush=True)
    return made


def stdout_text(out: Path, fmt: str) -> str:
    """The written file ``fmt`` names (`FILES`), for stdout."""
    return (Path(out) / FILES[fmt]).read_text()
