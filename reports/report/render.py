"""report.md: a one-screen summary, the verdict table, then the figures inline, then the details.

Plain GitHub-flavoured markdown; figures are referenced by relative file name
so the directory can be moved or attached to a CI run as a whole. A reviewer
reads the summary first (what ran, what fails, what changed), so it fits one
screen; each distinct failure is then one entry under *Details* listing every
column it applies to (`reports.core.grouping`), and no text is cut anywhere without
its full text beside it in a ``<details>`` block.
"""

from __future__ import annotations

import re
from typing import Any

from deferlab.reports.core import grouping
from deferlab.reports.report.claims import stand_ins_by_kind
from deferlab.reports.report.served.render import geometry_section, served_section

VERDICT_CELL = {
    "holds": "holds",
    "fails": "**FAILS**",
    "holds-with-caveat": "holds (caveat)",
    "n/a": "n/a",
    "not-run": "not run",
}


def _esc(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _short(text: Any, n: int = 300) -> str:
    """One table cell of at most ``n`` characters; only where the full text is given beside it (`_in_full`)."""
    s = _esc(text)
    return s if len(s) <= n else s[: n - 1] + "…"


def _in_full(title: str, cut: list[tuple[str, Any]]) -> list[str]:
    """A ``<details>`` block holding the full text of every (label, text) a table above cut; nothing when none was."""
    return ["", *grouping.details(title, cut)] if cut else []


STATEMENT_CELL = 140  # characters of a statement in the verdict table


def verdict_table(claims: list[dict[str, Any]]) -> list[str]:
    """Claims as rows, policies as columns ("–": the results carry no row for that pair; required pairs are never
    blank); statements cut in their cell are given in full in a ``<details>`` block under the table."""
    policies: list[str] = []
    for r in claims:
        if r["policy"] not in policies:
            policies.append(r["policy"])
    rows: dict[str, dict[str, Any]] = {}
    for r in claims:
        rows.setdefault(r["id"], {"statement": r["statement"]})[r["policy"]] = r["verdict"]
    lines = ["| claim | statement | " + " | ".join(policies) + " |", "|---|---|" + "---|" * len(policies)]
    cut = []
    for cid, row in rows.items():
        cells = [VERDICT_CELL.get(row[p], row[p]) if p in row else "–" for p in policies]
        lines.append(f"| {cid} | {_short(row['statement'], STATEMENT_CELL)} | " + " | ".join(cells) + " |")
        if len(_esc(row["statement"])) > STATEMENT_CELL:
            cut.append((cid, row["statement"]))
    return lines + _in_full("statements cut above, in full", cut)


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


def _sweeps(sweeps: list[dict[str, Any]]) -> list[str]:
    lines = ["| sweep | key counters |", "|---|---|"]
    for s in sweeps:
        counters = ", ".join(f"{k}={v:,}" for k, v in s.get("key_counters", {}).items())
        lines.append(f"| {s['name']} | {counters} |")
    rays = [s for s in sweeps if s["kind"] == "decision_map" and any(r["flips"] > 1 for r in s.get("rays", []))]
    if rays:
        lines += ["", "Aspect rays with more than one decision flip (a monotone gate flips at most once):", ""]
        for s in rays:
            bad = [
                f"{r['ray']}: {r['flips']} flips at widths {r['first_flip_widths']}"
                for r in s["rays"]
                if r["flips"] > 1
            ]
            lines.append(f"- {s['name']}: " + "; ".join(bad))
    tok = [s for s in sweeps if s["kind"] == "tokens" and s["summary"]["sizes_over_limit"]]
    if tok:
        lines += ["", "Padded patch grids larger than in_patch_limit (the limit is applied before padding):", ""]
        for s in tok:
            m = s["summary"]
            lines.append(
                f"- in_patch_limit={s['in_patch_limit']}: {m['sizes_over_limit']:,} sizes exceed it; max "
                f"{m['max_tokens']:,} tokens at "
                f"{m['max_tokens_width']}x{m['max_tokens_height']}"
            )
    rnd = [s for s in sweeps if s["kind"] == "random_requests"]
    if rnd:
        lines += [
            "",
            "| random requests | requests | mixed | images overridden | extra payload |",
            "|---|---|---|---|---|",
        ]
        for s in rnd:
            m = s["summary"]
            lines.append(
                f"| {s['name']} | {m['requests']:,} | {m['mixed_requests']:,} | {m['disagreeing_images']:,} "
                f"| {100 * m['extra_fraction']:.1f}% |"
            )
    return lines


SIM_KEYS = (
    "requests",
    "images",
    "deferred_images",
    "shipped_payload_bytes",
    "deserialized_bytes",
    "h2d_bytes",
    "redundant_preprocess_runs",
    "allgather_padding_tokens",
)


def _sim(sim: list[dict[str, Any]]) -> list[str]:
    if not sim:
        return ["Simulator not run."]
    lines = ["| scenario | status | " + " | ".join(SIM_KEYS) + " | TTFT p50 change | throughput change |"]
    lines.append("|---|---|" + "---|" * (len(SIM_KEYS) + 2))
    for s in sim:
        res = s.get("result") or {}
        acct = res.get("accounting") or {}
        change = (res.get("latency") or {}).get("change_pct") or {}
        status = s["status"] if not res.get("skipped") else f"skipped ({_esc(res['skipped'])})"
        if s.get("error"):
            status += f" ({_short(s['error'], ERROR_CELL)})"
        cells = [f"{acct[k]:,}" if isinstance(acct.get(k), int) else "" for k in SIM_KEYS]
        pct = [
            f"{change[k]:+.1f}%" if isinstance(change.get(k), (int, float)) else ""
            for k in ("ttft_p50_s", "throughput_rps")
        ]
        lines.append(f"| {s['scenario']} | {status} | " + " | ".join(cells + pct) + " |")
    return lines + _in_full("errors cut above, in full", _cut_errors(sim, "scenario"))


ERROR_CELL = 200  # characters of an error in a table cell


def _cut_errors(rows: list[dict[str, Any]], key: str) -> list[tuple[str, Any]]:
    """(name, full error) of each row whose error a table cell cut."""
    return [(str(r[key]), r["error"]) for r in rows if len(_esc(r.get("error") or "")) > ERROR_CELL]


def _benchmarks(benches: list[dict[str, Any]]) -> list[str]:
    if not benches:
        return ["Benchmarks not run."]
    lines = ["| benchmark | median (s) | rounds | ratios |", "|---|---|---|---|"]
    for b in benches:
        ratios = ", ".join(f"{k}={v:.3g}" for k, v in b["ratios"].items())
        med = f"{b['median_s']:.4g}" if isinstance(b.get("median_s"), (int, float)) else "?"
        lines.append(f"| {_esc(b['name'])} | {med} | {b.get('rounds')} | {ratios} |")
    return lines


def _properties(props: list[dict[str, Any]]) -> list[str]:
    if not props:
        return ["No property outcomes recorded."]
    outcomes: dict[str, int] = {}
    for p in props:
        outcomes[p.get("outcome", "?")] = outcomes.get(p.get("outcome", "?"), 0) + 1
    lines = [", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items())), "", "| slowest | examples | outcome | s |"]
    lines.append("|---|---|---|---|")
    for p in sorted(props, key=lambda p: -(p.get("seconds") or 0))[:10]:
        lines.append(f"| {_esc(p.get('name'))} | {p.get('examples')} | {p.get('outcome')} | {p.get('seconds')} |")
    return lines


ENGINE_TITLES = {"sglang": "SGLang", "vllm": "vLLM"}


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


def _system(system: dict[str, Any] | None, impl: str | None, systems: dict[str, Any] | None = None) -> list[str]:
    """Which code the claims ran on: real SGLang and/or vLLM (version, where from, commit, stand-ins) or the model."""
    engines = dict(p.split(":", 1) for p in (impl or "").split("+") if p.split(":", 1)[0] in ENGINE_TITLES)
    found = dict(systems or {})
    if not found and system and engines:
        found = {next(iter(engines)): system}
    out = []
    for engine, spec in engines.items():
        title = ENGINE_TITLES[engine]
        if found.get(engine):
            out += [_one_system(found[engine], title), ""]
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


SUMMARY_CLAIMS = 15  # failing claims listed one per line in the summary (claims.toml has C1..C15)
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
    impl = str(report.get("impl") or "deferlab")
    engines = dict(p.split(":", 1) for p in impl.split("+") if p.split(":", 1)[0] in ENGINE_TITLES)
    found = dict(report.get("systems") or {})
    if not found and report.get("system") and engines:
        found = {next(iter(engines)): report["system"]}
    if engines:
        return ", ".join(_brief_system(found.get(e), ENGINE_TITLES[e], spec) for e, spec in engines.items())
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
        f"- Against the baseline: {_baseline_line(report)}.",
    ]


def render_markdown(report: dict[str, Any]) -> str:
    """The whole report.md."""
    groups = failure_groups(report["claims"])
    out = [
        f"# deferlab report, {report['generated_at']}",
        "",
        *summary_markdown(report, groups),
        "",
        *_system(report.get("system"), report.get("impl"), report.get("systems")),
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
    out += [*_claim_details(report["claims"], groups), ""]
    out += ["### Served vs trained (skew table)", "", *served_section(report.get("served")), ""]
    out += ["### C13 exhaustive: every size's geometry against the oracle", "", *geometry_section(report["sweeps"]), ""]
    out += ["### Sweeps", "", f"Decisions from `{report.get('decision_source')}`.", "", *_sweeps(report["sweeps"]), ""]
    out += ["### Simulator", "", *_sim(report["sim"]), "", "### Benchmarks", "", *_benchmarks(report["benchmarks"]), ""]
    out += [
        "### Properties",
        "",
        *_properties(report["properties"]),
        "",
        "### Steps",
        "",
        "| step | status | s | error |",
    ]
    out.append("|---|---|---|---|")
    for s in report["steps"]:
        out.append(f"| {s['name']} | {s['status']} | {s['seconds']} | {_short(s.get('error') or '', ERROR_CELL)} |")
    out += _in_full("errors cut above, in full", _cut_errors(report["steps"], "name"))
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
    regressed verdict noting what the baseline had."""
    regressed = {r["name"]: r for r in report.get("regressions", []) if r.get("kind") == "claim"}
    out = []
    for r in report["claims"]:
        reg = regressed.get(f"{r['id']}/{r['policy']}")
        note = f"regression (baseline {reg['baseline']})" if reg else ""
        out.append({**r, "system": r["policy"], "note": note})
    return out
