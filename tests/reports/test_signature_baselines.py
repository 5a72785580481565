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

from deferlab.reports.report import regressions
from deferlab.reports.report.regressions import compare_claims, load_baseline, make_baseline
from deferlab.reports.versions import matrix as versions

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
        "steps": [{"name": "claims", "status": "ok"}],
    }


def test_the_report_baseline_carries_each_failing_claims_set() -> None:
    base = make_baseline(_report([_row("C12", "fails", [B, A]), _row("C1", "holds", [])]))
    assert base["signatures"] == {"C12/RELEASED": sorted([A, B])} and base["claims_profile"] == "ci"
    legacy = make_baseline(_report([_row("C9", "fails", None)]))  # no set recorded: the evidence's failure
    assert legacy["signatures"] == {"C9/RELEASED": ["AssertionError: C9 e"]}


def test_a_new_signature_regresses_and_a_vanished_one_is_a_change() -> None:
    base = make_baseline(_report([_row("C12", "fails", [A])]))
    assert compare_claims(_report([_row("C12", "fails", [A])]), base) == ([], [])
    regs, notes = compare_claims(_report([_row("C12", "fails", [B])]), base)
    assert regs == [
        {
            "kind": "signature",
            "name": "C12 under RELEASED",
            "baseline": None,
            "current": B,
            "detail": f"C12 under RELEASED fails in a new way: {B}",
        }
    ]
    assert notes == [f"change: C12 under RELEASED no longer fails this way: {A}"]


def test_under_a_random_profile_a_new_signature_is_shown_not_gated() -> None:
    base = make_baseline(_report([_row("C12", "fails", [A])], profile="dev"))
    regs, notes = compare_claims(_report([_row("C12", "fails", [A, B])], profile="dev"), base)
    assert regs == [] and len(notes) == 1 and "not gated" in notes[0] and B in notes[0]
    ci = make_baseline(_report([_row("C12", "fails", [A])]))  # ci now, but the current run searched under dev
    assert compare_claims(_report([_row("C12", "fails", [A, B])], profile="dev"), ci)[0] == []
    assert not regressions.signatures_gated("thorough", "thorough")  # random too
    assert regressions.signatures_gated("ci", "ci")


def test_a_verdict_change_is_one_regression_not_also_a_signature_one() -> None:
    base = make_baseline(_report([_row("C12", "fails", [A])]))
    regs, notes = compare_claims(_report([_row("C12", "holds", [])]), base)
    assert [r["kind"] for r in regs] == ["claim"] and notes == []


def test_an_old_report_baseline_loads_and_compares_verdicts_only(tmp_path: Path) -> None:
    old = {"schema_version": 1, "profile": "ci", "claims": {"C12/RELEASED": "fails"}, "sweeps": {}, "benchmarks": {}}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(old))
    base = load_baseline(path)
    assert compare_claims(_report([_row("C12", "fails", [A, B])]), base) == ([], [])
    regs, _ = compare_claims(_report([_row("C12", "holds", [])]), base)
    assert [r["name"] for r in regs] == ["C12/RELEASED"]


def _run(version: str, verdicts: dict[str, str], sigs: dict[str, list[str] | None]) -> dict[str, Any]:
    rows = [_row(c, v, sigs.get(c), policy="SGLANG") for c, v in verdicts.items()]
    return {"version": version, "verdicts": verdicts, "error": None, "rows": rows, "system": None, "seconds": 1.0}


def test_the_versions_baseline_gates_new_signatures(tmp_path: Path) -> None:
    path = tmp_path / "versions_baseline.json"
    doc = versions.matrix([_run("0.5.23", {"C12": "fails", "C1": "holds"}, {"C12": [A], "C1": []})], "ci")
    assert doc["signatures"] == {"0.5.23": {"C12": [A]}}
    versions.write_baseline(path, doc)
    base = versions.load_baseline(path)
    assert base["0.5.23"]["C12"] == "fails" and base.signatures == {"0.5.23": {"C12": [A]}}
    assert versions.compare(doc, base) == [] and doc["signature_notes"] == []
    now = versions.matrix([_run("0.5.23", {"C12": "fails", "C1": "holds"}, {"C12": [B]})], "ci")
    assert versions.compare(now, base) == [
        {"kind": "signature", "name": "0.5.23/C12", "baseline": "fails", "current": f"fails in a new way: {B}"}
    ]
    assert now["signature_notes"] == [f"change: C12 on 0.5.23 no longer fails this way: {A}"]
    dev = versions.matrix([_run("0.5.23", {"C12": "fails", "C1": "holds"}, {"C12": [A, B]})], "dev")
    assert versions.compare(dev, base) == [] and "not gated" in dev["signature_notes"][0]


def test_an_old_versions_baseline_loads_and_keeps_unrun_releases_verdict_only(tmp_path: Path) -> None:
    path = tmp_path / "versions_baseline.json"
    old = {"schema_version": 1, "profile": "ci", "verdicts": {"0.5.22": {"C12": "fails"}, "0.5.23": {"C12": "fails"}}}
    path.write_text(json.dumps(old))
    base = versions.load_baseline(path)
    assert base.signatures == {}
    doc = versions.matrix([_run("0.5.23", {"C12": "fails"}, {"C12": [A, B]})], "ci")
    assert versions.compare(doc, base) == []  # verdicts only
    versions.write_baseline(path, doc, base)
    written = json.loads(path.read_text())
    assert written["verdicts"]["0.5.22"] == {"C12": "fails"} and written["verdicts"]["0.5.23"]["C12"] == "fails"
    assert written["signatures"] == {"0.5.23": {"C12": sorted([A, B])}}  # 0.5.22 was not rerun: verdicts only
