"""Writing ``deferlab versions``'s output: versions.md, versions.json, versions.xml (JUnit), the claims x
columns grid (PNG) and families.md (`reports.versions.families`).

Kept apart from `reports.versions.matrix` (running and comparing) so each module
stays one job. Everything is built in a staging directory and renamed into
place whole (`reports.core.atomic`), so an interrupted run leaves the previous
matrix readable. versions.md opens with a one-screen summary (releases run,
failing claims by how many releases they fail on, what changed against the
baseline) and gives each distinct failure once, with every column it applies
to and its full text in a ``<details>`` block (`reports.core.grouping`). With
more than one model family, the verdict table is one table per family. A failing cell carries its severity
class (semantics §21: crash, sequence, tower-input, float32-only, cost; `reports.versions.matrix.severities`) in
every output, and the findings of `reports.findings` lead versions.md, beside it in findings.md.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system.engines import engine as engine_facts
from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.impact import LABELS
from deferlab.reports.core import grouping, junit, summary
from deferlab.reports.core.atomic import (
    staged_directory,
    write_bytes_atomic,
    write_text_atomic,
)
from deferlab.reports.core.claims import VERDICT_CELL
from deferlab.reports.findings import outputs as finding_outputs
from deferlab.reports.findings import render as findings_report
from deferlab.reports.findings.group import group as findings_of
from deferlab.reports.versions import columns as cols
from deferlab.reports.versions import families as families_table
from deferlab.reports.versions import pictures
from deferlab.reports.versions.grid import COLOURS as COLOURS  # reports.compare colours its cells alike
from deferlab.reports.versions.grid import grid_png
from deferlab.reports.versions.matrix import release_of, severity_of

FILES = {"md": "versions.md", "json": "versions.json", "junit": "versions.xml", "families": "families.md"}
FORMATS = tuple(FILES)  # what ``deferlab versions --format`` can put on stdout
SUMMARY_REGRESSIONS = 5  # regressions named in the summary (all are under their own section)
STATEMENT_CELL = 110  # characters of a statement in the verdict table


def claim_rows(doc: dict[str, Any], statements: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """One row per (claim, release column) that ran: verdict, evidence, counterexample, the column as ``system``."""
    rows = []
    for cid, per in doc["verdicts"].items():
        for v in doc["versions"]:
            verdict = per.get(v, "not-run")
            rows.append(
                {
                    "id": cid,
                    "statement": statements.get(cid, {}).get("statement", ""),
                    "policy": v,
                    "system": v,
                    "verdict": verdict,
                    "evidence": doc.get("evidence", {}).get(v, {}).get(cid, ""),
                    "counterexample": doc.get("counterexamples", {}).get(v, {}).get(cid),
                }
            )
    return rows


def failure_groups(doc: dict[str, Any], statements: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """versions.json's ``failure_groups``: the failing (claim, release) cells grouped by (claim, failure signature),
    each listing every release column it applies to, with every member's full text (`reports.core.grouping`)."""
    rows = claim_rows(doc, statements or {})
    return grouping.group_failures(grouping.failure_entries(rows, lambda r: str(r["system"])))


def _regression_line(regressions: list[dict[str, str]], baseline: str | None) -> str:
    if baseline is None:
        return "no baseline compared"
    if not regressions:
        return f"nothing changed against the baseline `{baseline}`"
    first = "; ".join(f"`{r['name']}` {r['baseline']} -> {r['current']}" for r in regressions[:SUMMARY_REGRESSIONS])
    more = f"; {len(regressions) - SUMMARY_REGRESSIONS} more" if len(regressions) > SUMMARY_REGRESSIONS else ""
    return f"**{len(regressions)} regression(s)** against `{baseline}` (exit 1): {first}{more}"


def summary_markdown(
    doc: dict[str, Any],
    statements: dict[str, dict[str, str]],
    regressions: list[dict[str, str]],
    baseline: str | None = None,
    groups: list[dict[str, Any]] | None = None,
    lead: list[str] | None = None,
) -> list[str]:
    """The one-screen part: the title, the releases run, each failing claim with how many releases it fails on
    and the classes of those cells, what changed against the baseline, ``lead`` (versions.md: the findings), then
    the verdict table (what the CI job summary shows)."""
    versions = doc["versions"]
    groups = failure_groups(doc, statements) if groups is None else groups
    names = ", ".join(engine_facts(e).display for e in dict.fromkeys(cols.parse(v).engine for v in doc["versions"]))
    out = [f"# Claim verdicts across engine releases: {names} (profile `{doc['profile']}`)", "", "## Summary", ""]
    errors = f"; **{len(doc['errors'])} could not be checked or errored** ({', '.join(doc['errors'])})"
    releases = doc.get("releases") or versions
    shown = f"; {len(versions)} columns (families and served paths)" if len(versions) > len(releases) else ""
    out.append(
        f"- Releases run ({len(releases)}): {', '.join(releases) or 'none'}{shown}" + (errors if doc["errors"] else "")
    )
    failing = {cid: [v for v in versions if per.get(v) == "fails"] for cid, per in doc["verdicts"].items()}
    failing = {cid: vs for cid, vs in failing.items() if vs}
    if failing:
        out.append(
            f"- **{len(failing)} failing claim(s)**, by the releases they fail on (one entry each under *Failing claims*):"
        )
    else:
        out.append("- No claim fails on any release.")
    severity = severity_of(doc)
    for cid, vs in sorted(failing.items(), key=lambda kv: -len(kv[1])):
        first = next((g for g in groups if g["claim"] == cid), None)
        stmt = statements.get(cid, {}).get("statement", "")
        brief = f" ({grouping.short(stmt, 70)})" if stmt else ""
        failure = ": `" + grouping.short(first["failure"], 100).replace("`", "'") + "`" if first else ""
        classes = Counter(severity.get(v, {}).get(cid) for v in vs if severity.get(v, {}).get(cid))
        shown = ", ".join(f"{label} {classes[label]}" for label in _worst_first(classes))
        out.append(f"  - **{cid}**{brief} fails on {len(vs)} of {len(versions)}" + (f" ({shown})" if shown else "")
                   + f": {', '.join(vs)}{failure}")  # fmt: skip
    out += [f"- Against the baseline: {_regression_line(regressions, baseline)}.", ""]
    out += [*lead, "## Claim verdicts: claims x columns", ""] if lead else []  # the tables: not under *Findings*
    groups_of = _by_family(versions)
    for i, (family, shown) in enumerate(groups_of.items()):
        head = [f"### {FAMILIES[family].display}", ""] if len(groups_of) > 1 else []
        out += ([""] if i else []) + head + _verdict_table(doc, statements, shown, skip_na=len(groups_of) > 1)
    return out


def _by_family(versions: list[str]) -> dict[str, list[str]]:
    """The columns of each family, families in registry order."""
    found: dict[str, list[str]] = {}
    for v in versions:
        found.setdefault(cols.parse(v).family, []).append(v)
    return {f: found[f] for f in FAMILIES if f in found}


def _verdict_table(
    doc: dict[str, Any], statements: dict[str, dict[str, str]], versions: list[str], *, skip_na: bool
) -> list[str]:
    """Claims x ``versions``; ``skip_na``: leave out a claim that is n/a in every one of them (another family's)."""
    if not versions:
        return []
    out = ["| claim | statement | " + " | ".join(versions) + " |", "|---|---|" + "---|" * len(versions)]
    cut = []
    for cid, per in doc["verdicts"].items():
        if skip_na and all(per.get(v) == "n/a" for v in versions):
            continue
        cells = [_cell(doc, cid, v, per.get(v, "not-run")) for v in versions]
        stmt = statements.get(cid, {}).get("statement", "")
        cell = grouping.short(stmt, STATEMENT_CELL).replace("|", "\\|")
        out.append(f"| {cid} | {cell} | " + " | ".join(cells) + " |")
        if len(" ".join(stmt.split())) > STATEMENT_CELL:
            cut.append((cid, stmt))
    if cut:
        out += ["", *grouping.details("statements cut above, in full", cut)]
    return out


def _cell(doc: dict[str, Any], cid: str, version: str, verdict: str) -> str:
    """A verdict's table cell, a failure with its class (``**FAILS** (sequence)``); a failure with a signature
    claims.toml does not document is marked new."""
    new = doc.get("new_signatures", {}).get(version, {}).get(cid)
    label = severity_of(doc).get(version, {}).get(cid) if verdict == "fails" else None
    return VERDICT_CELL.get(verdict, verdict) + (f" ({label})" if label else "") + (" (new signature)" if new else "")


def _worst_first(labels: Any) -> list[str]:
    return sorted(labels, key=lambda label: -LABELS[label])


def findings(doc: dict[str, Any], groups: list[dict[str, Any]]) -> dict[str, Any]:
    """findings.json of this matrix (`reports.findings`: one finding per root cause, worst first), read off the
    document with its failure groups, as `deferlab findings versions.json` would."""
    found = findings_of({**doc, "failure_groups": groups})
    return findings_report.document(found, "versions.json", errored=len(doc.get("errors") or {}))


def findings_section(result: dict[str, Any]) -> list[str]:
    """What leads versions.md after the summary: the findings' counts, one line per defect (worst first) and
    the informational ones folded into one line (`reports.findings.render.summary`), linking findings.md."""
    lines = findings_report.summary(result, linked=True).splitlines()
    head = "## Findings: one per root cause, worst first ([findings.md](findings.md) has each one's issue text)"
    return [head, "", *("- " + _LINK.sub(r"](\1)", _CODE.sub(r"`\1`", line)) for line in lines), ""]


# an engine's dotted or underscored name (``KimiK3Processor.__call__``), set as code so markdown keeps it whole
_LINK = re.compile(r"\]\(`([^`]+)`\)")  # a picture's link the code marking wrapped: unwrapped again
_CODE = re.compile(r"(?<![\w`.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z]\w*_\w*)")


def _new_signatures(doc: dict[str, Any]) -> list[str]:
    """The section listing each failure whose signature claims.toml does not document (semantics §17.1)."""
    found = [(v, cid, s) for v, per in doc.get("new_signatures", {}).items() for cid, sigs in per.items() for s in sigs]
    if not found:
        return []
    out = ["", "## New failure signatures: failing in a way claims.toml does not document", ""]
    return out + [f"- **{cid}** on {v}: `{s.replace('`', chr(39))}`" for v, cid, s in found]


def markdown(
    doc: dict[str, Any],
    statements: dict[str, dict[str, str]],
    regressions: list[dict[str, str]],
    baseline: str | None = None,
    strips: list[tuple[str, str]] | None = None,
    found: dict[str, Any] | None = None,
) -> str:
    """versions.md: the summary, the findings (``found``: `findings`, computed when None) and matrix, which policy each release matches, errors, regressions, then one entry
    per distinct failure (claim, signature) listing every release it applies to, its full text in ``<details>``."""
    versions = doc["versions"]
    groups = failure_groups(doc, statements)
    lead = findings_section(found if found is not None else findings(doc, groups))
    out = summary_markdown(doc, statements, regressions, baseline, groups, lead)
    if versions:
        out += ["", "![claims x releases](versions.png)", ""]
        out += [
            "## Which modelled policy (SGLang, Kimi-K3) or claims.toml expectation (every other column) each "
            "column matches",
            "",
        ]
        out += [
            "| column | matches | closest | claims that differ from the closest | seconds (its release) |",
            "|---|---|---|---|---|",
        ]
        for v in versions:
            m = doc["policy_match"][v]
            diff = "; ".join(
                f"{c}: release {d['release']}, model {d[m['closest']]}" for c, d in m["differences"].items()
            )
            out.append(
                f"| {v} | {', '.join(m['matches']) or '**none**'} | {m['closest']} | {diff or '–'} | {doc['seconds'].get(release_of(doc, v))} |"
            )
    if doc["errors"]:
        out += ["", "## Releases that could not be checked, or errored", ""]
        out += [f"- **{v}**: {e}" for v, e in doc["errors"].items()]
    if doc.get("not_served"):
        out += ["", "## Model families a release does not serve (n/a, no column)", ""]
        out += [
            f"- **{r}**, {FAMILIES[f].display}: {why}" for r, per in doc["not_served"].items() for f, why in per.items()
        ]
    out += _new_signatures(doc)
    out += pictures.markdown(strips or [])
    out += ["", "## Regressions against the versions baseline", ""]
    out += [f"- {r['name']}: {r['baseline']} -> {r['current']}" for r in regressions] or ["None."]
    out += ["", "## Failing claims: the real code's minimal counterexamples, one entry per distinct failure", ""]
    out += grouping.markdown_groups(groups, statements) if groups else ["None."]
    out += ["", "## What ran", ""]
    for v in doc.get("releases") or versions:
        if v not in doc["systems"]:
            continue
        sysinfo = doc["systems"][v]
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(sysinfo.get("stand_ins_by_kind", {}).items()))
        out.append(f"- {v}: {sysinfo.get('name')} ({sysinfo.get('kind')}); stand-in imports by kind: {kinds or 'none'}")
    return "\n".join(out) + "\n"


def junit_rows(
    doc: dict[str, Any], statements: dict[str, dict[str, str]], regressions: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """`claim_rows` for JUnit, a regressed cell noting what the baseline had."""
    regressed, severity = {r["name"]: r for r in regressions}, severity_of(doc)
    out = []
    for r in claim_rows(doc, statements):
        reg = regressed.get(f"{r['system']}/{r['id']}")
        label = severity.get(r["system"], {}).get(r["id"]) if r["verdict"] == "fails" else None
        note = [f"severity {label}"] if label else []
        note += [f"regression (baseline {reg['baseline']})"] if reg else []
        out.append({**r, "severity": label, "note": "; ".join(note)})
    return out


def junit_bytes(rows: list[dict[str, Any]]) -> bytes:
    """versions.xml: `reports.core.junit`'s file, each failure's type naming its class (``ClaimFails.sequence``)
    and a ``severity`` property beside the verdict, so a CI dashboard can sort failures by what they do."""
    return junit.junit_xml(rows, suite="deferlab versions", not_run="skipped")


def step_summary(
    doc: dict[str, Any], statements: dict[str, dict[str, str]], regressions: list[dict[str, str]], baseline: str | None
) -> str:
    """What ``$GITHUB_STEP_SUMMARY`` gets: `summary_markdown` (the summary and the verdict table)."""
    return "\n".join(summary_markdown(doc, statements, regressions, baseline)) + "\n"


def write(
    out: Path,
    doc: dict[str, Any],
    statements: dict[str, dict[str, str]],
    regressions: list,
    *,
    baseline: str | None = None,
    junit_file: Path | None = None,
    log: TextIO | None = None,
) -> None:
    """versions.json, versions.md, versions.xml (JUnit), versions.png, families.md and findings.md/json into
    ``out``, atomically as a whole; then
    ``junit_file`` and, under GitHub Actions, the summary appended to ``$GITHUB_STEP_SUMMARY``. ``baseline``: the
    versions baseline compared against (None: none was)."""
    groups = failure_groups(doc, statements)
    full = {**doc, "severity": severity_of(doc), "failure_groups": groups, "baseline": baseline,
            "regressions": regressions}  # fmt: skip
    xml = junit_bytes(junit_rows(doc, statements, regressions))
    found = findings(doc, groups)
    with staged_directory(out) as stage:
        write_text_atomic(stage / "versions.json", json.dumps(full, indent=1) + "\n")
        write_bytes_atomic(stage / "versions.xml", xml)
        grid_png(doc, stage / "versions.png")
        strips = pictures.video_strips(doc, stage)
        finding_outputs.write(doc, found, stage, "versions.json")  # pictures, reproducers, findings.json/md
        write_text_atomic(stage / "versions.md", markdown(doc, statements, regressions, baseline, strips, found))
        write_text_atomic(stage / "families.md", families_table.markdown(doc))
    if junit_file is not None:
        write_bytes_atomic(junit_file, xml)
    if summary.append_step_summary(step_summary(doc, statements, regressions, baseline)) is not None and log:
        print("[deferlab] versions: summary appended to $GITHUB_STEP_SUMMARY", file=log, flush=True)


def stdout_text(out: Path, fmt: str) -> str:
    """The written file ``fmt`` names (`FILES`), for stdout."""
    return (Path(out) / FILES[fmt]).read_text()
