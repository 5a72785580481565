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
import json
import os
import select
import signal
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
                [sys.executable, "-m", "deferlab.reports.warm", engine, spec],
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


def _child(request: dict[str, Any], engine: str, baseline: list[dict[str, str]]) -> int:
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
    got = _records(_load(engine, request["spec"]))
    if got != baseline:
        print(f"[deferlab] warm: this load's record differs from the server's ({len(got)} vs {len(baseline)} entries)")
        sys.stdout.flush()
        return DIFFERS
    import pytest

    rc = pytest.main(list(request["argv"]))
    sys.stdout.flush()
    sys.stderr.flush()
    return int(rc)


def serve(engine: str, spec: str) -> None:
    """Load ``spec``, forget it, say ready, then fork one child per request line until end of input."""
    out = sys.stdout.buffer
    path_before = list(sys.path)
    try:
        source = _load(engine, spec)
        baseline = _records(source)
        package = source.engine.package
    except BaseException as e:  # noqa: BLE001 - any failure is the answer "not ready"
        out.write((json.dumps({"ready": False, "error": f"{type(e).__name__}: {e}"[:300]}) + "\n").encode())
        out.flush()
        return
    del source
    _forget(package, path_before)
    import _pytest.config  # noqa: F401 - pytest's own start, warm too
    import hypothesis  # noqa: F401
    import pytest  # noqa: F401

    out.write((json.dumps({"ready": True, "records": len(baseline)}) + "\n").encode())
    out.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request, engine, baseline)
            except BaseException:  # noqa: BLE001 - the child's failure is its exit status, never the server's
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        out.write((json.dumps({"pid": pid}) + "\n").encode())
        out.flush()
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        out.write((json.dumps({"rc": rc}) + "\n").encode())
        out.flush()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
