"""A warm interpreter for many short pytest runs on one engine: the third-party imports are paid once.

Why: a claims run on real SGLang starts a new Python, and ~6 s of its ~8 s
start is torch, its compiler stack, sympy, pytest and Hypothesis, which no
mutant changes. A server process loads the engine once (which imports all of
that), then *forgets* everything that is the engine's or deferlab's: their
modules, deferlab's import finders and stand-ins, the ``sys.path`` entries the
load added. Each run is a ``fork`` of that state, so the child imports the
engine and deferlab afresh from disk (a mutant's file included), exactly as a
new process would, with only third-party modules already imported.

Guard: before its pytest session a child loads the engine tree it is given
and compares the loader's record (every stand-in, bare package, failed body)
with the server's own first load; if they differ (a third-party module kept
state that changes how the engine loads, or a mutant that changes it) the
child stops with `DIFFERS` and the caller runs that one cold, where the
answer is the truth. A server that dies is replaced by cold runs too.

Protocol (JSON lines): the server prints ``{"ready": ...}``, then per request
``{"argv", "env", "cwd", "log", "spec"}`` answers ``{"pid": N}`` once forked and
``{"rc": N}`` when the child ends (a negative N: killed by that signal). The
child is its own process group (``setsid``): a timeout kills it and whatever
it started. End of input ends the server.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIFFERS = 86  # the child's exit status when its load record is not the server's
_SERVERS: list[WarmServer] = []
_LOCK = threading.Lock()


class WarmUnavailable(RuntimeError):
    """The server could not start or died: the caller runs this one cold."""


@dataclass
class Result:
    rc: int | None
    timed_out: bool
    seconds: float


class WarmServer:
    """Client side of one server process for ``engine`` (``sglang``/``vllm``), warmed by loading ``spec``."""

    def __init__(self, engine: str, spec: str, *, log: Path, start_timeout: float = 900) -> None:
        self.engine, self.spec = engine, spec
        self._buf = b""
        self.child: int | None = None
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "deferlab.reports.mutate.warm", engine, spec],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, start_new_session=True,
            )  # fmt: skip
        with _LOCK:
            _SERVERS.append(self)
        ready = self._read(start_timeout)
        if ready is None or not ready.get("ready"):
            self.close()
            why = (ready or {}).get("error") or "no answer"
            raise WarmUnavailable(f"the warm server for {engine} {spec} did not start: {why}")

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next JSON line, None at end of output or when ``timeout`` seconds pass first."""
        end = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buf:
            left = None if end is None else max(0.0, end - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def run(
        self, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path, timeout: float, spec: str | None = None
    ) -> Result:
        """``pytest argv`` in a forked child (``env``, ``cwd``, output to ``log``, loading ``spec``: default the
        server's), killed at ``timeout``.

        `WarmUnavailable` when the server is gone; rc `DIFFERS` when the child's load record was not the
        server's (run it cold)."""
        t0 = time.perf_counter()
        request = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log), "spec": spec or self.spec}
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError) as e:
            raise WarmUnavailable(f"the warm server is gone ({type(e).__name__})") from None
        started = self._read(60)
        if started is None or "pid" not in started:
            self.close()
            raise WarmUnavailable("the warm server did not fork a run")
        self.child = int(started["pid"])
        timed_out = False
        done = self._read(timeout)
        if done is None:
            timed_out = True
            self.kill_child()
            done = self._read(60)
        self.child = None
        if done is None or "rc" not in done:
            self.close()
            if timed_out:
                return Result(None, True, round(time.perf_counter() - t0, 2))
            raise WarmUnavailable("the warm server died during a run")
        return Result(int(done["rc"]), timed_out, round(time.perf_counter() - t0, 2))

    def kill_child(self) -> None:
        """Kill the running child's process group (a timeout, Ctrl-C)."""
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.child, signal.SIGKILL)

    def close(self) -> None:
        """End the server (its input closed, then killed if it lingers)."""
        self.kill_child()
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with _LOCK, contextlib.suppress(ValueError):
            _SERVERS.remove(self)


def close_all() -> None:
    """End every server this process started (campaign end, Ctrl-C)."""
    with _LOCK:
        servers = list(_SERVERS)
    for s in servers:
        s.close()


atexit.register(close_all)


# --- the server -------------------------------------------------------------------------------------------------------
def _ours(name: str, module: Any, engine_package: str) -> bool:
    """A module the child must import afresh: the engine's, deferlab's, or one of deferlab's stand-ins."""
    if name == engine_package or name.startswith(engine_package + "."):
        return True
    if name == "deferlab" or name.startswith("deferlab."):
        return True
    if getattr(module, "__deferlab_standin__", False):
        return True
    loader = getattr(getattr(module, "__spec__", None), "loader", None)
    return type(loader).__module__.startswith("deferlab.")


def _records(source: Any) -> list[dict[str, str]]:
    root = str(source.root)
    return [{k: v.replace(root, "<root>") for k, v in r.as_dict().items()} for r in source.importer.records]


def _load(engine: str, spec: str) -> Any:
    import importlib

    return importlib.import_module(f"deferlab.impl.{engine}.sources").load(spec)


def _forget(engine_package: str, path_before: list[str]) -> None:
    for name in [n for n, m in list(sys.modules.items()) if _ours(n, m, engine_package)]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("deferlab.")]
    sys.path[:] = [p for p in sys.path if p in path_before]
    sys.path_importer_cache.clear()


BASELINE_ENV = "DEFERLAB_WARM_BASELINE"  # the fork's guard: a JSON file of the server's load record ...
GUARD_ENV = "DEFERLAB_WARM_GUARD"  # ... and "<engine> <spec>" to load and compare
PRELOAD_ENV = "DEFERLAB_WARM_PRELOAD"  # "module:function" the server calls before its load (mutate's probe builtin)


def _child(request: dict[str, Any], engine: str, baseline: list[dict[str, str]]) -> int:
    """The fork: its own session, the run's output, directory and environment, then the pytest session with
    this module as a plugin, whose `pytest_sessionstart` loads the engine where a new process's session has it
    loaded (after every plugin's configure: mutate's probes, ``--sglang``) and compares the record."""
    os.setsid()
    with open(request["log"], "ab", buffering=0) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()  # as ``python -m pytest`` run there would have it
    base = Path(request["log"]).with_name(f".warm-baseline-{os.getpid()}.json")
    base.write_text(json.dumps(baseline))
    os.environ[BASELINE_ENV], os.environ[GUARD_ENV] = str(base), f"{engine} {request['spec']}"
    import pytest

    try:
        rc = pytest.main([*request["argv"], "-p", "deferlab.reports.mutate.warm"])
    finally:
        base.unlink(missing_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    return int(rc)


def pytest_sessionstart(session: Any) -> None:
    """The guard, in a fork only: the engine loaded (now, if no plugin has yet) must have the server's record."""
    path, guard = os.environ.get(BASELINE_ENV), os.environ.get(GUARD_ENV)
    if not path or not guard:
        return
    engine, spec = guard.split(" ", 1)
    got = _records(_load(engine, spec))
    baseline = json.loads(Path(path).read_text())
    if got != baseline:
        import pytest

        pytest.exit(f"[deferlab] warm: this load's record differs from the server's ({len(got)} vs {len(baseline)} entries)", returncode=DIFFERS)  # fmt: skip


def _preload() -> None:
    """What a run's plugins would have in place before the engine loads (``DEFERLAB_WARM_PRELOAD``)."""
    target = os.environ.get(PRELOAD_ENV, "").strip()
    if target:
        import importlib

        module, _, name = target.partition(":")
        getattr(importlib.import_module(module), name)()


def _warm_up(engine: str, spec: str) -> list[dict[str, str]]:
    """The state every fork starts from: ``spec`` loaded once (after `_preload`), its record kept, then forgotten
    (`_forget`), with pytest's own start imported too. Returns the record a fork's load must match."""
    path_before = list(sys.path)
    _preload()
    source = _load(engine, spec)
    baseline, package = _records(source), source.engine.package
    del source
    _forget(package, path_before)
    import _pytest.config  # noqa: F401 - pytest's own start, warm too
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401

    return baseline


def serve(engine: str, spec: str) -> None:
    """Load ``spec``, forget it, say ready, then fork one child per request line until end of input."""
    out = sys.stdout.buffer
    try:
        baseline = _warm_up(engine, spec)
    except BaseException as e:  # noqa: BLE001 - any failure is the answer "not ready"
        out.write((json.dumps({"ready": False, "error": f"{type(e).__name__}: {e}"[:300]}) + "\n").encode())
        out.flush()
        return
    out.write((json.dumps({"ready": True, "records": len(baseline)}) + "\n").encode())
    out.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child_exit(request, engine, baseline)
        out.write((json.dumps({"pid": pid}) + "\n").encode())
        out.flush()
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        out.write((json.dumps({"rc": rc}) + "\n").encode())
        out.flush()


# --- the daemon: one warm server per (engine, spec) shared by later commands (``deferlab repro``) ----------------------
IDLE_ENV = "DEFERLAB_WARM_IDLE"  # seconds a daemon waits for its next run before it ends (default 600)


def socket_path(engine: str, spec: str) -> Path:
    """Where the daemon for ``engine`` ``spec`` listens: a private folder under ``/tmp`` (a Unix socket's path
    must stay short), named by the interpreter, the deferlab cache and the spec."""
    from deferlab.impl.loader.wheels import deferlab_cache

    key = "\0".join(
        [sys.executable, str(deferlab_cache()), engine, os.path.abspath(spec) if os.path.exists(spec) else spec]
    )
    digest = hashlib.blake2b(key.encode(), digest_size=10).hexdigest()
    folder = Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / f"deferlab-warm-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder / f"{engine}-{digest}.sock"


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _start_daemon(engine: str, spec: str, path: Path, timeout: float) -> socket.socket | None:
    """Start a detached daemon (or join one still loading) and wait until it answers (None: it ended first,
    e.g. ``spec`` does not load)."""
    pid = _starting(path)
    return _wait_for(path, pid if pid is not None else _spawn(engine, spec, path).pid, timeout)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # our own child: reap it if it ended
    except ChildProcessError:
        done = 0
    if done:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _wait_for(path: Path, pid: int, timeout: float) -> socket.socket | None:
    """Connect once the daemon at ``path`` answers; None when process ``pid`` ends first or ``timeout`` passes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        sock = _connect(path) if path.exists() else None
        if sock is not None:
            return sock
        if not _alive(pid):
            return None
        time.sleep(0.05)
    return None


def prestart(engine: str, spec: str) -> bool:
    """Start the daemon for ``engine`` ``spec`` in the background unless one answers (``deferlab compare`` does
    it for the specs it wrote reproducers for, so the reviewer's first ``deferlab repro`` is warm); whether one
    was started. It loads while the caller goes on; a spec that does not load ends it quietly."""
    path = socket_path(engine, spec)
    sock = _connect(path)
    if sock is not None:
        sock.close()
        return False
    if _starting(path) is not None:
        return False
    _spawn(engine, spec, path)
    return True


def _spawn(engine: str, spec: str, path: Path) -> subprocess.Popen:
    """A detached daemon for ``path``; its pid in ``<path>.pid`` while it loads (a second caller waits for it)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a daemon that died left its socket behind
    with open(path.with_suffix(".log"), "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "deferlab.reports.mutate.warm", "--socket", str(path), engine, spec],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )  # fmt: skip
    path.with_suffix(".pid").write_text(str(proc.pid))
    return proc


def _starting(path: Path) -> int | None:
    """The pid of a daemon for ``path`` that is still loading (its pid file, removed once it serves, names a live
    process), else None."""
    try:
        pid = int(path.with_suffix(".pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def run_served(
    engine: str, spec: str, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path, timeout: float = 600
) -> Result | None:
    """``pytest argv`` forked from the daemon for ``engine`` ``spec`` (started, detached, if none answers);
    None when no daemon can serve it (``spec`` does not load, a load record that differs): run it cold."""
    t0 = time.perf_counter()
    Path(log).write_bytes(b"")
    path = socket_path(engine, spec)
    sock = _connect(path) or _start_daemon(engine, spec, path, timeout)
    if sock is None:
        return None
    request = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log), "spec": spec}
    started: dict[str, Any] = {}
    with sock, sock.makefile("rwb") as fh:
        try:
            fh.write((json.dumps(request) + "\n").encode())
            fh.flush()
            started = json.loads(fh.readline() or b"{}")
            sock.settimeout(timeout)
            done = json.loads(fh.readline() or b"{}")
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError, KeyError, ValueError):
                os.killpg(int(started["pid"]), signal.SIGKILL)
            return Result(None, True, round(time.perf_counter() - t0, 2))
        except (OSError, ValueError):
            return None
    if "rc" not in done or done["rc"] == DIFFERS:
        return None
    return Result(int(done["rc"]), False, round(time.perf_counter() - t0, 2))


def stop_daemon(engine: str, spec: str) -> bool:
    """Ask the daemon for ``engine`` ``spec`` to end now; whether one was there."""
    sock = _connect(socket_path(engine, spec))
    if sock is None:
        return False
    with sock:
        sock.sendall(b'{"stop": true}\n')
        with contextlib.suppress(OSError):
            sock.recv(16)
    return True


def serve_socket(path: Path, engine: str, spec: str) -> None:
    """`serve` over a Unix socket, one run at a time, until ``DEFERLAB_WARM_IDLE`` seconds pass without one."""
    idle = float(os.environ.get(IDLE_ENV, "600"))
    baseline = _warm_up(engine, spec)  # a spec that does not load ends the daemon here: the client runs cold

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    server.bind(str(tmp))
    os.replace(tmp, path)  # the socket appears only once the daemon can serve
    inode = os.stat(path).st_ino
    with contextlib.suppress(OSError, ValueError):
        if int(path.with_suffix(".pid").read_text()) == os.getpid():
            path.with_suffix(".pid").unlink()  # loaded: no longer "starting" (`_starting`)
    server.listen(8)
    server.settimeout(idle)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return
            with conn, conn.makefile("rwb") as fh:
                line = fh.readline()
                if not line:
                    continue
                request = json.loads(line)
                if request.get("stop"):
                    return
                pid = os.fork()
                if pid == 0:
                    server.close()
                    _child_exit(request, engine, baseline)
                fh.write((json.dumps({"pid": pid}) + "\n").encode())
                fh.flush()
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    fh.write((json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n").encode())
                    fh.flush()
    finally:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == inode:  # not a newer daemon's socket
                path.unlink()


def _child_exit(request: dict[str, Any], engine: str, baseline: list[dict[str, str]]) -> None:
    code = 1
    try:
        code = _child(request, engine, baseline)
    except BaseException:  # noqa: BLE001 - the child's failure is its exit status, never the server's
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--socket":
        serve_socket(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        serve(sys.argv[1], sys.argv[2])
