"""Regression gate: compare a report with the committed baseline (``reports/baseline.json``).

A regression is a *behaviour change*, never noise: a claim's verdict changed,
a failing claim fails in a new way (a failure signature its search finds now
that the baseline's set lacks: `reference.system.signatures`), an exact sweep
counter changed (the counters are deterministic, so any change means the gate
or the config changed), or a benchmark ratio fell beyond its threshold. What
cannot be compared (a step skipped on purpose, a baseline made with another
config) is listed as a note, not a regression, and so is a change that is no
regression (a signature that vanished), so the exit code only flags real
changes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deferlab.reference.system.claims import read_json_file
from deferlab.reference.system.signatures import signature_set
from deferlab.reports.report.benchmarks import DEFAULT_TOLERANCE, ratio_direction, ratio_limit, ratio_tolerance

BASELINE_SCHEMA_VERSION = 1
DEFAULT_BASELINE = Path(__file__).resolve().parents[1] / "baseline.json"


# The Hypothesis profiles whose claim searches are derandomized (``properties.plugin.register_profiles``): only
# there is a signature set the same on every run of the same code. ``thorough`` is not: its 5,000 examples are
# drawn at random, like ``dev``'s 30.
DERANDOMIZED = frozenset({"ci"})


def claim_key(row: dict[str, Any]) -> str:
    return f"{row['id']}/{row['policy']}"


def signature_sets(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{"C12/RELEASED": [signature, ...]}`` (sorted) for every failing row: what a baseline pins of each."""
    return {claim_key(r): sorted(signature_set(r)) for r in rows if r.get("verdict") == "fails"}


def signatures_gated(current_profile: str | None, baseline_profile: str | None) -> bool:
    """Whether signature-set differences regress: both searches under one derandomized profile.

    Why only then: under ``dev`` (and ``thorough``) the search is random, so a run can meet a signature the
    baseline's run did not, or miss one it met, with no change of the code; such a difference is shown (a note),
    never gated. Under ``ci`` the same code gives the same set.
    """
    return current_profile is not None and current_profile == baseline_profile and current_profile in DERANDOMIZED


def signature_changes(
    where: str, now: set[str] | frozenset[str], before: set[str] | frozenset[str], *, gated: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """(regressions, notes) for one failing claim's signature sets: a new signature regresses when ``gated``;
    a vanished one, or any difference ungated, is a note. ``where``: "C12 under RELEASED" or the like."""
    regs, notes = [], []
    for sig in sorted(set(now) - set(before)):
        if gated:
            regs.append(
                {
                    "kind": "signature",
                    "name": where,
                    "baseline": None,
                    "current": sig,
                    "detail": f"{where} fails in a new way: {sig}",
                }
            )
        else:
            notes.append(f"{where} fails in a new way (not gated: the search is random under this profile): {sig}")
    for sig in sorted(set(before) - set(now)):
        notes.append(f"change: {where} no longer fails this way: {sig}")
    return regs, notes


def make_baseline(report: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The baseline a report implies; benchmark ratios carry over from ``previous`` when the report has none."""
    benches: dict[str, Any] = {}
    for b in report.get("benchmarks", []):
        for key, value in b.get("ratios", {}).items():
            spec = {"value": value, "tolerance": ratio_tolerance(key), "direction": ratio_direction(key)}
            if ratio_limit(key) is not None:
                spec["limit"] = ratio_limit(key)
            benches[f"{b['name']}::{key}"] = spec
    if not benches and previous:
        benches = dict(previous.get("benchmarks", {}))
    return {
        "schema_version": BASELINE_SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "from_report": report.get("generated_at"),
        "profile": report.get("profile"),
        "config": report.get("config", {}).get("media_proc_cfg"),
        "sweep_grid": report.get("sweep_grid"),
        "claims": {claim_key(r): r["verdict"] for r in report.get("claims", [])},
        "claims_profile": report.get("claims_profile") or report.get("profile"),
        "signatures": signature_sets(report.get("claims", [])),
        "sweeps": {s["name"]: dict(s["key_counters"]) for s in report.get("sweeps", []) if "key_counters" in s},
        "benchmarks": benches,
    }


def load_baseline(path: str | Path) -> dict[str, Any]:
    """Read and check a baseline file; ValueError naming the file and the problem."""
    p = Path(path)
    missing = f"baseline {str(p)!r} does not exist (make one with `deferlab baseline --from REPORT_JSON`)"
    data = read_json_file(p, "baseline", missing)
    if not isinstance(data, dict) or data.get("schema_version") != BASELINE_SCHEMA_VERSION:
        raise ValueError(f"baseline {str(p)!r} must be an object with schema_version {BASELINE_SCHEMA_VERSION}")
    for key in ("claims", "sweeps", "benchmarks", "signatures"):  # "signatures": absent in older baselines
        if not isinstance(data.get(key, {}), dict):
            raise ValueError(f"baseline {str(p)!r}: {key!r} must be an object")
    return data


def _step_status(report: dict[str, Any], name: str) -> str | None:
    for s in report.get("steps", []):
        if s.get("name") == name:
            return s.get("status")
    return None


def compare_claims(report: dict[str, Any], baseline: dict[str, Any]) -> tuple[list[dict], list[str]]:
    """Every baseline (claim, policy) whose verdict differs now (``not-run`` included: a lost check is a change),
    and, for a claim failing in both, every signature new since the baseline (`signature_changes`; a baseline
    without ``signatures`` compares verdicts only)."""
    if _step_status(report, "claims") == "skipped":
        return [], ["claims not compared: step skipped"]
    rows = {claim_key(r): r for r in report.get("claims", [])}
    current = {key: r["verdict"] for key, r in rows.items()}
    regs: list[dict[str, Any]] = []
    notes: list[str] = []
    for key, old in sorted(baseline.get("claims", {}).items()):
        new = current.get(key, "not-run")
        if new != old:
            regs.append(
                {"kind": "claim", "name": key, "baseline": old, "current": new, "detail": f"verdict {old} -> {new}"}
            )
    pinned = baseline.get("signatures")
    if not isinstance(pinned, dict):
        return regs, notes
    gated = signatures_gated(report.get("claims_profile") or report.get("profile"), baseline.get("claims_profile"))
    for key, before in sorted(pinned.items()):
        row = rows.get(key)
        if row is None or row.get("verdict") != "fails" or baseline.get("claims", {}).get(key) != "fails":
            continue  # a verdict change is reported above; signatures compare only between two failing runs
        cid, _, policy = key.partition("/")
        r, n = signature_changes(f"{cid} under {policy}", signature_set(row), set(before), gated=gated)
        regs += r
        notes += n
    return regs, notes


def compare_sweeps(report: dict[str, Any], baseline: dict[str, Any]) -> tuple[list[dict], list[str]]:
    """Every exact sweep counter that differs from the baseline (same config only)."""
    if _step_status(report, "sweeps") == "skipped":
        return [], ["sweeps not compared: step skipped"]
    base_cfg, cur_cfg = baseline.get("config"), report.get("config", {}).get("media_proc_cfg")
    if base_cfg is not None and base_cfg != cur_cfg:
        return [], ["sweeps not compared: the baseline was made with another config"]
    if baseline.get("sweep_grid") is not None and baseline["sweep_grid"] != report.get("sweep_grid"):
        return [], [f"sweeps not compared: baseline grid {baseline['sweep_grid']} != {report.get('sweep_grid')}"]
    current = {s["name"]: s.get("key_counters", {}) for s in report.get("sweeps", [])}
    regs = []
    for name, counters in sorted(baseline.get("sweeps", {}).items()):
        now = current.get(name)
        if now is None:
            regs.append(
                {"kind": "sweep", "name": name, "baseline": counters, "current": None, "detail": "sweep missing"}
            )
            continue
        for counter, old in sorted(counters.items()):
            new = now.get(counter)
            if new != old:
                regs.append(
                    {
                        "kind": "sweep",
                        "name": f"{name}:{counter}",
                        "baseline": old,
                        "current": new,
                        "detail": f"{counter} {old} -> {new} ({'+' if (new or 0) >= old else ''}{(new or 0) - old})",
                    }
                )
    return regs, []


def compare_benchmarks(report: dict[str, Any], baseline: dict[str, Any]) -> tuple[list[dict], list[str]]:
    """Ratios that fell (or, for ``lower_is_better``, rose) beyond their tolerance or past their stated ``limit``.

    Absolute times never gate.
    """
    if _step_status(report, "bench") in (None, "skipped"):
        return [], ["benchmarks not compared: step skipped"]
    current = {f"{b['name']}::{k}": v for b in report.get("benchmarks", []) for k, v in b.get("ratios", {}).items()}
    regs, notes = [], []
    for key, spec in sorted(baseline.get("benchmarks", {}).items()):
        old = float(spec["value"])
        tol = float(spec.get("tolerance", DEFAULT_TOLERANCE))
        lower_better = spec.get("direction") == "lower_is_better"
        new = current.get(key)
        if new is None:
            notes.append(f"benchmark ratio {key} not measured in this run")
            continue
        if spec.get("limit") is not None:  # a stated target: only missing it counts
            limit = float(spec["limit"])
            bad = new > limit if lower_better else new < limit
        else:
            bad = new > old / (1 - tol) if lower_better else new < old * (1 - tol)
        if bad:
            regs.append(
                {
                    "kind": "benchmark",
                    "name": key,
                    "baseline": old,
                    "current": new,
                    "detail": f"ratio {old:.3g} -> {new:.3g}",
                }
            )
    return regs, notes


def compare(report: dict[str, Any], baseline: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(regressions, notes) of ``report`` against ``baseline``."""
    regs: list[dict[str, Any]] = []
    notes: list[str] = []
    for fn in (compare_claims, compare_sweeps, compare_benchmarks):
        r, n = fn(report, baseline)
        regs += r
        notes += n
    return regs, notes
