"""report.md: the verdict table first, then the figures inline, then the details.

Plain GitHub-flavoured markdown; figures are referenced by relative file name
so the directory can be moved or attached to a CI run as a whole.
"""

from __future__ import annotations

from typing import Any

from deferlab.reports.claims import stand_ins_by_kind
from deferlab.reports.served.render import geometry_section, served_section

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
    s = _esc(text)
    return s if len(s) <= n else s[: n - 1] + "…"


def verdict_table(claims: list[dict[str, Any]]) -> list[str]:
    """Claims as rows, policies as columns ("–": the results carry no row for that pair; required pairs are never blank)."""
    policies: list[str] = []
    for r in claims:
        if r["policy"] not in policies:
            policies.append(r["policy"])
    rows: dict[str, dict[str, Any]] = {}
    for r in claims:
        rows.setdefault(r["id"], {"statement": r["statement"]})[r["policy"]] = r["verdict"]
    lines = ["| claim | statement | " + " | ".join(policies) + " |", "|---|---|" + "---|" * len(policies)]
    for cid, row in rows.items():
        cells = [VERDICT_CELL.get(row[p], row[p]) if p in row else "–" for p in policies]
        lines.append(f"| {cid} | {_short(row['statement'], 140)} | " + " | ".join(cells) + " |")
    return lines


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


def _claim_details(claims: list[dict[str, Any]]) -> list[str]:
    lines = []
    for r in claims:
        if r["verdict"] in ("fails", "holds-with-caveat"):
            lines.append(
                f"- **{r['id']} / {r['policy']}: {r['verdict']}** ({_esc(r['source'])}). {_short(r['evidence'], 600)}"
            )
            if r.get("counterexample"):
                lines.append(f"  - counterexample: `{_short(r['counterexample'], 600)}`")
    return lines or ["No claim fails."]


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
            status += f" ({_short(s['error'], 120)})"
        cells = [f"{acct[k]:,}" if isinstance(acct.get(k), int) else "" for k in SIM_KEYS]
        pct = [
            f"{change[k]:+.1f}%" if isinstance(change.get(k), (int, float)) else ""
            for k in ("ttft_p50_s", "throughput_rps")
        ]
        lines.append(f"| {s['scenario']} | {status} | " + " | ".join(cells + pct) + " |")
    return lines


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


def render_markdown(report: dict[str, Any]) -> str:
    """The whole report.md."""
    failed = [s for s in report["steps"] if s["status"] == "failed"]
    out = [
        f"# deferlab report, {report['generated_at']}",
        "",
        f"Profile `{report['profile']}`, config `{report['config']['name']}`, implementation `{report.get('impl')}`, "
        f"{len(report.get('regressions', []))} regression(s), {len(failed)} failed step(s).",
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
    out += ["## Details", "", "### Failing claims and counterexamples", "", *_claim_details(report["claims"]), ""]
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
        out.append(f"| {s['name']} | {s['status']} | {s['seconds']} | {_short(s.get('error') or '', 200)} |")
    if report.get("notes"):
        out += ["", "### Notes", "", *[f"- {_esc(n)}" for n in report["notes"]]]
    env = report["environment"]
    out += ["", "### Environment", "", ", ".join(f"{k} {v}" for k, v in env.items()), ""]
    return "\n".join(out)
