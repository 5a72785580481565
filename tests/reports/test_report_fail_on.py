"""deferlab report --fail-on (semantics §21): a failing claim of a named severity class exits 1; checked first."""

from __future__ import annotations

import pytest

from deferlab.reference.system.impact import parse_fail_on
from deferlab.reports.report import run


def _report(*rows: dict) -> dict:
    return {"regressions": [], "steps": [], "claims": list(rows)}


C3 = {"id": "C3", "policy": "PR_33921", "verdict": "fails",
      "evidence": "AssertionError: [mean 0.5] 205 of 256 levels differ in FP32, 0 after BF16"}  # fmt: skip
C11 = {"id": "C11", "policy": "SGLANG", "verdict": "fails", "evidence": "IndexError: index 3 is out of bounds"}


def test_a_named_class_present_exits_1_and_names_the_cell() -> None:
    found = run.failing_classes(_report(C3, C11), parse_fail_on("crash"))
    assert [(c, p) for c, p, _ in found] == [("C11", "SGLANG")]
    assert run.exit_status(_report(C3, C11), parse_fail_on("crash")) == run.EXIT_REGRESSION


def test_a_class_not_present_leaves_the_status_alone() -> None:
    assert run.failing_classes(_report(C3), parse_fail_on("crash,sequence")) == []
    assert run.exit_status(_report(C3), parse_fail_on("crash,sequence")) == 0
    assert run.exit_status(_report(C3, C11)) == 0  # no --fail-on: failing claims never gate the report


def test_an_unknown_class_is_refused_at_the_door(tmp_path, capsys: pytest.CaptureFixture) -> None:
    from deferlab.reports import cli

    assert cli.main(["report", "--fail-on", "bad", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["deferlab: error: --fail-on 'bad': unknown class 'bad'; accepted: a comma list of crash, sequence, "
                   "tower-input, float32-only, cost"]  # fmt: skip
    assert not (tmp_path / "r").exists()  # refused before any step
