"""`deferlab report` on the one runner: the properties step's runs, what fails a step and what only a baseline
gates, a new failure signature shown as failing and new, benchmarks never gating, a missing extra skipping
its part in one line, ``--out`` refused before any work, the default profile and the baseline schemas.

The runner is faked where the point is how the report reads a record; one tiny real run (the model, claim
C1, profile dev: about five seconds) checks that the step runs the shipped checks and never deferlab's tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deferlab.impl import compiled
from deferlab.reference.system import extras
from deferlab.reference.system.profiles import profile
from deferlab.reference.system.systems import System
from deferlab.reports.cli import build_parser, main
from deferlab.reports.core import process, runner
from deferlab.reports.core.baseline import Baseline, save
from deferlab.reports.core.claims import load_claim_statements
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.core.runner import TestResult as Outcome  # not collected as a test class
from deferlab.reports.report import claims
from deferlab.reports.report.run import ReportOptions, run_report
from tests.reports.support import write_config

NEW = "[RGBa, alpha band] AssertionError: RGBa: a fully transparent pixel is not background"
ONLY_PROPERTIES = {"ipc", "sweeps", "served", "sim", "bench", "plots"}


def _opts(tmp: Path, **kw: Any) -> ReportOptions:
    base = {"profile": "ci", "config": profile("kimi-k3"), "config_source": "test", "out": tmp / "r", "baseline": None}
    return ReportOptions(**{**base, "skip": set(ONLY_PROPERTIES), **kw})


def _record(request: runner.Request, rows: list[dict[str, Any]], **kw: Any) -> RunRecord:
    return RunRecord(request.system, request.profile, rows=rows, strict=request.strict, wrote=True, **kw)


def _fake_run(monkeypatch: pytest.MonkeyPatch, make: Any) -> list[runner.Request]:
    """Replace the runner's `run` with ``make(request) -> RunRecord``; returns the requests it was given."""
    seen: list[runner.Request] = []

    def fake(request: runner.Request, *, work: Path | None = None, **_: Any) -> RunRecord:
        seen.append(request)
        return make(request)

    monkeypatch.setattr(runner, "run", fake)
    return seen


def _report(tmp: Path) -> dict[str, Any]:
    return json.loads((tmp / "r" / "report.json").read_text())


def test_the_properties_step_runs_the_shipped_checks_of_the_model_through_the_runner(tmp_path: Path) -> None:
    """A real run (model, C1, dev): one record, its verdicts and tests read from the results file the child wrote
    under the step's folder, every test a shipped check (``properties/claims``), none of deferlab's own tests."""
    [rec] = claims.run_claims([System()], profile="dev", strict=False, work=tmp_path, only=("C1",))
    assert rec.error is None and rec.wrote and rec.rc == 0
    assert (tmp_path / "model" / "results" / "verdicts.json").is_file() and (
        tmp_path / "model" / "pytest.log"
    ).is_file()
    assert {r["id"] for r in rec.rows} == {"C1"} and rec.tests
    assert all(name.startswith("properties/claims/") for name in rec.tests), sorted(rec.tests)[:3]
    table = {(r["id"], r["policy"]): r["verdict"] for r in claims.claim_table([rec], load_claim_statements())}
    assert table[("C1", "PR_33921")] == table[("C1", "RELEASED")] == "holds"
    assert table[("C2", "RELEASED")] == "not-run"  # not asked: shown, never silently dropped


def test_the_step_asks_the_runner_for_the_system_profile_and_strict_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``deferlab report`` (default profile ci) with DEFERLAB_STRICT=1: one request for the model, profile ci,
    strict; both engines named: one request each (``--impl`` names the model's implementation)."""
    seen = _fake_run(monkeypatch, lambda q: _record(q, []))
    monkeypatch.setenv("DEFERLAB_STRICT", "1")
    argv = ["report", "--config", str(write_config(tmp_path)), "--out", str(tmp_path / "r"), "--baseline", "none"]
    assert main([*argv, "--skip", *ONLY_PROPERTIES]) == 0
    [request] = seen
    assert request.system == System() and request.profile == "ci" and request.strict and request.nodes == ()
    assert _report(tmp_path)["strict"] is True and _report(tmp_path)["claims_profile"] == "ci"
    seen.clear()
    both = _opts(tmp_path, sglang="0.5.23", vllm="0.33.0", checked=True, profile="dev")
    assert run_report(both) == 0
    assert [q.system.key for q in seen] == ["sglang:0.5.23", "vllm:0.33.0"] and {q.profile for q in seen} == {"dev"}
    cols = {(r["id"], r["policy"]): r["verdict"] for r in _report(tmp_path)["claims"]}
    assert cols[("C1", "SGLANG")] == "not-run" and cols[("C1", "VLLM")] == "n/a" and cols[("C13", "VLLM")] == "not-run"


def test_a_run_that_recorded_nothing_fails_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that crashed before recording: the step failed with the runner's one line, every claim not-run,
    exit 3 (a report missing its verdicts is never clean)."""
    why = "the checks recorded nothing (pytest exit 4): ERROR: usage"
    _fake_run(monkeypatch, lambda q: RunRecord(q.system, q.profile, rc=4, error=why))
    assert run_report(_opts(tmp_path)) == 3
    step = {s["name"]: s for s in _report(tmp_path)["steps"]}["properties"]
    assert step["status"] == "failed" and step["error"] == f"model: {why}"
    assert {r["verdict"] for r in _report(tmp_path)["claims"]} == {"not-run"}


def _failing(request: runner.Request) -> RunRecord:
    """C12 fails under PR_33921 in a way claims.toml does not document; its test failed; a real_code one too."""
    sig = {"signature": NEW, "partition": "RGBa, alpha band", "counterexample": "RGBa 2x2", "error": NEW}
    rows = [
        {"id": "C1", "policy": "PR_33921", "verdict": "holds", "evidence": "ok"},
        {"id": "C12", "policy": "PR_33921", "verdict": "fails", "evidence": f"AssertionError: {NEW}",
         "signatures": [{**sig, "documented": False}]},
    ]  # fmt: skip
    tests = {
        "properties/claims/test_modes.py::test_claim_c12[PR_33921]": Outcome("failed", 1.0, "C12: fails, not as documented"),
        "properties/claims/test_real_stages.py::test_stage_order": Outcome("failed", 0.5, "AssertionError: order"),
        "properties/claims/test_gate.py::test_claim_c1[PR_33921]": Outcome("passed", 0.2),
    }  # fmt: skip
    return _record(request, rows, rc=1, tests=tests)


def test_a_failing_claim_test_is_a_verdict_not_a_failed_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest exit 1 because a claim's verdict differs: the step is ok (exit 0 without a baseline); the failing row
    keeps its verdict with its undocumented signature marked new (never not-run); the failed tests' lines are
    listed in report.json and report.md from the record."""
    _fake_run(monkeypatch, _failing)
    assert run_report(_opts(tmp_path)) == 0
    report = _report(tmp_path)
    assert {s["name"]: s["status"] for s in report["steps"]}["properties"] == "ok"
    [row] = [r for r in report["claims"] if (r["id"], r["policy"]) == ("C12", "PR_33921")]
    assert row["verdict"] == "fails" and row["new_signatures"] == [NEW]
    assert [(f["test"].rsplit("::", 1)[-1], f["message"]) for f in report["failed_tests"]] == [
        ("test_claim_c12[PR_33921]", "C12: fails, not as documented"),
        ("test_stage_order", "AssertionError: order"),
    ]
    md = (tmp_path / "r" / "report.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| C12 |"))  # the verdict table's row
    assert "**FAILS** (tower-input) (**new**)" in line and "not run" not in line.split("|")[3]
    assert f"- **new** C12 on `PR_33921`: {NEW}" in md and "**Failing in a new way**" in md
    assert "### Failed tests" in md and "| AssertionError: order |" in md


def test_against_a_baseline_the_changed_verdict_gates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same failing run against a baseline where C12 held under PR_33921: exit 1, the claim named; where it
    failed the same way it is no regression, and the new signature gates only with --strict."""
    _fake_run(monkeypatch, _failing)
    path = tmp_path / "b.json"
    save(path, Baseline("report", "ci", {"PR_33921": {"C1": "holds", "C12": "holds"}}))
    assert run_report(_opts(tmp_path, baseline=path)) == 1
    assert [(r["kind"], r["name"]) for r in _report(tmp_path)["regressions"]] == [("claim", "C12/PR_33921")]
    old = "[La, alpha band] AssertionError: unclear staging error for mode La"
    save(path, Baseline("report", "ci", {"PR_33921": {"C1": "holds", "C12": "fails"}}, {"PR_33921": {"C12": [old]}}))
    assert run_report(_opts(tmp_path, baseline=path)) == 0
    assert any("not gated" in n and NEW in n for n in _report(tmp_path)["notes"])
    assert run_report(_opts(tmp_path, baseline=path, strict=True)) == 1
    assert [r["kind"] for r in _report(tmp_path)["regressions"]] == ["signature"]


def test_benchmark_ratios_never_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A benchmark ratio far past its baseline's threshold, from a --bench run: a note, exit 0."""
    _fake_run(monkeypatch, lambda q: _record(q, []))
    data = {"benchmarks": [{"fullname": "b.py::t", "stats": {"median": 1.0}, "extra_info": {"speed_ratio": 0.01}}]}

    def bench(cmd: list[str], **kw: Any) -> process.Finished:
        Path(next(a.split("=", 1)[1] for a in cmd if a.startswith("--benchmark-json="))).write_text(json.dumps(data))
        return process.Finished(0, False, 0.1)

    monkeypatch.setattr(process, "run", bench)
    path = tmp_path / "b.json"
    save(path, Baseline("report", "ci", meta={"benchmarks": {"b.py::t::speed_ratio": {"value": 5.0}}}))
    skip = ONLY_PROPERTIES - {"bench"}
    assert run_report(_opts(tmp_path, baseline=path, bench=True, skip=skip)) == 0
    report = _report(tmp_path)
    assert report["regressions"] == [] and report["benchmarks"][0]["ratios"] == {"speed_ratio": 0.01}
    assert any(n.startswith("benchmark ratio b.py::t::speed_ratio 5 -> 0.01") for n in report["notes"])


def test_without_numba_its_parts_are_skipped_in_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numba missing (``pip install -e '.[test]'``): the compiled geometry sweep is skipped (its baseline counters
    a note, not lost), the checkpoint-vs-vLLM benchmark is left out of the bench run, both with one line naming
    ``deferlab[vllm]``; the compiler itself refuses with the same line; exit 0."""
    monkeypatch.setattr(extras, "installed", lambda module: module != "numba")  # reference.system.extras
    line = compiled.numba_missing()
    assert line == "needs numba (the deferlab[vllm] extra): pip install 'deferlab[vllm]'"
    with pytest.raises(compiled.CompileError, match=r"pip install 'deferlab\[vllm\]'"):
        compiled.compile_call(lambda w, h: {"new_width": w}, compiled.Call("f(w, h)", ("new_width",)), (), "f")
    _fake_run(monkeypatch, lambda q: _record(q, []))
    commands: list[list[str]] = []
    monkeypatch.setattr(process, "run", lambda cmd, **kw: commands.append(cmd) or process.Finished(0, False, 0.1))
    path = tmp_path / "b.json"
    grid = {"max_side": 600, "limits": [4096]}
    save(path, Baseline("report", "ci", meta={"sweeps": {"geometry/kimi-k3/x": {"mismatches": 0}}, "sweep_grid": grid}))
    opts = _opts(
        tmp_path, baseline=path, bench=True, max_side=600, limits=(4096,), skip={"ipc", "served", "sim", "plots"}
    )
    assert run_report(opts) == 0
    steps = {s["name"]: s for s in _report(tmp_path)["steps"]}
    assert steps["sweeps:geometry"]["status"] == "skipped" and line in steps["sweeps:geometry"]["error"]
    assert steps["bench:vllm"]["status"] == "skipped" and line in steps["bench:vllm"]["error"]
    assert steps["bench"]["status"] == "ok" and any(a.endswith("test_checkpoint_vs_vllm.py") for a in commands[0])
    assert any("C13 geometry counters not compared" in n for n in _report(tmp_path)["notes"])


def test_an_out_folder_that_cannot_be_written_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``--out /proc/foo``: exit 2 in one line naming the option, nothing written anywhere, no run started."""
    seen = _fake_run(monkeypatch, lambda q: _record(q, []))
    monkeypatch.setattr("deferlab.reports.core.claims.DEFAULT_OUT_PARENT", tmp_path / "out")
    assert main(["report", "--out", "/proc/foo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("deferlab: error: --out: '/proc/foo' cannot be written"), err
    assert seen == [] and not Path("/proc/foo").exists() and list(tmp_path.iterdir()) == []


def test_the_default_run_is_the_ci_profile_without_benchmarks() -> None:
    """``deferlab report`` alone: profile ci (derandomized), benchmarks off and not strict; dev stays selectable."""
    parser, _ = build_parser()
    args = parser.parse_args(["report"])
    assert (args.profile, args.bench, args.strict) == ("ci", False, False)
    assert parser.parse_args(["report", "--profile", "dev"]).profile == "dev"


def test_baseline_writes_schema_2_that_reads_back(tmp_path: Path) -> None:
    """``deferlab baseline --from REPORT_JSON`` writes a schema-2 report baseline that the report reads back."""
    report = {
        "generated_at": "now",
        "claims_profile": "ci",
        "config": {"media_proc_cfg": {"x": 1}},
        "claims": [{"id": "C12", "policy": "RELEASED", "verdict": "fails", "evidence": "AssertionError: e"}],
        "sweeps": [{"name": "tokens/L4", "key_counters": {"max_tokens": 4}}],
    }
    (tmp_path / "report.json").write_text(json.dumps(report))
    out = tmp_path / "base.json"
    assert main(["baseline", "--from", str(tmp_path / "report.json"), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert (doc["schema_version"], doc["kind"], doc["profile"]) == (2, "report", "ci")
    assert doc["cells"] == {"RELEASED": {"C12": "fails"}} and doc["meta"]["sweeps"] == {"tokens/L4": {"max_tokens": 4}}
    assert doc["signatures"] == {"RELEASED": {"C12": ["AssertionError: e"]}}
