"""Regression rules, claim table and benchmark parsing of the report, on hand-made inputs."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from deferlab.reference.system.systems import System
from deferlab.reports.core.baseline import Baseline
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.report.benchmarks import parse_benchmark_json, past
from deferlab.reports.report.claims import claim_table as table_of
from deferlab.reports.report.claims import ipc_claim_rows, merge_rows
from deferlab.reports.report.regressions import benchmark_notes, compare, make_baseline
from deferlab.reports.report.render import render_markdown

STATEMENTS = {f"C{i}": {"statement": f"s{i}", "source": "src"} for i in range(1, 12)}


def claim_table(results: dict[str, Any], statements: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The table of one model run whose results file holds ``results["claims"]``."""
    return table_of([RunRecord(System(), "ci", rows=results["claims"])], statements)


def _bench_base(spec: dict[str, Any]) -> Baseline:
    return Baseline("report", "ci", meta={"benchmarks": {"b::t::speed_ratio": spec}})


def _report(ratio: float | None = 2.0, bench_status: str = "ok") -> dict:
    benches = [] if ratio is None else [{"name": "b::t", "ratios": {"speed_ratio": ratio}}]
    return {
        "generated_at": "now",
        "config": {"name": "tiny", "media_proc_cfg": {"x": 1}},
        "claims": claim_table({"claims": [{"id": "C1", "policy": "PR_33921", "verdict": "holds"}]}, STATEMENTS),
        "sweeps": [{"name": "decision_map/L4/C3", "kind": "decision_map", "key_counters": {"deferring": 18}}],
        "benchmarks": benches,
        "steps": [
            {"name": "bench", "status": bench_status, "seconds": 0.0, "error": None},
            {"name": "sweeps", "status": "ok", "seconds": 0.0, "error": None},
        ],
    }


def test_claim_table_fills_required_policies_and_keeps_extra_ones() -> None:
    """Every claim appears for PR_33921 and RELEASED; other recorded policies are kept; unknown verdicts become not-run."""
    rows = claim_table(
        {
            "claims": [
                {"id": "C2", "policy": "PRE_PR", "verdict": "fails"},
                {"id": "C3", "policy": "RELEASED", "verdict": "maybe"},
            ]
        },
        STATEMENTS,
    )
    got = {(r["id"], r["policy"]): r["verdict"] for r in rows}
    assert len([k for k in got if k[1] in ("PR_33921", "RELEASED")]) == 22
    assert got[("C2", "PRE_PR")] == "fails" and got[("C3", "RELEASED")] == "not-run"
    assert got[("C1", "PR_33921")] == "not-run"


def test_ipc_rows_fill_only_not_run() -> None:
    """C9 from the simulator fails a policy with any failing IPC property, and never overrides a recorded verdict."""
    ipc = [
        {"policy": "PR_33921", "property": "liveness", "verdict": "fails", "counterexample": {"tp": 2}},
        {"policy": "PR_33921", "property": "safety", "verdict": "holds"},
        {"policy": "RELEASED", "property": "safety", "verdict": "holds"},
    ]
    table = claim_table({"claims": [{"id": "C9", "policy": "RELEASED", "verdict": "fails"}]}, STATEMENTS)
    merged = {(r["id"], r["policy"]): r for r in merge_rows(table, ipc_claim_rows(ipc, STATEMENTS["C9"]))}
    assert merged[("C9", "PR_33921")]["verdict"] == "fails"
    assert '"tp": 2' in merged[("C9", "PR_33921")]["counterexample"]
    assert merged[("C9", "RELEASED")]["verdict"] == "fails"  # recorded by the suite: kept


@given(old=st.floats(0.01, 100), factor=st.floats(0.0, 3.0), tol=st.sampled_from([0.1, 0.5, 0.9]))
def test_benchmark_ratio_threshold(old: float, factor: float, tol: float) -> None:
    """A higher-is-better ratio is past its threshold exactly when it falls below (1 - tolerance) x baseline, and
    that is a note, never a regression."""
    spec = {"value": old, "tolerance": tol, "direction": "higher_is_better"}
    assert past(spec, old * factor) == (old * factor < old * (1 - tol))
    regs, notes = compare(_report(old * factor), _bench_base(spec))
    assert not [r for r in regs if r["kind"] == "benchmark"]
    assert any("past its threshold" in n for n in notes) == past(spec, old * factor)


def test_lower_is_better_ratio_is_past_when_it_rises() -> None:
    """For lower_is_better, rising past baseline / (1 - tol) is past the threshold; falling is fine."""
    spec = {"value": 2.0, "tolerance": 0.5, "direction": "lower_is_better"}
    assert benchmark_notes(_report(4.5), _bench_base(spec))
    assert not benchmark_notes(_report(1.0), _bench_base(spec))


def test_target_ratio_is_judged_on_its_limit_only() -> None:
    """A time-over-target ratio is past only beyond its stated limit, however much it moved from the baseline."""
    report = _report(None)
    report["benchmarks"] = [{"name": "b::t", "ratios": {"ratio_to_target": 0.9}}]
    base = make_baseline({**report, "benchmarks": [{"name": "b::t", "ratios": {"ratio_to_target": 0.01}}]})
    assert base.meta["benchmarks"]["b::t::ratio_to_target"]["limit"] == 1.0
    assert benchmark_notes(report, base) == []
    report["benchmarks"][0]["ratios"]["ratio_to_target"] = 1.2
    [note] = benchmark_notes(report, base)
    assert note.startswith("benchmark ratio b::t::ratio_to_target 0.01 -> 1.2") and "never gated" in note
    assert compare(report, base)[0] == []


def test_skipped_bench_is_not_compared() -> None:
    """Benchmarks skipped (the default: they are opt-in) are a note, never a regression."""
    regs, notes = compare(_report(None, bench_status="skipped"), _bench_base({"value": 2.0}))
    assert regs == [] and any("benchmarks not compared" in n and "--bench" in n for n in notes)


def test_baseline_roundtrip_has_no_regression_and_detects_counter_change() -> None:
    """A report compared with its own baseline is clean; one changed sweep counter is one regression."""
    report = _report()
    base = make_baseline(report)
    assert compare(report, base)[0] == []
    report["sweeps"][0]["key_counters"]["deferring"] = 15
    regs, _ = compare(report, base)
    assert [(r["kind"], r["name"], r["baseline"], r["current"]) for r in regs] == [
        ("sweep", "decision_map/L4/C3:deferring", 18, 15)
    ]


def test_baseline_keeps_previous_benchmarks_when_report_has_none() -> None:
    """Regenerating the baseline from a report without benchmarks must not drop the benchmark thresholds."""
    prev = Baseline("report", "ci", meta={"benchmarks": {"k": {"value": 3.0}}})
    assert make_baseline(_report(None), prev).meta["benchmarks"] == {"k": {"value": 3.0}}


def test_parse_benchmark_json_reads_ratios() -> None:
    """Only numeric (non-bool) extra_info keys named like ratios are ratios; stats are carried."""
    data = {
        "benchmarks": [
            {
                "name": "t",
                "fullname": "properties/test_bench_x.py::t",
                "stats": {"median": 0.5, "mean": 0.6, "min": 0.4, "stddev": 0.1, "rounds": 5},
                "extra_info": {
                    "wall_ratio": 3.5,
                    "bytes": 10,
                    "note_ratio": "n/a",
                    "ref_over_impl": 1.5,
                    "flag_ratio": True,
                },
            }
        ]
    }
    [b] = parse_benchmark_json(data)
    assert b["name"] == "properties/test_bench_x.py::t" and b["median_s"] == 0.5
    assert b["ratios"] == {"wall_ratio": 3.5, "ref_over_impl": 1.5}
    assert b["extra_info"] == {"bytes": 10, "note_ratio": "n/a", "flag_ratio": True}


def test_markdown_shows_failing_claim_with_counterexample() -> None:
    """A failing claim is bold in the table and its counterexample is printed in the details."""
    report = _report()
    report["claims"][0].update(verdict="fails", counterexample="uint8 (32, 32) 2-D tensor")
    report.update(
        profile="dev", impl="deferlab", environment={"python": "3"}, figures=[], properties=[], sim=[], regressions=[]
    )
    report["baseline"] = None
    md = render_markdown(report)
    assert "| C1 | s1 | **FAILS** (cost) |" in md  # C1 raises nothing: its class, cost (semantics §21.2)
    assert "uint8 (32, 32) 2-D tensor" in md


def test_skipped_claims_not_compared() -> None:
    """Without a property run the claims are not compared (a note), even if the baseline has verdicts."""
    report = _report()
    report["steps"].append({"name": "properties", "status": "skipped", "seconds": 0.0, "error": None})
    base = make_baseline(_report())
    base.cells["PR_33921"]["C1"] = "fails"
    regs, notes = compare(report, base)
    assert not [r for r in regs if r["kind"] == "claim"] and any("claims" in n for n in notes)
    report["steps"][-1]["status"] = "ok"
    assert [r["name"] for r in compare(report, base)[0]] == ["C1/PR_33921"]


def test_wall_time_speedups_get_the_loose_tolerance() -> None:
    """A baseline made from a report gives wall-time speedups tolerance 0.75 and exact byte ratios 0.5."""
    from deferlab.reports.report.benchmarks import DEFAULT_TOLERANCE, WALL_TIME_TOLERANCE

    report = {"benchmarks": [{"name": "b", "ratios": {"speedup_eager_over_deferred": 8.0, "bytes_ratio": 4.06}}]}
    benches = make_baseline(report).meta["benchmarks"]
    assert benches["b::speedup_eager_over_deferred"]["tolerance"] == WALL_TIME_TOLERANCE == 0.75
    assert benches["b::bytes_ratio"]["tolerance"] == DEFAULT_TOLERANCE == 0.5
