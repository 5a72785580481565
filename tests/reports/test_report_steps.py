"""`reports.report.steps.StepRunner`: a step started beside the others (`StepRunner.start`, the report's properties
step) runs while the following steps run, keeps its record's place (the order the steps started in), and gives
back what `run` would have: its value, a `StepFailed`'s value, None for a failure or a skip."""

from __future__ import annotations

import io
import threading

from deferlab.reports.report.steps import StepFailed, StepRunner


def test_a_started_step_runs_beside_the_next_ones_and_keeps_its_place() -> None:
    runner, release = StepRunner(log=io.StringIO()), threading.Event()

    def long_step(x: int) -> int:
        assert release.wait(30), "the steps after it never ran"
        return x + 1

    wait = runner.start("properties", long_step, 41)
    assert runner.run("ipc", lambda: "ipc ran while properties waited") is not None
    release.set()
    assert wait() == 42
    assert [(r["name"], r["status"]) for r in runner.as_dicts()] == [("properties", "ok"), ("ipc", "ok")]


def test_a_started_step_fails_or_skips_as_a_run_one_does() -> None:
    log = io.StringIO()
    runner = StepRunner({"skipped"}, log=log)

    def failing() -> None:
        raise StepFailed("no verdicts", ["partial"])

    def broken() -> None:
        raise RuntimeError("boom")

    waits = [runner.start("failing", failing), runner.start("broken", broken), runner.start("skipped", broken)]
    assert [w() for w in waits] == [["partial"], None, None]
    got = [(r["name"], r["status"], r["error"]) for r in runner.as_dicts()]
    assert got == [("failing", "failed", "no verdicts"), ("broken", "failed", "RuntimeError: boom"),
                   ("skipped", "skipped", "--skip")]  # fmt: skip
    assert "[deferlab] skipped: skipped (--skip)" in log.getvalue() and "RuntimeError: boom" in log.getvalue()
