"""The fault suite: every long command stopped from outside (SIGINT, SIGTERM, SIGKILL) at a few points, and two
runs into one folder. Each case runs the real CLI in a child and asserts what issue 30 promises (semantics of
`reports.core.process`): exit 130 / 143 within 5 s of the signal (none for SIGKILL), no process of the run and
no temporary folder of it left 10 s later, the output folder absent (or whole), no report of steps not run.

How a run's processes are found: the test gives the command a mark in its environment, and every process it
starts inherits it (pytest children, xdist workers, the janitor); /proc is read for it. Its temporary folders:
the command gets a private, empty TMPDIR, which must be empty again. Engines are never fetched: the report runs
deferlab's own model, the executor case fake tasks, the mutation campaign the fake tree of
`tests/reports/mutate_fake`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reports.mutate_support import control_done

FAKES = Path(__file__).parent / "mutate_fake"
FAKE_TREE = FAKES / "python"
STOP_WITHIN_S = 5.0
GONE_WITHIN_S = 10.0


def marked(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries ``mark`` (zombies left out)."""
    needle = f"DEFERLAB_FAULT_MARK={mark}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if needle not in (d / "environ").read_bytes().split(b"\0"):
                continue
            if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")))
        except (OSError, IndexError):
            continue
    return found


def _interruptible() -> None:
    """In the child before exec: Ctrl-C at its default, as a terminal starts a command (a job a non-interactive
    shell starts in the background, CI's perhaps, inherits SIGINT ignored, and Python then keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Run:
    """A ``deferlab`` command in a child of its own session, with its mark and its private TMPDIR."""

    def __init__(self, tmp: Path, argv: list[str], *, script: list[str] | None = None) -> None:
        self.mark = uuid.uuid4().hex
        self.tmp = tmp / f"tmp-{self.mark[:8]}"
        self.tmp.mkdir()
        env = {
            **os.environ,
            "DEFERLAB_FAULT_MARK": self.mark,
            "TMPDIR": str(self.tmp),
            "DEFERLAB_CACHE": str(tmp / "cache"),
        }
        cmd = script or [sys.executable, "-m", "deferlab.reports.cli"]
        self.proc = subprocess.Popen(
            [*cmd, *argv], env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True, preexec_fn=_interruptible,
        )  # fmt: skip

    def wait_for(
        self, ready: Callable[[list[tuple[int, str]]], bool], timeout: float = 180, ended_ok: bool = False
    ) -> None:
        """Until ``ready(the run's processes)``; fails with the run's output if it ends (unless ``ended_ok``: a quick
        command may be done before the moment) or times out first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready(marked(self.mark)):
                return
            if self.proc.poll() is not None:
                if ended_ok:
                    return
                break
            time.sleep(0.1)
        out, err = self.communicate(5)
        pytest.fail(f"the point to stop at never came (rc {self.proc.returncode}): {err[-2000:]}")

    def communicate(self, timeout: float) -> tuple[str, str]:
        try:
            return self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return "", ""

    def stop(self, sig: signal.Signals) -> tuple[int | None, float, str]:
        """Send ``sig`` to the command alone (not its group: its children are its business); (exit status, seconds
        to exit, stderr)."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            err = ""
        return self.proc.returncode, time.monotonic() - t0, err

    def left(self) -> tuple[list[tuple[int, str]], list[str]]:
        """What the run left, given up to 10 s: its processes, and the entries of its TMPDIR."""
        deadline = time.monotonic() + GONE_WITHIN_S
        while time.monotonic() < deadline and (marked(self.mark) or any(self.tmp.iterdir())):
            time.sleep(0.2)
        return marked(self.mark), sorted(p.name for p in self.tmp.iterdir())

    def close(self) -> None:
        for pid, _ in marked(self.mark):
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def stopped_at(
    run: Run, ready: Callable[[list[tuple[int, str]]], bool], sig: signal.Signals, timeout: float = 180,
    ended_ok: bool = False,
) -> tuple[int | None, float, str, list[tuple[int, str]], list[str]]:  # fmt: skip
    """``run`` stopped by ``sig`` once ``ready``: (exit status, seconds to exit, stderr, processes left, TMPDIR
    entries left); the run is cleaned up whatever happens."""
    try:
        run.wait_for(ready, timeout, ended_ok)
        rc, seconds, err = run.stop(sig)
        procs, files = run.left()
    finally:
        run.close()
    return rc, seconds, err, procs, files


def after(seconds: float) -> Callable[[list[tuple[int, str]]], bool]:
    """Ready ``seconds`` after now, whatever runs (a stop at a moment rather than at a process)."""
    start = time.monotonic()
    return lambda procs: time.monotonic() - start >= seconds


def pytest_child(procs: list[tuple[int, str]]) -> bool:
    """A claims run (the runner's pytest child) is running."""
    return any(" -m pytest " in cmd for _, cmd in procs)


EXITS = {signal.SIGINT: 130, signal.SIGTERM: 143}
REPORT = ["report", "--skip", "ipc", "sweeps", "served", "sim", "bench", "plots", "--profile", "ci"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_report_stopped_while_its_claims_child_runs(sig: signal.Signals, tmp_path: Path) -> None:
    """The report's properties step runs its pytest child: stopped, nothing of the run is left and no report."""
    out = tmp_path / "out"
    rc, seconds, err, procs, files = stopped_at(Run(tmp_path, [*REPORT, "--out", str(out)]), pytest_child, sig)
    if sig == signal.SIGKILL:
        assert rc == -signal.SIGKILL
    else:
        assert rc == EXITS[sig], err[-2000:]
        assert seconds <= STOP_WITHIN_S, f"stopped in {seconds:.1f} s"
        assert "failed" not in err.split("properties: running", 1)[-1], err[-2000:]  # a stop is no failed step
    assert procs == [], procs
    assert files == [], files
    assert not out.exists(), "a stopped report leaves no output folder"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == [], "no staging folder or lock left"


def test_report_stopped_while_loading(tmp_path: Path) -> None:
    """SIGTERM a moment after the start (imports, the front door): the command ends, leaving nothing."""
    run = Run(tmp_path, [*REPORT, "--out", str(tmp_path / "out")])
    rc, seconds, err, procs, files = stopped_at(run, after(0.5), signal.SIGTERM, ended_ok=True)
    assert rc in (143, -signal.SIGTERM) and seconds <= STOP_WITHIN_S, (rc, seconds, err[-1000:])
    assert (procs, files) == ([], [])


def test_two_reports_into_one_folder(tmp_path: Path) -> None:
    """While one report writes a folder, a second into the same folder is refused in one line, before any work."""
    out = tmp_path / "out"
    first = Run(tmp_path, [*REPORT, "--out", str(out)])
    try:
        first.wait_for(pytest_child)
        second = Run(tmp_path, [*REPORT, "--out", str(out)])
        _, err = second.proc.communicate(timeout=60)
        assert second.proc.returncode == 2, err
        lines = [x for x in err.splitlines() if x.startswith("deferlab: error:")]
        assert len(lines) == 1 and "--out" in lines[0] and "another deferlab run" in lines[0], err
        assert "accepted:" in lines[0]
        assert marked(second.mark) == []
        rc, _, _ = first.stop(signal.SIGTERM)
        assert rc == 143
    finally:
        first.close()


EXECUTOR = """
import sys
from deferlab.reports.core import executor, process, runner, tasks
from deferlab.reference.system.systems import System

def call(task):
    process.run(["sleep", "300"])
    return runner.RunRecord(System(), "ci")

todo = [tasks.Task(f"t{i}", runner.Request(System())) for i in range(4)]
try:
    with process.stopped():
        print("running", flush=True)
        executor.run_all(executor.LocalExecutor(2, call=call), todo)
except KeyboardInterrupt:
    sys.exit(130)
except process.Stopped:
    sys.exit(143)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_the_local_executor_stops_at_once(sig: signal.Signals, tmp_path: Path) -> None:
    """versions' and compare's pool (two claims children running, two waiting): stopped within 5 s, not when
    the children end (it took 100-124 s), and no waiting task starts."""
    two_children = lambda procs: sum(cmd.startswith("sleep 300") for _, cmd in procs) == 2  # noqa: E731
    rc, seconds, err, procs, files = stopped_at(
        Run(tmp_path, [], script=[sys.executable, "-c", EXECUTOR]), two_children, sig
    )
    assert rc == EXITS[sig] and seconds <= STOP_WITHIN_S, (rc, seconds, err[-1000:])
    assert (procs, files) == ([], [])


HANGS = "sglang/srt/gate.py:14:14:ReplaceBinaryOperator_Sub_Add:0"  # countdown's n - 1 -> n + 1: never ends


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_campaign_stopped_while_a_mutant_runs(sig: signal.Signals, tmp_path: Path) -> None:
    """``deferlab mutate`` (the fake harness) while a hanging mutant's claims run: nothing left, campaign kept."""
    pytest.importorskip("cosmic_ray", reason="needs the mutate extra (cosmic-ray)")
    out = tmp_path / "out"
    argv = [
        "mutate",
        "--sglang",
        str(FAKE_TREE),
        "--out",
        str(out),
        "--mutants",
        HANGS,
        "--timeout",
        "60",
        "--jobs",
        "1",
    ]
    run = Run(tmp_path, argv, script=[sys.executable, str(FAKES / "fakes.py")])
    mutant_runs = lambda procs: control_done(out) and any("claims.py" in cmd for _, cmd in procs)  # noqa: E731
    rc, seconds, err, procs, files = stopped_at(run, mutant_runs, sig, timeout=240)
    if sig == signal.SIGKILL:
        assert rc == -signal.SIGKILL
    else:
        assert rc == 143 and seconds <= STOP_WITHIN_S, (rc, seconds, err[-1000:])
    assert (procs, files) == ([], [])
    assert (out / "campaign.sqlite").is_file()


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "--profile", "thorough", "--max-side", "8192"],
        ["calibrate", "--out", "cal.toml"],
        ["sim", "--list"],
        ["families"],
        ["cache"],
    ],
    ids=["sweep", "calibrate", "sim", "families", "cache"],
)
def test_in_process_commands_stop_within_5_s(argv: list[str], tmp_path: Path) -> None:
    """Commands that work in their own process (sweeps, measurements, tables): SIGTERM two seconds in (mid-work
    for the long ones), exit 143 (or done already, exit 0), within 5 s, nothing left and no output written."""
    rc, seconds, err, procs, files = stopped_at(Run(tmp_path, argv), after(2.0), signal.SIGTERM, ended_ok=True)
    # -15: the signal came before the command's own handler was up (still importing): the default action ended it
    assert rc in (0, 143, -signal.SIGTERM) and seconds <= STOP_WITHIN_S, (rc, seconds, err[-1000:])
    if rc != 0:
        assert not (tmp_path / "cal.toml").exists()
    assert (procs, files) == ([], [])
