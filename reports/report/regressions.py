"""The report against its baseline (``reports/baseline.json``): what gates (exit 1), what is only shown.

Claims go through the one comparison of two runs (`reports.core.diff`, scope ``baseline``): any change of a
verdict regresses (``not-run`` included: a lost check is a change), and a claim failing in both that fails in
a new way regresses only when both searches ran under the derandomized ``ci`` profile and the run is strict
(``--strict`` or ``DEFERLAB_STRICT=1``; `diff.signatures_gated`). Exact sweep counters regress on any change:
they are deterministic, so a change is a behaviour change. Benchmark ratios never gate: wall times on a shared
machine swing 2-3x, so a ratio past its threshold is a note, and the exit status never depends on timing. What
cannot be compared (a step skipped, another config or grid) is a note too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deferlab.reference.system.signatures import signature_set
from deferlab.reports.core import baseline as baselines
from deferlab.reports.core.baseline import Baseline
from deferlab.reports.core.diff import DERANDOMIZED, Cell, diff, regressions, signatures_gated
from deferlab.reports.core.severity import severity
from deferlab.reports.report import benchmarks

DEFAULT_BASELINE = Path(__file__).resolve().parents[1] / "baseline.json"
Found = tuple[list[dict[str, Any]], list[str]]  # (regressions, notes)


def claim_cells(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Cell]:
    """(claim, column) -> its verdict and failure signature set, what `reports.core.diff` compares."""
    return {(str(r["id"]), str(r["policy"])): Cell(str(r["verdict"]), frozenset(signature_set(r))) for r in rows}


def make_baseline(report: dict[str, Any], previous: Baseline | None = None) -> Baseline:
    """The baseline a report implies (schema 2); benchmark ratios carry over from ``previous`` when it has none."""
    benches = {
        f"{b['name']}::{key}": benchmarks.ratio_spec(key, value)
        for b in report.get("benchmarks", [])
        for key, value in b.get("ratios", {}).items()
    }
    if not benches and previous is not None:
        benches = dict(previous.meta.get("benchmarks", {}))
    meta = {
        "from_report": report.get("generated_at"),
        "config": report.get("config", {}).get("media_proc_cfg"),
        "sweep_grid": report.get("sweep_grid"),
        "sweeps": {s["name"]: dict(s["key_counters"]) for s in report.get("sweeps", []) if "key_counters" in s},
        "benchmarks": benches,
    }
    profile = report.get("claims_profile") or report.get("profile")
    out = Baseline.of("report", claim_cells(report.get("claims", [])), profile=profile, meta=meta)
    for r in report.get("claims", []):  # each failing cell's class (semantics §21.3), gated when it gets worse
        if label := severity(r):
            out.severities.setdefault(str(r["policy"]), {})[str(r["id"])] = label
    return out


def load_baseline(path: str | Path) -> Baseline:
    """A report baseline of either schema; ValueError naming the file and the problem."""
    return baselines.load(Path(path), "report")


def _regression(kind: str, name: str, before: Any, now: Any, detail: str) -> dict[str, Any]:
    return {"kind": kind, "name": name, "baseline": before, "current": now, "detail": detail}


def _status(report: dict[str, Any], name: str) -> str | None:
    return next((s.get("status") for s in report.get("steps", []) if s.get("name") == name), None)


def compare_claims(report: dict[str, Any], base: Baseline, *, strict: bool = False) -> Found:
    """Every baseline cell whose verdict changed, and (gated or as notes) the new signatures of a claim failing in
    both; a signature gone is a note. A baseline pinning no signature set compares verdicts only."""
    if _status(report, "properties") == "skipped":
        return [], ["claims not compared: the properties step was skipped"]
    before = base.as_cells()
    after = {k: c if base.signatures else Cell(c.verdict) for k, c in claim_cells(report["claims"]).items()}
    changes = diff(before, {k: c for k, c in after.items() if k in before})  # a new column is no change
    now = report.get("claims_profile")
    gated = signatures_gated(now, base.profile, strict)
    gating = {c.name for c in regressions(changes, scope="baseline", gated=gated)}
    why = "the search is random under this profile" if not (now == base.profile and now in DERANDOMIZED) else (
        "pass --strict or DEFERLAB_STRICT=1 to gate it")  # fmt: skip
    regs: list[dict[str, Any]] = []
    notes: list[str] = []
    for c in changes:
        where = f"{c.subject} under {c.where}"
        if c.kind == "failing differently":
            for sig in c.new:
                if c.name in gating:
                    regs.append(_regression("signature", c.name, None, sig, f"{where} fails in a new way: {sig}"))
                else:
                    notes.append(f"{where} fails in a new way (not gated: {why}): {sig}")
        elif c.name in gating:
            regs.append(_regression("claim", c.name, c.before, c.after, f"verdict {c.before} -> {c.after}"))
        notes += [f"change: {where} no longer fails this way: {sig}" for sig in c.gone]
    classes: dict[str, dict[str, str | None]] = {}
    for r in report["claims"]:
        classes.setdefault(str(r["policy"]), {})[str(r["id"])] = severity(r)
    for policy, claim, was, now_class in base.worse(classes):  # a tower-input that became a crash, say
        if gated:
            regs.append(
                _regression("severity", f"{claim}/{policy}", was, now_class, f"fails worse: {was} -> {now_class}")
            )
        else:
            notes.append(f"{claim} under {policy} fails worse: {was} -> {now_class} (not gated: {why})")
    return regs, notes


def compare_sweeps(report: dict[str, Any], base: Baseline) -> Found:
    """Every exact sweep counter that differs from the baseline or is missing (same config and grid only)."""
    if _status(report, "sweeps") == "skipped":
        return [], ["sweeps not compared: step skipped"]
    meta = base.meta
    if meta.get("config") is not None and meta["config"] != report.get("config", {}).get("media_proc_cfg"):
        return [], ["sweeps not compared: the baseline was made with another config"]
    if meta.get("sweep_grid") is not None and meta["sweep_grid"] != report.get("sweep_grid"):
        return [], [f"sweeps not compared: baseline grid {meta['sweep_grid']} != {report.get('sweep_grid')}"]
    pinned = dict(meta.get("sweeps", {}))
    notes = []
    if _status(report, "sweeps:geometry") == "skipped":  # skipped on purpose (--skip, a missing extra): not lost
        pinned = {k: v for k, v in pinned.items() if not k.startswith("geometry/")}
        notes.append("C13 geometry counters not compared: the sweeps:geometry step was skipped")
    current = {s["name"]: s.get("key_counters", {}) for s in report.get("sweeps", [])}
    regs = []
    for name, counters in sorted(pinned.items()):
        now = current.get(name)
        if now is None:
            regs.append(_regression("sweep", name, counters, None, "sweep missing"))
            continue
        for counter, old in sorted(counters.items()):
            new = now.get(counter)
            if new != old:
                change = f"{counter} {old} -> {new} ({'+' if (new or 0) >= old else ''}{(new or 0) - old})"
                regs.append(_regression("sweep", f"{name}:{counter}", old, new, change))
    return regs, notes


def benchmark_notes(report: dict[str, Any], base: Baseline) -> list[str]:
    """Each baseline ratio past its threshold, or not measured: shown, never gated (`benchmarks.past`)."""
    if _status(report, "bench") in (None, "skipped"):
        return ["benchmarks not compared: step skipped (they never gate; run them with --bench)"]
    current = {f"{b['name']}::{k}": v for b in report.get("benchmarks", []) for k, v in b.get("ratios", {}).items()}
    notes = []
    for key, spec in sorted(base.meta.get("benchmarks", {}).items()):
        new = current.get(key)
        if new is None:
            notes.append(f"benchmark ratio {key} not measured in this run")
        elif benchmarks.past(spec, new):
            old = float(spec["value"])
            notes.append(f"benchmark ratio {key} {old:.3g} -> {new:.3g}, past its threshold (never gated)")
    return notes


def compare(report: dict[str, Any], base: Baseline, *, strict: bool = False) -> Found:
    """(regressions, notes) of ``report`` against ``base``."""
    claim_regs, claim_notes = compare_claims(report, base, strict=strict)
    sweep_regs, sweep_notes = compare_sweeps(report, base)
    return claim_regs + sweep_regs, claim_notes + sweep_notes + benchmark_notes(report, base)
