"""report.md: the findings, a one-screen summary, the verdict table, then the figures inline, then the details.

Plain GitHub-flavoured markdown; figures are referenced by relative file name
so the directory can be moved or attached to a CI run as a whole. A reviewer
reads the findings and the summary first (what ran, what fails, what changed), so they fit one
screen; each distinct failure is then one entry under *Details* listing every
column it applies to (`reports.core.grouping`), and no text is cut anywhere without
its full text beside it in a ``<details>`` block. A failing cell of the verdict table names its severity class
(semantics §21: `reference.system.impact.classify` of the row's failure, evidence and signatures), as versions.md
does; the findings the failing rows make (one per root cause, worst first, `reports.findings.fromreport`) lead it.
"""

from __future__ import annotations

import re
from typing import Any

from deferlab.reference.system.systems import ENGINES
from deferlab.reports.core import grouping
from deferlab.reports.core.claims import VERDICT_CELL, stand_ins_by_kind
from deferlab.reports.core.severity import severity
from deferlab.reports.findings.fromreport import section as findings_section
from deferlab.reports.report import sections
from deferlab.reports.report.sections import ERROR_CELL, cut_errors, in_full, short
from deferlab.reports.report.sections import esc as _esc
from deferlab.reports.report.served.render import geometry_section, served_section

STATEMENT_CELL = 140  # characters of a statement in the verdict table


def verdict_table(claims: list[dict[str, Any]]) -> list[str]:
    """Claims as rows, policies as columns ("–": the results carry no row for that pair; required pairs are never
    blank); statements cut in their cell are given in full in a ``<details>`` block under the table."""
    policies: list[str] = []
    for r in claims:
        if r["policy"] not in policies:
            policies.append(r["policy"])
    rows: dict[str, dict[str, Any]] = {}
    for r in claims:  # a failure claims.toml does not document is marked new (`reports.core.claims.new_signatures`)
        new = " (**new**)" if r.get("new_signatures") else ""
        label = f" ({found})" if (found := severity(r)) else ""
        rows.setdefault(r["id"], {"statement": r["statement"]})[r["policy"]] = (
            VERDICT_CELL.get(r["verdict"], r["verdict"]) + label + new
        )
    lines = ["| claim | statement | " + " | ".join(policies) + " |", "|---|---|" + "---|" * len(policies)]
    cut = []
    for cid, row in rows.items():
        cells = [row.get(p, "–") for p in policies]
        lines.append(f"| {cid} | {short(row['statement'], STATEMENT_CELL)} | " + " | ".join(cells) + " |")
        if len(_esc(row["statement"])) > STATEMENT_CELL:
            cut.append((cid, row["statement"]))
    return lines + in_full("statements cut above, in full", cut)


def _regressions(report: dict[str, Any]) -> list[str]:
    regs = report.get("regressions", [])
    if report.get("baseline") is None:
        return ["No baseline compared."]
    if not regs:
        return [f"No regression against `{report['baseline']}`."]
    lines = [f"**{len(regs)} regression(s)** against `{report['baseline']}`:", "", "| kind | what | baseline | now |"]
    lines.append("|---|---|---|---|")
    for r in regs:
        lines.append(f"| {r['kind']} | {_esc(r['name'])} | {_esc(r['baseline'])} | {_esc(r['current'])} |")
    return lines


def _unlabelled(text: str, label: str) -> str:
    """``text`` with the column's own name (a policy such as ``RELEASED``, as C14/C15 name the served path)
    replaced, so the same flaw under two policies has one signature."""
    if not label:
        return text
    return re.sub(rf"(?<![A-Za-z0-9_]){re.escape(label)}(?![A-Za-z0-9_])", "<column>", text)


def _grouped(claims: list[dict[str, Any]], verdict: str) -> list[dict[str, Any]]:
    rows = [{**r, "verdict": "fails"} for r in claims if r.get("verdict") == verdict]
    entries = grouping.failure_entries(rows, lambda r: str(r.get("policy", "")))
    for e in entries:
        e["signature"] = grouping.failure_signature(_unlabelled(e["evidence"], e["where"]))
    return grouping.group_failures(entries)


def failure_groups(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """report.json's ``failure_groups``: the failing (claim, column) rows grouped by (claim, failure signature),
    each group listing every column (policy, ``SGLANG``, ``VLLM``) it applies to, with every member's full text
    (`reports.core.grouping.group_failures`; a column's own name in the evidence does not split a group)."""
    return _grouped(claims, "fails")


def _statements(claims: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {r["id"]: {"statement": str(r.get("statement") or "")} for r in claims}


def _claim_details(claims: list[dict[str, Any]], groups: list[dict[str, Any]] | None = None) -> list[str]:
    """One entry per distinct failure (then per distinct caveat), each naming every column it applies to and
    carrying its full text in a ``<details>`` block."""
    groups = failure_groups(claims) if groups is None else groups
    stmts = _statements(claims)
    lines = grouping.markdown_groups(groups, stmts) if groups else ["No claim fails."]
    caveats = _grouped(claims, "holds-with-caveat")
    if caveats:
        lines += ["", "Holds with a caveat:", "", *grouping.markdown_groups(caveats, stmts)]
    return lines


ENGINE_TITLES = {name: facts.display for name, facts in ENGINES.items()}


def _one_system(system: dict[str, Any], title: str) -> str:
    if "processor" in system:  # vLLM's describe(): which image processor its Kimi-K3 path serves with
        served = system["processor"] or "the checkpoint's own remote-code processor (modelled by the oracle)"
        return (
            f"**System under test: real {title} `{system.get('system')}`**, serving Kimi-K3 images with "
            f"`{served}` after its input parser. Its claim verdicts below are findings about that code."
        )
    kinds = stand_ins_by_kind(system)
    where = {"wheel": "released wheel", "checkout": "source checkout", "installed": "installed package"}
    commit = f", commit `{system['commit']}`" if system.get("commit") else ""
    return (
        f"**System under test: real {title} `{system.get('version') or system.get('system')}`** "
        f"({where.get(system.get('kind'), system.get('kind') or 'loaded')} `{_esc(system.get('spec', ''))}`{commit}). "
        f"Its claim verdicts below are findings about that code, not checks of deferlab's model; imports {title} "
        "needs but this machine lacks were stood in for "
        f"({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items())) or 'none'}; each listed in report.json)."
    )


def _engines(report: dict[str, Any]) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(engine, spec, what ran or None: it could not be loaded) per real engine the report names in ``impl``
    (``sglang:SPEC+vllm:SPEC``); an older report's one ``system`` stands for its first engine."""
    engines = [p.split(":", 1) for p in str(report.get("impl") or "").split("+") if p.split(":", 1)[0] in ENGINE_TITLES]
    found = dict(report.get("systems") or {})
    if not found and report.get("system") and engines:
        found = {engines[0][0]: report["system"]}
    return [(e, spec, found.get(e)) for e, spec in engines]


def _system(report: dict[str, Any]) -> list[str]:
    """Which code the claims ran on: real SGLang and/or vLLM (version, where from, commit, stand-ins) or the model."""
    out = []
    for engine, spec, found in _engines(report):
        title = ENGINE_TITLES[engine]
        if found:
            out += [_one_system(found, title), ""]
        else:
            out += [f"**System under test: {title} `{spec}`, which could not be loaded** (see Steps).", ""]
    return out


def _ran_on(claims: list[dict[str, Any]]) -> list[str]:
    """Per claim and column: did its evidence run on real code, on the model, or partly modelled (and which parts)."""
    rows = [r for r in claims if r.get("ran_on") and r.get("verdict") not in ("not-run",)]
    if not rows or all(r["ran_on"] == "deferlab's model" for r in rows):
        return ["Every verdict above ran on deferlab's model (`impl/`).", ""] if rows else []
    lines = ["Where each verdict's evidence ran:", "", "| claim | column | ran on |", "|---|---|---|"]
    lines += [f"| {r['id']} | {r['policy']} | {_esc(r['ran_on'])} |" for r in rows]
    return [*lines, ""]


def _config_scope(config: dict[str, Any]) -> list[str]:
    """What a config given on the command line reaches (the claim tests draw their own configs)."""
    source = str(config.get("source", ""))
    if source.startswith("preset kimi-k3"):
        return []
    claims = (
        "and the served-vs-trained claims C13-C15 (the other claim tests draw their own configs)"
        if source.startswith("checkpoint")
        else "; the claim tests run under the suite's own configs (the kimi-k3 profile and what each test draws: "
        "only --checkpoint hands the suite a config)"
    )
    return [
        f"Config `{config.get('name')}` ({_esc(config.get('source'))}) drives the sweeps, C13's exhaustive geometry, "
        f"the skew table {claims}.",
        "",
    ]


SUMMARY_CLAIMS = 15  # failing claims listed one per line in the summary (past it: counted, one line)
SUMMARY_REGRESSIONS = 3  # regressions named in the summary (all are under *Regressions*)


def _brief_system(system: dict[str, Any] | None, title: str, spec: str) -> str:
    """One engine in a few words: version, where it came from, commit (or that it could not be loaded)."""
    if not system:
        return f"{title} `{spec}` (could not be loaded)"
    if "processor" in system:
        return f"{title} `{system.get('version') or system.get('system')}`"
    where = {"wheel": "wheel", "checkout": "checkout", "installed": "installed"}.get(system.get("kind"), "loaded")
    commit = f", commit `{str(system['commit'])[:12]}`" if system.get("commit") else ""
    return f"{title} `{system.get('version') or system.get('system')}` ({where} `{system.get('spec', spec)}`{commit})"


def system_line(report: dict[str, Any]) -> str:
    """The system under test in one line: deferlab's model and its policy columns, or the real engines that ran."""
    engines = _engines(report)
    if engines:
        return ", ".join(_brief_system(found, ENGINE_TITLES[e], spec) for e, spec, found in engines)
    impl = str(report.get("impl") or "deferlab")
    columns = list(dict.fromkeys(str(r["policy"]) for r in report.get("claims", [])))
    what = "deferlab's model (`impl/`)" if impl == "deferlab" else f"implementation `{impl}`"
    return f"{what}, {len(columns)} policy column(s): {', '.join(columns) or 'none'}"


def _baseline_line(report: dict[str, Any]) -> str:
    regs = report.get("regressions", [])
    if report.get("baseline") is None:
        return "no baseline compared"
    if not regs:
        return f"nothing changed against the baseline `{report['baseline']}`"
    first = "; ".join(
        f"{r['kind']} `{_esc(r['name'])}` {_esc(r['baseline'])} -> {_esc(r['current'])}"
        for r in regs[:SUMMARY_REGRESSIONS]
    )
    more = f"; {len(regs) - SUMMARY_REGRESSIONS} more" if len(regs) > SUMMARY_REGRESSIONS else ""
    return f"**{len(regs)} regression(s)** against `{report['baseline']}` (exit 1): {first}{more} (see *Regressions*)"


def _steps_line(report: dict[str, Any]) -> str:
    steps = report.get("steps", [])
    failed = [s["name"] for s in steps if s["status"] == "failed"]
    skipped = [s["name"] for s in steps if s["status"] == "skipped"]
    head = f"**{len(failed)} failed** ({', '.join(failed)}; exit 3, see *Steps*)" if failed else "none failed"
    return f"{len(steps)} step(s): {head}" + (f", {len(skipped)} skipped" if skipped else "")


def failing_claim_lines(groups: list[dict[str, Any]], statements: dict[str, dict[str, str]]) -> list[str]:
    """One line per failing claim: id, statement in short, every column it fails on, its first failure in short
    (the full texts are in the grouped entries under *Details*)."""
    per: dict[str, list[dict[str, Any]]] = {}
    for g in groups:
        per.setdefault(g["claim"], []).append(g)
    lines = []
    for cid, gs in list(per.items())[:SUMMARY_CLAIMS]:
        where = list(dict.fromkeys(w for g in gs for w in g["where"]))
        stmt = statements.get(cid, {}).get("statement", "")
        others = f" (+{len(gs) - 1} other failure(s))" if len(gs) > 1 else ""
        failure = grouping.short(gs[0]["failure"], 100).replace("`", "'")
        brief = f" ({grouping.short(stmt, 70)})" if stmt else ""
        lines.append(f"  - **{cid}**{brief} fails on {', '.join(where)}: `{failure}`{others}")
    if len(per) > SUMMARY_CLAIMS:
        lines.append(f"  - and {len(per) - SUMMARY_CLAIMS} more failing claim(s) under *Details*")
    return lines


def _new_line(claims: list[dict[str, Any]]) -> list[str]:
    """One summary line naming the failing cells whose signatures claims.toml does not document (none: nothing)."""
    new = [f"{r['id']} on {r['policy']}" for r in claims if r.get("new_signatures")]
    return [f"- **Failing in a new way** (not in claims.toml; see *Details*): {', '.join(new)}."] if new else []


def summary_markdown(report: dict[str, Any], groups: list[dict[str, Any]] | None = None) -> list[str]:
    """The one-screen summary (at most ~25 lines): the system under test, the run, each failing claim, what
    changed against the baseline. What a reviewer reads first, and what the CI job summary shows."""
    groups = failure_groups(report.get("claims", [])) if groups is None else groups
    failing = failing_claim_lines(groups, _statements(report.get("claims", [])))
    head = f"**{len({g['claim'] for g in groups})} failing claim(s)**, one entry per failure under *Details*:"
    return [
        "## Summary",
        "",
        f"- System under test: {system_line(report)}.",
        f"- Run: profile `{report.get('profile')}`, config `{report.get('config', {}).get('name')}`; "
        f"{_steps_line(report)}.",
        f"- {head}" if failing else "- No claim fails.",
        *failing,
        *_new_line(report.get("claims", [])),
        f"- Against the baseline: {_baseline_line(report)}.",
    ]


def render_markdown(report: dict[str, Any]) -> str:
    """The whole report.md."""
    groups = failure_groups(report["claims"])
    out = [
        f"# deferlab report, {report['generated_at']}",
        "",
        *findings_section(report),
        *summary_markdown(report, groups),
        "",
        *_system(report),
        *_config_scope(report["config"]),
        "## Claim verdicts",
        "",
        *verdict_table(report["claims"]),
        "",
        *_ran_on(report["claims"]),
        "## Regressions",
        "",
        *_regressions(report),
        "",
        "## Figures",
        "",
    ]
    for fig in report.get("figures", []):
        out += [f"### {fig['title']}", "", fig["caption"], "", f"![{fig['title']}]({fig['file']})", ""]
    out += ["## Details", "", "### Failing claims: one entry per distinct failure", ""]
    out += [*_claim_details(report["claims"], groups), "", *sections.new_signatures(report["claims"])]
    out += ["### Served vs trained (skew table)", "", *served_section(report.get("served")), ""]
    out += ["### C13 exhaustive: every size's geometry against the oracle", "", *geometry_section(report["sweeps"]), ""]
    out += [
        "### Sweeps",
        "",
        f"Decisions from `{report.get('decision_source')}`.",
        "",
        *sections.sweeps(report["sweeps"]),
    ]
    out += ["", "### Simulator", "", *sections.sim(report["sim"]), ""]
    out += ["### Benchmarks (never gated)", "", *sections.benchmarks(report["benchmarks"]), ""]
    out += ["### Failed tests", "", *sections.failed_tests(report.get("failed_tests", [])), ""]
    out += ["### Properties", "", *sections.properties(report["properties"]), ""]
    out += ["### Steps", "", "| step | status | s | error |", "|---|---|---|---|"]
    for s in report["steps"]:
        out.append(f"| {s['name']} | {s['status']} | {s['seconds']} | {short(s.get('error') or '', ERROR_CELL)} |")
    out += in_full("errors cut above, in full", cut_errors(report["steps"], "name"))
    if report.get("notes"):
        out += ["", "### Notes", "", *[f"- {_esc(n)}" for n in report["notes"]]]
    env = report["environment"]
    out += ["", "### Environment", "", ", ".join(f"{k} {v}" for k, v in env.items()), ""]
    return "\n".join(out)


def step_summary(report: dict[str, Any]) -> str:
    """What ``$GITHUB_STEP_SUMMARY`` gets: the title, the one-screen summary and the verdict table."""
    out = [f"# deferlab report, {report['generated_at']}", "", *summary_markdown(report), ""]
    out += ["## Claim verdicts", "", *verdict_table(report["claims"])]
    return "\n".join(out) + "\n"


def junit_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """report.json's claim rows for JUnit: one testcase per (claim, column), the column naming the system, a
    failure's message naming its severity class (as versions.xml's), a regressed verdict what the baseline had."""
    regressed = {r["name"]: r for r in report.get("regressions", []) if r.get("kind") == "claim"}
    out = []
    for r in report["claims"]:
        reg = regressed.get(f"{r['id']}/{r['policy']}")
        note = [f"severity {label}"] if (label := severity(r)) else []
        note += [f"regression (baseline {reg['baseline']})"] if reg else []
        out.append({**r, "system": r["policy"], "note": "; ".join(note)})
    return out
