"""`deferlab` end to end on a tiny config: schema, regression exit codes, bad usage, crash safety."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deferlab.reference.oracle import gate as oracle_gate
from deferlab.reports.cli import main
from deferlab.reports.core.atomic import read_latest
from deferlab.reports.report.sweeps import compute as sweeps
from tests.reports.support import CLAIM_IDS, FAST_ARGS, write_config, write_results

TOP_KEYS = {
    "schema_version",
    "generated_at",
    "environment",
    "config",
    "claims",
    "properties",
    "sweeps",
    "sim",
    "benchmarks",
    "regressions",
    "steps",
    "failed_tests",
    "strict",
}


def _report(tmp: Path, out: str, *extra: str, results: Path | None = None, baseline: str = "none") -> int:
    res = results or write_results(tmp / "results")
    args = ["report", "--config", str(write_config(tmp)), "--from-results", str(res), "--out", str(tmp / out)]
    return main([*args, "--baseline", baseline, *FAST_ARGS, *extra])


def _baseline(tmp: Path, out: str) -> Path:
    path = tmp / "baseline.json"
    assert main(["baseline", "--from", str(tmp / out / "report.json"), "--out", str(path)]) == 0
    return path


def test_report_json_schema(tmp_path: Path) -> None:
    """report.json carries every documented key, every claim of claims.toml for both required policies, and timed steps."""
    assert _report(tmp_path, "r") == 0
    assert read_latest(tmp_path) == tmp_path / "r"
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert TOP_KEYS <= set(report)
    assert {"python", "numpy", "torch", "pillow", "hypothesis", "device"} <= set(report["environment"])
    pairs = {(c["id"], c["policy"]) for c in report["claims"]}
    assert {(c, p) for c in CLAIM_IDS for p in ("PR_33921", "RELEASED")} <= pairs
    for c in report["claims"]:
        assert set(c) == {
            "id",
            "statement",
            "source",
            "policy",
            "verdict",
            "evidence",
            "counterexample",
            "provenance",
            "ran_on",
        }
        assert c["verdict"] in ("holds", "fails", "holds-with-caveat", "not-run")
    assert all(set(s) == {"name", "status", "seconds", "error"} for s in report["steps"])
    assert {s["name"]: s["status"] for s in report["steps"]}["bench"] == "skipped"
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.index("## Claim verdicts") < md.index("## Figures") < md.index("## Details")


def test_missing_claims_are_not_run(tmp_path: Path) -> None:
    """A results file without C4 for RELEASED still lists it, as not-run."""
    res = write_results(tmp_path / "results")
    data = json.loads((res / "verdicts.json").read_text())
    data["claims"] = [c for c in data["claims"] if (c["id"], c["policy"]) != ("C4", "RELEASED")]
    (res / "verdicts.json").write_text(json.dumps(data))
    assert _report(tmp_path, "r", results=res) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    [row] = [c for c in report["claims"] if (c["id"], c["policy"]) == ("C4", "RELEASED")]
    assert row["verdict"] == "not-run"


def test_same_behaviour_is_no_regression_and_changed_verdict_is(tmp_path: Path) -> None:
    """Against its own baseline a rerun exits 0; a claim whose verdict changed exits 1 and is named."""
    assert _report(tmp_path, "r1") == 0
    base = _baseline(tmp_path, "r1")
    assert _report(tmp_path, "r2", baseline=str(base)) == 0
    changed = write_results(tmp_path / "changed", {"C7/PR_33921": "fails"})
    assert _report(tmp_path, "r3", results=changed, baseline=str(base)) == 1
    regs = json.loads((tmp_path / "r3" / "report.json").read_text())["regressions"]
    assert [(r["kind"], r["name"], r["baseline"], r["current"]) for r in regs] == [
        ("claim", "C7/PR_33921", "holds", "fails")
    ]


def test_strict_gate_is_flagged_as_a_sweep_regression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate deciding with `<` instead of `<=` changes the deferring-size counter: exit 1, counter named."""
    assert _report(tmp_path, "r1") == 0
    base = _baseline(tmp_path, "r1")
    counters = json.loads(base.read_text())["meta"]["sweeps"]
    assert counters["decision_map/L4/C3"]["ties"] > 0  # the tiny config has ties to lose

    def strict(w, h, c, cfg):
        raw, processed, _ = oracle_gate.decide_arrays(w, h, c, cfg)
        return raw, processed, raw < processed

    monkeypatch.setattr(sweeps, "decide_arrays", strict)
    assert _report(tmp_path, "r2", baseline=str(base)) == 1
    names = {r["name"] for r in json.loads((tmp_path / "r2" / "report.json").read_text())["regressions"]}
    assert "decision_map/L4/C3:deferring" in names
    assert "decision_map/L4/C3:ties" not in names  # raw == processed is the same sizes; only the decision moved


def test_other_grid_is_a_note_not_a_regression(tmp_path: Path) -> None:
    """A baseline made on another sweep grid is not compared (noted), so it cannot fake a regression."""
    assert _report(tmp_path, "r1") == 0
    base = _baseline(tmp_path, "r1")
    args = ["--sweep-max-side", "10"]
    res = write_results(tmp_path / "results")
    cfg = write_config(tmp_path)
    rc = main(
        ["report", "--config", str(cfg), "--from-results", str(res), "--out", str(tmp_path / "r2")]
        + ["--baseline", str(base), *FAST_ARGS, *args]
    )
    assert rc == 0
    notes = json.loads((tmp_path / "r2" / "report.json").read_text())["notes"]
    assert any("grid" in n for n in notes)


def test_crash_mid_write_keeps_previous_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that dies while writing leaves the last complete report, its files and the latest pointer untouched."""
    assert _report(tmp_path, "r") == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir()}
    pointer = (tmp_path / "latest").read_bytes()

    def boom(report):
        raise RuntimeError("disk full while rendering")

    monkeypatch.setattr("deferlab.reports.report.run.render_markdown", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        _report(tmp_path, "r")
    assert {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir()} == before
    assert (tmp_path / "latest").read_bytes() == pointer
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging dir left behind


def test_interrupt_during_a_step_keeps_previous_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the middle of the sweeps is not swallowed as a failed step: the command stops with 130, and the
    old report survives."""
    assert _report(tmp_path, "r") == 0
    before = (tmp_path / "r" / "report.json").read_bytes()

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("deferlab.reports.report.sweeps.collect.collect_sweeps", interrupted)
    assert _report(tmp_path, "r") == 130
    assert (tmp_path / "r" / "report.json").read_bytes() == before


def test_failing_step_is_reported_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part that raises is a failed step with its error; later steps still run, the report is written, and the
    run exits 3 (never 0: a report missing a part is not a clean report)."""

    def broken(*a, **k):
        raise ZeroDivisionError("sweeps exploded")

    monkeypatch.setattr("deferlab.reports.report.sweeps.collect.collect_sweeps", broken)
    assert _report(tmp_path, "r") == 3
    steps = {s["name"]: s for s in json.loads((tmp_path / "r" / "report.json").read_text())["steps"]}
    assert steps["sweeps"]["status"] == "failed" and "sweeps exploded" in steps["sweeps"]["error"]
    assert steps["properties"]["status"] == "ok"


def test_failed_step_missing_counters_is_a_regression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sweeps that fail to run cannot pass the gate silently: their counters are reported missing (exit 1)."""
    assert _report(tmp_path, "r1") == 0
    base = _baseline(tmp_path, "r1")
    monkeypatch.setattr("deferlab.reports.report.sweeps.collect.collect_sweeps", lambda *a, **k: 1 / 0)
    assert _report(tmp_path, "r2", baseline=str(base)) == 1


def test_claims_command_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`deferlab claims` prints one row per claim with each policy's verdict."""
    res = write_results(tmp_path / "res", {"C3/RELEASED": "fails"})
    assert main(["claims", "--from-results", str(res)]) == 0
    out = capsys.readouterr().out
    [c3] = [line for line in out.splitlines() if line.startswith("| C3 |")]
    assert c3.endswith("| holds | **FAILS** (float32-only) |")  # 205 of 256 in FP32, no BF16 count: semantics §21.3


def test_sim_subcommand_hands_all_arguments_to_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """`deferlab sim ...` passes every argument, options included, to sim.cli.main and returns its status."""
    from deferlab.sim import cli as sim_cli

    seen = []
    monkeypatch.setattr(sim_cli, "main", lambda argv: seen.append(argv) or 7)
    assert main(["sim", "--json", "chat-tp8", "--help"]) == 7
    assert seen == [["--json", "chat-tp8", "--help"]]


def test_default_out_is_timestamped_with_latest_pointer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --out each run gets its own reports/out/<UTC timestamp>/ and `latest` names the newest one."""
    monkeypatch.setattr("deferlab.reports.core.claims.DEFAULT_OUT_PARENT", tmp_path / "out")
    res = write_results(tmp_path / "res")
    argv = ["report", "--config", str(write_config(tmp_path)), "--from-results", str(res), "--baseline", "none"]
    assert main([*argv, *FAST_ARGS]) == 0
    [made] = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    assert made.name.endswith("Z") and (made / "report.json").is_file()
    assert read_latest(tmp_path / "out") == made


def test_test_subcommand_runs_the_suite_folder_with_every_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    """`deferlab test ...` runs pytest on the properties package's own folder (installed or not), args untouched."""
    from deferlab.reports.core.runner import suite_path
    from deferlab.reports.report import cli as report_cli

    seen = []
    monkeypatch.setattr(report_cli, "attached", lambda cmd, env=None: seen.append(cmd) or 4)
    assert main(["test", "-k", "gate", "--help"]) == 4
    [cmd] = seen
    assert cmd[1:4] == ["-m", "pytest", str(suite_path())] and cmd[-3:] == ["-k", "gate", "--help"]
    assert (suite_path() / "conftest.py").is_file() and (suite_path() / "claims").is_dir()


def test_an_sglang_source_that_cannot_load_is_refused_before_any_step(tmp_path: Path, capsys) -> None:
    """``report --sglang`` with a path that is no checkout: exit 2 in the driver's one line (what was tried,
    what is accepted) before any step runs, and nothing is written (no report folder, no verdicts)."""
    res = tmp_path / "res"
    argv = ["report", "--config", str(write_config(tmp_path)), "--sglang", str(tmp_path), "--out", str(tmp_path / "r")]
    assert main([*argv, *FAST_ARGS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("deferlab: error: --sglang: sglang source "), err
    assert "is not an SGLang checkout" in err[0] and "accepted: 'installed'" in err[0]
    assert not (tmp_path / "r").exists() and not res.exists()


def test_a_source_that_fails_to_load_inside_the_run_fails_its_step_in_one_line(tmp_path: Path) -> None:
    """The run itself (the CLI's load check not taken, as a caller of `run_report` may do): the report is
    written, the properties step failed with the driver's one line, the claims not-run, exit 3."""
    from deferlab.reference.system.profiles import profile
    from deferlab.reports.report.run import ReportOptions, run_report

    opts = ReportOptions(
        profile="ci",
        config=profile("kimi-k3"),
        config_source="test",
        out=tmp_path / "r",
        baseline=None,
        sglang=str(tmp_path),
        skip={"ipc", "sweeps", "sim", "bench", "plots"},
    )
    assert run_report(opts) == 3
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    step = {s["name"]: s for s in report["steps"]}["properties"]
    assert step["status"] == "failed" and "is not an SGLang checkout" in step["error"] and "\n" not in step["error"]
    from deferlab.reference.system.systems import REQUEST_CLAIMS

    assert {r["policy"] for r in report["claims"]} == {"SGLANG"}
    # the claims the column answers were not run; the requests-as-sent claims are n/a for Kimi-K3 (semantics §20)
    assert {r["verdict"] for r in report["claims"] if r["id"] not in REQUEST_CLAIMS} == {"not-run"}
    assert {r["verdict"] for r in report["claims"] if r["id"] in REQUEST_CLAIMS} == {"n/a"}
    assert "could not be loaded" in (tmp_path / "r" / "report.md").read_text()
