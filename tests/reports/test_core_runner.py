"""`reports.core.runner` and `reports.core.process`: one child per run, read back as a typed record; no
process outlives its command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deferlab.reference.system.systems import System
from deferlab.reports.core import process, runner

SUITE_PLUGIN = "deferlab.properties.suite"  # the recorder, for a test file outside the shipped checks


def _tests_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "test_probe.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_the_command_names_the_system_and_its_checks() -> None:
    base = str(runner.suite_path())
    model = runner.command(runner.Request(System(), claims=("C1", "C10")))
    assert model[1:4] == ["-m", "pytest", f"{base}/claims"] and "--hypothesis-profile=ci" in model
    assert model[-2:] == ["-k", "test_claim_c1_ or test_claim_c10_"]
    vllm = runner.command(runner.Request(System("vllm", "0.33.0"), profile="dev", workers=2, plugins=("x.y",)))
    assert vllm[3] == f"{base}/claims" and ["--vllm", "0.33.0"] == vllm[vllm.index("--vllm") :][:2]
    assert vllm[-2:] == ["-p", "x.y"] and "--hypothesis-profile=dev" in vllm
    nodes = runner.command(runner.Request(System("sglang", "0.5.23"), nodes=("claims/test_gate.py::t", "/abs/x.py")))
    assert nodes[3:5] == [f"{base}/claims/test_gate.py::t", "/abs/x.py"]


def test_a_run_of_the_model_gives_its_verdicts_and_every_tests_outcome(tmp_path: Path) -> None:
    rec = runner.run(runner.Request(System(), profile="dev", claims=("C1",)), work=tmp_path)
    assert rec.error is None and rec.rc == 0 and rec.wrote and rec.schema_version == 3
    assert {r["id"] for r in rec.rows} == {"C1"} and {r["policy"] for r in rec.rows} >= {"PR_33921", "RELEASED"}
    assert rec.tests and all(t.outcome == "passed" and t.message == "" for t in rec.tests.values())
    assert rec.recorded() and (tmp_path / "pytest.log").is_file()


def test_a_failure_line_comes_from_the_recorder_not_from_pytests_output(tmp_path: Path) -> None:
    """The message is the recorder's (the results file), so it survives ``-q`` and any terminal width."""
    path = _tests_file(
        tmp_path,
        """
        import pytest

        def test_fails():
            assert 6 * 7 == 41, "the answer is " + "x" * 300

        def test_skips():
            pytest.skip("not here")

        @pytest.fixture
        def broken():
            raise RuntimeError("fixture broke")

        def test_errors(broken):
            pass
        """,
    )
    req = runner.Request(System(), nodes=(str(path),), plugins=(SUITE_PLUGIN,), env={"COLUMNS": "40"})
    rec = runner.run(req, work=tmp_path / "w")
    outcomes = {n.rsplit("::", 1)[-1]: (t.outcome, t.message) for n, t in rec.tests.items()}
    assert outcomes["test_fails"][0] == "failed" and outcomes["test_fails"][1].startswith(
        "AssertionError: the answer is xxx"
    )
    assert outcomes["test_skips"] == ("skipped", "not here")
    assert outcomes["test_errors"] == ("error", "RuntimeError: fixture broke")
    assert rec.rc == 1 and rec.error is None and set(rec.failed_tests().values()) >= {"RuntimeError: fixture broke"}


def test_a_run_past_its_timeout_is_killed_with_its_children_and_says_so(tmp_path: Path) -> None:
    path = _tests_file(
        tmp_path,
        """
        import subprocess, time

        def test_hangs():
            subprocess.Popen(["sleep", "301"])  # a grandchild: killed with the group
            time.sleep(300)
        """,
    )
    t0 = time.perf_counter()
    rec = runner.run(
        runner.Request(System(), nodes=(str(path),), plugins=(SUITE_PLUGIN,), timeout=8), work=tmp_path / "w"
    )
    assert rec.timed_out and rec.rc is None and "did not finish within 8 s" in (rec.error or "")
    assert time.perf_counter() - t0 < 60 and process.live() == []
    assert not _sleepers("301")


def test_a_child_that_records_nothing_is_an_error_line_not_an_exception(tmp_path: Path) -> None:
    path = _tests_file(tmp_path, "import os\n\ndef test_dies():\n    os._exit(7)\n")
    rec = runner.run(runner.Request(System(), nodes=(str(path),), plugins=(SUITE_PLUGIN,)), work=tmp_path / "w")
    assert not rec.wrote and rec.rc == 7 and rec.error.startswith("the checks recorded nothing (pytest exit 7)")


def test_a_load_check_says_what_loaded_or_the_loaders_one_line(tmp_path: Path) -> None:
    assert runner.check_loads(System()) == "deferlab"
    t0 = time.perf_counter()
    with pytest.raises(runner.LoadError) as e:
        runner.check_loads(System("sglang", str(tmp_path / "no-such-checkout")))
    assert "\n" not in str(e.value) and "accepted:" in str(e.value) and time.perf_counter() - t0 < 60


def _sleepers(seconds: str) -> list[int]:
    """Our ``sleep <seconds>`` processes still alive (each test sleeps its own number: tests run in parallel)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", seconds.encode()]:
                    found.append(int(d.name))
            except OSError:
                continue
    return found


COMMAND = """
import signal, sys
from deferlab.reports.core import process
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal starts it: a job started in the
# background by a non-interactive shell (a CI script's `... &`) inherits SIGINT ignored, and so would this child
n = sys.argv[1]
with process.stopped():
    process.spawn(["sleep", n])
    print("started", flush=True)
    process.run(["sh", "-c", f"sleep {n} & sleep {n}"])
"""


@pytest.mark.parametrize(("sig", "seconds"), [(signal.SIGTERM, "302"), (signal.SIGINT, "303")])
def test_a_stopped_command_leaves_no_process(sig: signal.Signals, seconds: str) -> None:
    """SIGTERM or Ctrl-C (SIGINT) while children run: every registered group, grandchildren included, is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", COMMAND, seconds], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout.readline().strip() == "started"
        ready = (
            time.time() + 30
        )  # the shell starts its two sleeps when it gets a core: wait for them, on a busy box too
        while len(_sleepers(seconds)) < 3 and time.time() < ready:
            time.sleep(0.2)
        assert len(_sleepers(seconds)) >= 3
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        deadline = time.time() + 10
        while _sleepers(seconds) and time.time() < deadline:
            time.sleep(0.2)
        assert _sleepers(seconds) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
