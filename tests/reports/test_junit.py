"""``reports.core.junit`` and ``reports.core.summary``: one JUnit testcase per (claim, system), the CI job summary."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from deferlab.reports.core import junit, summary

ROWS = [
    {"id": "C1", "statement": "gate = byte rule", "policy": "SGLANG", "verdict": "holds", "evidence": "ok"},
    {
        "id": "C3",
        "statement": "scale/bias == eager",
        "policy": "SGLANG",
        "verdict": "fails",
        "evidence": "0.5/0.5 differs. AssertionError: 205 of 256 levels differ in FP32",
        "counterexample": [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]],
    },
    {
        "id": "C4",
        "statement": "eager == deferred",
        "policy": "SGLANG",
        "verdict": "n/a",
        "evidence": "no deferred path",
    },
    {"id": "C9", "statement": "IPC counts", "policy": "SGLANG", "verdict": "not-run", "evidence": ""},
    {
        "id": "C10",
        "statement": "stable",
        "policy": "SGLANG",
        "verdict": "holds-with-caveat",
        "evidence": "not monotone",
    },
]


def test_one_testcase_per_claim_and_system_with_failures_skips_and_errors(tmp_path: Path) -> None:
    """fails -> <failure> carrying the counterexample; n/a -> <skipped>; not-run -> <error>; counts add up."""
    path = junit.write_junit(ROWS + [{**ROWS[1], "policy": "RELEASED"}], tmp_path / "j.xml")
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert {k: suite.get(k) for k in ("tests", "failures", "skipped", "errors")} == {
        "tests": "6",
        "failures": "2",
        "skipped": "1",
        "errors": "1",
    }
    cases = {(c.get("classname"), c.get("name").split()[0]): c for c in suite.iter("testcase")}
    assert len(cases) == 6  # C3 twice: once per system
    c3 = cases[("deferlab.SGLANG", "C3")].find("failure")
    assert c3 is not None and c3.get("message") == "AssertionError: 205 of 256 levels differ in FP32"
    assert "counterexample: [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]" in (c3.text or "")
    assert cases[("deferlab.SGLANG", "C4")].find("skipped") is not None
    assert cases[("deferlab.SGLANG", "C9")].find("error") is not None
    caveat = cases[("deferlab.SGLANG", "C10")]
    assert caveat.find("failure") is None and caveat.find("system-out").text == "not monotone"
    assert cases[("deferlab.RELEASED", "C3")].find("failure") is not None


def test_system_and_note_name_the_code_and_the_change() -> None:
    """``system`` replaces the policy label (a release's name); a row's ``note`` opens its message."""
    rows = [{**ROWS[1], "note": "newly failing (BASE holds)"}]
    root = ET.fromstring(junit.junit_xml(rows, system="sglang-0.5.22"))
    case = root.find("testsuite/testcase")
    assert case.get("classname") == "deferlab.sglang-0.5.22"
    assert case.find("failure").get("message").startswith("newly failing (BASE holds): AssertionError")


def test_step_summary_appends_only_when_github_sets_it(tmp_path: Path) -> None:
    """Unset: nothing written, None; set: appended (never replaced), one trailing newline ensured."""
    assert summary.append_step_summary("# x", env={}) is None
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    assert summary.append_step_summary("# deferlab", env={summary.ENV: str(target)}) == target
    summary.append_step_summary("| a |\n", env={summary.ENV: str(target)})
    assert target.read_text() == "earlier step\n# deferlab\n| a |\n"
