"""Baselines carry each failing cell's severity class (issue 32 item 1, semantics §21.3), and a cell failing in
both runs whose class got worse regresses when signatures gate (ci profile, strict), else it is a note."""

from __future__ import annotations

import json
from pathlib import Path

from deferlab.reports.core import baseline as core_baseline
from deferlab.reports.report.regressions import compare_claims, make_baseline
from deferlab.reports.versions import gate

TOWER = "AssertionError: [RGBA] 12x10: sglang (served): 40 of 360 values unexplained (up to 255 levels off)"
CRASH = "IndexError: index 3 is out of bounds for axis 0 with size 3"


def _report(evidence: str) -> dict:
    row = {"id": "C14", "policy": "qwen3-vl:SGLang", "verdict": "fails", "evidence": evidence}
    return {"claims": [row], "claims_profile": "ci", "steps": []}


def test_a_report_baseline_keeps_the_class_and_reads_it_back(tmp_path: Path) -> None:
    base = make_baseline(_report(TOWER))
    assert base.severities == {"qwen3-vl:SGLang": {"C14": "tower-input"}}
    core_baseline.save(tmp_path / "b.json", base)
    assert json.loads((tmp_path / "b.json").read_text())["severities"] == base.severities
    assert core_baseline.load(tmp_path / "b.json", "report").severities == base.severities


def test_a_worse_class_regresses_when_gated_and_is_a_note_otherwise() -> None:
    base = make_baseline(_report(TOWER))
    regs, _ = compare_claims(_report(CRASH), base, strict=True)
    assert [(r["kind"], r["baseline"], r["current"]) for r in regs if r["kind"] == "severity"] == [
        ("severity", "tower-input", "crash")
    ]
    regs, notes = compare_claims(_report(CRASH), base, strict=False)
    assert not [r for r in regs if r["kind"] == "severity"]
    assert any("fails worse: tower-input -> crash (not gated" in n for n in notes)
    regs, notes = compare_claims(_report(TOWER), base, strict=True)  # the same class: nothing
    assert regs == [] and not any("fails worse" in n for n in notes)


def test_the_versions_baseline_of_the_example_classes_its_failing_cells() -> None:
    doc = json.loads(
        (Path(__file__).resolve().parents[2] / "reports/example/versions-newest/versions.json").read_text()
    )
    base = gate.updated(None, doc)
    assert base.severities["internvl:0.5.23"]["C13"] == "sequence"
    failing = {(w, c) for w, per in base.cells.items() for c, v in per.items() if v == "fails"}
    assert {(w, c) for w, per in base.severities.items() for c in per} <= failing
    worse_doc = json.loads(json.dumps(doc))
    worse_doc["severity"]["internvl:0.5.23"]["C13"] = "crash"
    assert gate.worse(worse_doc, base) == [("internvl:0.5.23", "C13", "sequence", "crash")]
    assert gate.worse(doc, base) == []
