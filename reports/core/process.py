"""Child processes of a command: each in its own process group, all ended when the command ends, is stopped or dies.

Why one place: every command starts children (a claims run, a load check, a reproducer, a mutant's run), a
child may start its own (pytest-xdist workers, a warm fork), and a user may stop the command with Ctrl-C,
``kill`` or ``kill -9``. `spawn` starts each child as the leader of a new process group and registers it;
`stopped` (the CLI wraps every command in it) turns SIGTERM into the same path as Ctrl-C (`Stopped`, a
`BaseException`, so no ``except Exception`` takes it for a failure), and on the way out kills every
registered group, refuses to start new ones, and removes the command's temporary folder and output locks.

A command killed outright (SIGKILL, the OOM killer) runs none of that, so a *janitor* does it: a tiny process
of its own session, started with the first child or temporary folder, told each group, folder and lock over
a pipe; when the pipe closes without a goodbye (the command is gone) it kills the groups and removes the
folders (`tests/reports/test_faults.py` checks every command from outside, for each way of stopping it).

Every temporary folder of a command lives under one run folder (`temp_dir`), and its children get it as
``TMPDIR``, so what they leave behind goes with it too.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deferlab.impl.loader import children
from deferlab.reference.system.errors import Stopped, UsageError

__all__ = [
    "Finished",
    "Stopped",
    "capture",
    "kill_all",
    "live",
    "lock_output",
    "reap",
    "run",
    "spawn",
    "stopped",
    "temp_dir",
]

_LIVE: dict[int, subprocess.Popen] = {}
_LOCK = threading.RLock()
_STOPPING = threading.Event()  # set once the command is stopping: no child starts after it
_STATE: dict[str, Any] = {"root": None, "janitor": None, "locks": {}}
RUN_PREFIX = "deferlab-run-"  # the run folder in the system's temporary directory: deferlab-run-<pid>-XXXX


@dataclass(frozen=True)
class Finished:
    """How a child ended: its exit status (None when it was killed at its timeout), and whether it timed out."""

    rc: int | None
    timed_out: bool
    seconds: float


# --- the janitor ------------------------------------------------------------------------------------------------------
# Runs with -I -S (no site, no deferlab): it must start in milliseconds and depend on nothing that could be broken.
_JANITOR = r"""
import json, os, shutil, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the command; it says goodbye or dies
if os.fork():  # the janitor is init's child, not the command's: a sweep of the command's descendants spares it
    os._exit(0)
groups, paths = set(), set()
for line in sys.stdin:
    try:
        op, arg = json.loads(line)
    except ValueError:
        continue
    if op == "bye":
        sys.exit(0)
    {"+g": groups.add, "-g": groups.discard, "+p": paths.add, "-p": paths.discard}[op](arg)
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
time.sleep(0.2)
for p in sorted(paths, reverse=True):
    for _ in range(3):
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                os.unlink(p)
            except OSError:
                pass
        if not os.path.lexists(p):
            break
        time.sleep(0.2)
"""


def _start_janitor() -> Any:
    """A new janitor; its pipe (the write end, ours alone: never inherited by an exec'd child)."""
    launcher = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _JANITOR], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True, text=True,
    )  # fmt: skip
    launcher.wait()  # it forked the janitor and left: reaped here, no zombie
    return launcher.stdin


def _tell(op: str, arg: Any = None) -> None:
    """One line to the janitor (started on first use, again if it is gone: one whose every path is registered
    again); a janitor that cannot be told is not the command's failure."""
    with _LOCK:
        pipe = _STATE["janitor"]
        for attempt in range(2):
            if pipe is None:
                if op in ("bye", "-g", "-p"):
                    return
                pipe = _STATE["janitor"] = _start_janitor()
                if attempt:  # a new janitor after the old one went: it must know everything again
                    for line in _registered():
                        pipe.write(json.dumps(line) + "\n")
            try:
                pipe.write(json.dumps([op, arg]) + "\n")
                pipe.flush()
                break
            except (BrokenPipeError, OSError, ValueError):
                pipe = _STATE["janitor"] = None
        if op == "bye" and pipe is not None:
            with contextlib.suppress(OSError, ValueError):
                pipe.close()
            _STATE["janitor"] = None


def _registered() -> list[list[Any]]:
    """What a janitor must know: every live child's group, the run folder, the output locks."""
    lines: list[list[Any]] = [["+g", pid] for pid in _LIVE]
    if _STATE["root"] is not None:
        lines.append(["+p", str(_STATE["root"])])
    lines += [["+p", str(lock)] for _, lock in _STATE["locks"].values()]
    return lines


# --- temporary folders and output locks -------------------------------------------------------------------------------
def run_root() -> Path:
    """The command's run folder (made on first use): every temporary folder of it, and its children's TMPDIR."""
    with _LOCK:
        if _STATE["root"] is None or not Path(_STATE["root"]).is_dir():
            root = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))
            _STATE["root"] = root
            _tell("+p", str(root))
        return Path(_STATE["root"])


def temp_dir(prefix: str) -> Path:
    """A new temporary folder inside the run folder: removed with it when the command ends, however it ends."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=run_root()))


def own(path: str | Path) -> None:
    """``path`` (a staging folder, a partial file outside the run folder) is removed by the janitor should the
    command be killed before it is renamed into place or removed (`disown` then)."""
    _tell("+p", str(Path(path).resolve()))


def disown(path: str | Path) -> None:
    """``path`` is in place (or gone): the janitor leaves it alone."""
    _tell("-p", str(Path(path).resolve()))


def _drop_root() -> None:
    with _LOCK:
        root, _STATE["root"] = _STATE["root"], None
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)
        _tell("-p", str(root))


def lock_output(path: str | Path, flag: str = "--out") -> Path:
    """Hold ``path`` as this command's output folder until it ends: a second deferlab run writing the same
    folder is refused in one line (`UsageError`) before any work. The lock is an ``flock`` on a hidden file
    beside the folder, so a killed run's lock is free at once (its file is removed by the janitor)."""
    target = Path(path).expanduser().resolve()
    key = str(target)
    with _LOCK:
        if key in _STATE["locks"]:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = target.parent / f".{target.name}.deferlab-lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise UsageError(
                f"{flag}: {str(path)!r} is being written by another deferlab run (pid {holder}); accepted: a "
                "folder no other run is writing (wait for it to end, or give another folder)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        _STATE["locks"][key] = (fd, lock)
        _tell("+p", str(lock))
    return target


def release_output(path: str | Path) -> None:
    """The command is done with ``path`` (called by a command run as a library function, without `stopped`)."""
    key = str(Path(path).expanduser().resolve())
    with _LOCK:
        held = _STATE["locks"].pop(key, None)
    _release_locks({key: held} if held else {})


def _release_locks(locks: dict[str, tuple[int, Path]] | None = None) -> None:
    if locks is None:
        with _LOCK:
            locks, _STATE["locks"] = _STATE["locks"], {}
    for fd, lock in locks.values():
        with contextlib.suppress(OSError):
            lock.unlink()
        with contextlib.suppress(OSError):
            os.close(fd)
        _tell("-p", str(lock))


# --- children ---------------------------------------------------------------------------------------------------------
def spawn(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
    stdin: Any = None,
) -> subprocess.Popen:
    """Start ``cmd`` as the leader of a new process group, registered until `reap` (or `kill_all`); its TMPDIR
    is the run folder (unless ``env`` sets one). `Stopped` once the command is stopping: nothing new starts."""
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("TMPDIR", str(run_root()))
    with _LOCK:
        if _STOPPING.is_set():
            raise Stopped("the command is stopping: no new child process")
        proc = subprocess.Popen(
            list(cmd), env=child_env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr, start_new_session=True,
            text=text,
        )  # fmt: skip
        _LIVE[proc.pid] = proc
        _tell("+g", proc.pid)
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
        _tell("-g", proc.pid)


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


def stopping() -> bool:
    """Whether the command is stopping (a worker thread's cue to give up rather than start or record work)."""
    return _STOPPING.is_set()


def kill_all(*, stop: bool = False, wait: bool = True) -> None:
    """Kill every registered child's group (Ctrl-C, SIGTERM, a failed command); ``stop``: and start no new one.
    ``wait=False`` (in a signal handler): only the signals, no waiting (the interrupted code may be inside a
    ``wait`` of the same child, holding its lock); the children stay registered, reaped on the way out."""
    with _LOCK:
        if stop:
            _STOPPING.set()
        procs = list(_LIVE.values())
    if not wait:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        return
    for proc in procs:
        kill_group(proc)
    with _LOCK:
        for proc in procs:
            _LIVE.pop(proc.pid, None)
            _tell("-g", proc.pid)


def _on_signal(signum: int, frame: Any) -> None:
    """Ctrl-C or SIGTERM: the children go first (so the threads waiting on them return now, not when they end),
    then the stop is raised in the main thread, wherever it is."""
    kill_all(stop=True, wait=False)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(f"signal {signum}")


def _clean_up() -> None:
    kill_all()
    _drop_root()
    _release_locks()
    _tell("bye")


atexit.register(_clean_up)
children.install(lambda cmd, timeout: capture(cmd, timeout=timeout))  # the loader's pip runs are ours too


@contextlib.contextmanager
def stopped() -> Iterator[None]:
    """Run a command: SIGTERM raises `Stopped` in the main thread (as Ctrl-C raises KeyboardInterrupt); a stop
    refuses new children at once and kills the running ones (the threads waiting on them return), and however
    the block ends every child is killed with its group, the run folder removed and the output locks freed."""
    previous: dict[int, Any] = {}
    _STOPPING.clear()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            if sig == signal.SIGINT and signal.getsignal(sig) is not signal.default_int_handler:
                continue  # Ctrl-C ignored (a background job) or handled by the caller: left as it is
            previous[sig] = signal.signal(sig, _on_signal)
    try:
        yield
    except (KeyboardInterrupt, Stopped):
        kill_all(stop=True)
        raise
    finally:
        _clean_up()
        _STOPPING.clear()  # the next command of this process (a test calling main() again) starts afresh
        for sig, handler in previous.items():
            signal.signal(sig, handler)
