"""report.md's detail sections, from report.json's entries alone: the sweeps, the simulator, the benchmarks, the
slowest properties, the failed tests and the new failure signatures.

Why apart from `reports.report.render`: these are tables of one entry each; the renderer orders them. Every
cell that cuts a text has the full text beside it in a ``<details>`` block (`in_full`).
"""

from __future__ import annotations

from typing import Any

from deferlab.reports.core import grouping

ERROR_CELL = 200  # characters of an error in a table cell


def esc(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def short(text: Any, n: int = 300) -> str:
    """One table cell of at most ``n`` characters; only where the full text is given beside it (`in_full`)."""
    s = esc(text)
    return s if len(s) <= n else s[: n - 1] + "…"


def in_full(title: str, cut: list[tuple[str, Any]]) -> list[str]:
    """A ``<details>`` block holding the full text of every (label, text) a table above cut; nothing when none was."""
    return ["", *grouping.details(title, cut)] if cut else []


def cut_errors(rows: list[dict[str, Any]], key: str, field: str = "error") -> list[tuple[str, Any]]:
    """(name, full text) of each row whose ``field`` a table cell cut."""
    return [(str(r[key]), r[field]) for r in rows if len(esc(r.get(field) or "")) > ERROR_CELL]


def sweeps(sweeps: list[dict[str, Any]]) -> list[str]:
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


def sim(sim: list[dict[str, Any]]) -> list[str]:
    if not sim:
        return ["Simulator not run."]
    lines = ["| scenario | status | " + " | ".join(SIM_KEYS) + " | TTFT p50 change | throughput change |"]
    lines.append("|---|---|" + "---|" * (len(SIM_KEYS) + 2))
    for s in sim:
        res = s.get("result") or {}
        acct = res.get("accounting") or {}
        change = (res.get("latency") or {}).get("change_pct") or {}
        status = s["status"] if not res.get("skipped") else f"skipped ({esc(res['skipped'])})"
        if s.get("error"):
            status += f" ({short(s['error'], ERROR_CELL)})"
        cells = [f"{acct[k]:,}" if isinstance(acct.get(k), int) else "" for k in SIM_KEYS]
        pct = [
            f"{change[k]:+.1f}%" if isinstance(change.get(k), (int, float)) else ""
            for k in ("ttft_p50_s", "throughput_rps")
        ]
        lines.append(f"| {s['scenario']} | {status} | " + " | ".join(cells + pct) + " |")
    return lines + in_full("errors cut above, in full", cut_errors(sim, "scenario"))


def benchmarks(benches: list[dict[str, Any]]) -> list[str]:
    if not benches:
        return ["Benchmarks not run."]
    lines = ["| benchmark | median (s) | rounds | ratios |", "|---|---|---|---|"]
    for b in benches:
        ratios = ", ".join(f"{k}={v:.3g}" for k, v in b["ratios"].items())
        med = f"{b['median_s']:.4g}" if isinstance(b.get("median_s"), (int, float)) else "?"
        lines.append(f"| {esc(b['name'])} | {med} | {b.get('rounds')} | {ratios} |")
    return lines


def properties(props: list[dict[str, Any]]) -> list[str]:
    if not props:
        return ["No property outcomes recorded."]
    outcomes: dict[str, int] = {}
    for p in props:
        outcomes[p.get("outcome", "?")] = outcomes.get(p.get("outcome", "?"), 0) + 1
    lines = [", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items())), "", "| slowest | examples | outcome | s |"]
    lines.append("|---|---|---|---|")
    for p in sorted(props, key=lambda p: -(p.get("seconds") or 0))[:10]:
        lines.append(f"| {esc(p.get('name'))} | {p.get('examples')} | {p.get('outcome')} | {p.get('seconds')} |")
    return lines


def failed_tests(failed: list[dict[str, Any]]) -> list[str]:
    """Each failed or erroring test of the claim runs with its failure line, as the recorder wrote it."""
    if not failed:
        return ["No test failed."]
    lines = ["| system | test | failure |", "|---|---|---|"]
    lines += [f"| {f['system']} | {esc(f['test'])} | {short(f['message'], ERROR_CELL)} |" for f in failed]
    return lines + in_full("failure lines cut above, in full", cut_errors(failed, "test", "message"))


def new_signatures(claims: list[dict[str, Any]]) -> list[str]:
    """Each failing (claim, column) whose signatures claims.toml's pattern does not name: marked **new**."""
    rows = [r for r in claims if r.get("new_signatures")]
    if not rows:
        return []
    lines = ["Failing in a way claims.toml does not document (gated only under `--strict` with the `ci` profile):", ""]
    for r in rows:
        lines += [f"- **new** {r['id']} on `{r['policy']}`: {esc(sig)}" for sig in r["new_signatures"]]
    return [*lines, ""]
