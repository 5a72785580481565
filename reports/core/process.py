"""Child processes of a command: each in its own process group, all ended when the command ends or is stopped.

Why one place: every command starts children (a claims run, a load check, a reproducer, a mutant's run), a
child may start its own (pytest-xdist workers, a warm fork), and a user may stop the command with Ctrl-C
or ``kill``. `spawn` starts each child as the leader of a new process group and registers it; `stopped`
(the CLI wraps every command in it) turns SIGTERM into the same path as Ctrl-C, and on the way out kills
every registered group that is still alive. So no command leaves a process behind, on a normal exit, an
error or a signal (`tests/reports/test_processes.py` checks it from outside).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LIVE: dict[int, subprocess.Popen] = {}
_LOCK = threading.Lock()


class Stopped(Exception):  # noqa: N818 - what happened, not an error of ours
    """The command was told to stop (SIGTERM); raised in the main thread so every ``finally`` runs."""


@dataclass(frozen=True)
class Finished:
    """How a child ended: its exit status (None when it was killed at its timeout), and whether it timed out."""

    rc: int | None
    timed_out: bool
    seconds: float


def spawn(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
) -> subprocess.Popen:
    """Start ``cmd`` as the leader of a new process group, registered until `reap` (or `kill_all`)."""
    proc = subprocess.Popen(
        list(cmd), env=dict(env) if env is not None else None, cwd=cwd, stdout=stdout, stderr=stderr,
        start_new_session=True, text=text,
    )  # fmt: skip
    with _LOCK:
        _LIVE[proc.pid] = proc
    return proc


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s whole group (its children too), then wait for it; never raises."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=30)


def reap(proc: subprocess.Popen) -> None:
    """``proc`` is done: kill what is left of its group (a grandchild it left behind) and forget it."""
    kill_group(proc)
    with _LOCK:
        _LIVE.pop(proc.pid, None)


def run(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    log: Path | None = None,
    timeout: float | None = None,
) -> Finished:
    """``cmd`` to its end (or ``timeout``, then its group is killed), output appended to ``log`` (else dropped)."""
    t0 = time.perf_counter()
    sink = open(log, "a") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        proc = spawn(cmd, env=env, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
        try:
            rc: int | None = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
        finally:
            reap(proc)
    finally:
        if log is not None:
            sink.close()
    return Finished(rc, timed_out, round(time.perf_counter() - t0, 2))


def capture(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
) -> tuple[int | None, str, str]:
    """``cmd`` to its end with its output captured: (exit status or None at the timeout, stdout, stderr)."""
    proc = spawn(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return None, out or "", err or ""
    finally:
        reap(proc)


def live() -> list[int]:
    """The pids of the registered children still running."""
    with _LOCK:
        return [pid for pid, p in _LIVE.items() if p.poll() is None]


def kill_all() -> None:
    """Kill every registered child's group (Ctrl-C, SIGTERM, a failed command)."""
    with _LOCK:
        procs = list(_LIVE.values())
    for proc in procs:
        kill_group(proc)
    with _LOCK:
        for proc in procs:
            _LIVE.pop(proc.pid, None)


def _on_term(signum: int, frame: Any) -> None:
    raise Stopped(f"signal {signum}")


@contextlib.contextmanager
def stopped() -> Iterator[None]:
    """Run a command: SIGTERM raises `Stopped` in the main thread (as Ctrl-C raises KeyboardInterrupt), and
    however the block ends, every child still registered is killed with its group."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        yield
    finally:
        kill_all()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
