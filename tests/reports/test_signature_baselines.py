"""Failure signature sets in the two baselines (``reports/baseline.json``, ``reports/versions_baseline.json``).

Why: a failing claim that fails in a new way is a behaviour change (a mutant of SGLang's
compositing inside the already-failing C12 was invisible to a verdict-only gate); a
signature that vanished is a change worth showing but no regression; and a baseline
written before the sets were recorded must still load and compare its verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deferlab.reports.core.diff import signatures_gated
from deferlab.reports.report.regressions import DEFAULT_BASELINE, compare_claims, load_baseline, make_baseline

A = "[RGBa, alpha band] AssertionError: RGBa: a fully transparent pixel is not background"
B = "[RGB, no alpha] AssertionError: RGB: an opaque pixel changed colour"


def _row(cid: str, verdict: str, sigs: list[str] | None, policy: str = "RELEASED") -> dict[str, Any]:
    row: dict[str, Any] = {"id": cid, "policy": policy, "verdict": verdict, "evidence": f"AssertionError: {cid} e"}
    if sigs is not None:
        row["signatures"] = [{"signature": s, "partition": "", "counterexample": None, "error": s} for s in sigs]
    return row


def _report(rows: list[dict[str, Any]], profile: str = "ci") -> dict[str, Any]:
    return {
        "profile": profile,
        "claims_profile": profile,
        "claims": rows,
        "steps": [{"name": "properties", "status": "ok"}],
    }


def test_the_report_baseline_carries_each_failing_claims_set() -> None:
    base = make_baseline(_report([_row("C12", "fails", [B, A]), _row("C1", "holds", [])]))
    assert base.signatures == {"RELEASED": {"C12": sorted([A, B])}} and base.profile == "ci"
    legacy = make_baseline(_report([_row("C9", "fails", None)]))  # no set recorded: the evidence's failure
    assert legacy.signatures == {"RELEASED": {"C9": ["AssertionError: C9 e"]}}


def test_a_new_signature_regresses_under_strict_and_a_vanished_one_is_a_change() -> None:
    base = make_baseline(_report([_row("C12", "fails", [A])]))
    assert compare_claims(_report([_row("C12", "fails", [A])]), base, strict=True) == ([], [])
    regs, notes = compare_claims(_report([_row("C12", "fails", [B])]), base, strict=True)
    assert regs == [
        {
            "kind": "signature",
            "name": "C12/RELEASED",
            "baseline": None,
            "current": B,
            "detail": f"C12 under RELEASED fails in a new way: {B}",
        }
    ]
    assert notes == [f"change: C12 under RELEASED no longer fails this way: {A}"]


def test_without_the_strict_switch_a_new_signature_is_shown_not_gated() -> None:
    """Under ci but not strict (the default run): the new signature is a note naming how to gate it."""
    base = make_baseline(_report([_row("C12", "fails", [A])]))
    regs, notes = compare_claims(_report([_row("C12", "fails", [A, B])]), base)
    assert regs == [] and len(notes) == 1 and "--strict" in notes[0] and B in notes[0]


def test_under_a_random_profile_a_new_signature_is_shown_not_gated() -> None:
    base = make_baseline(_report([_row("C12", "fails", [A])], profile="dev"))
    regs, notes = compare_claims(_report([_row("C12", "fails", [A, B])], profile="dev"), base, strict=True)
    assert regs == [] and len(notes) == 1 and "random" in notes[0] and B in notes[0]
    ci = make_baseline(_report([_row("C12", "fails", [A])]))  # ci now, but the current run searched under dev
    assert compare_claims(_report([_row("C12", "fails", [A, B])], profile="dev"), ci, strict=True)[0] == []
    assert not signatures_gated("thorough", "thorough", True)  # random too
    assert signatures_gated("ci", "ci", True) and not signatures_gated("ci", "ci", False)


def test_a_verdict_change_is_one_regression_not_also_a_signature_one() -> None:
    base = make_baseline(_report([_row("C12", "fails", [A])]))
    regs, notes = compare_claims(_report([_row("C12", "holds", [])]), base, strict=True)
    assert [r["kind"] for r in regs] == ["claim"] and notes == []


def test_an_old_report_baseline_loads_and_compares_verdicts_only(tmp_path: Path) -> None:
    old = {"schema_version": 1, "profile": "ci", "claims": {"C12/RELEASED": "fails"}, "sweeps": {}, "benchmarks": {}}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(old))
    base = load_baseline(path)
    assert compare_claims(_report([_row("C12", "fails", [A, B])]), base, strict=True) == ([], [])
    regs, _ = compare_claims(_report([_row("C12", "holds", [])]), base)
    assert [r["name"] for r in regs] == ["C12/RELEASED"]


def test_the_committed_schema_1_baseline_is_read() -> None:
    """reports/baseline.json (schema 1): every model cell, the signature sets of the failing ones, the ci profile,
    and what else it pins (sweep counters, benchmark ratios) as meta."""
    raw = json.loads(DEFAULT_BASELINE.read_text())
    assert raw["schema_version"] == 1
    base = load_baseline(DEFAULT_BASELINE)
    assert base.kind == "report" and base.profile == "ci"
    assert sum(len(row) for row in base.cells.values()) == len(raw["claims"])
    assert base.cells["RELEASED"]["C12"] == raw["claims"]["C12/RELEASED"] == "fails"
    assert base.signatures["RELEASED"]["C12"] == raw["signatures"]["C12/RELEASED"]
    assert base.meta["sweeps"] == raw["sweeps"] and base.meta["benchmarks"] == raw["benchmarks"]


def _run(version: str, verdicts: dict[str, str], sigs: dict[str, list[str] | None]) -> dict[str, Any]:
    rows = [_row(c, v, sigs.get(c), policy="SGLANG") for c, v in verdicts.items()]
    return {"version": version, "verdicts": verdicts, "error": None, "rows": rows, "system": None, "seconds": 1.0}
