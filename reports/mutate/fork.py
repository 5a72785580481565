"""The warm-fork `Launcher` of a campaign: each worker slot's runs forked from a warm interpreter, else cold.

Why: most of a claims run's start on real SGLang is imports no mutant changes (torch, pytest, Hypothesis);
a server per slot (``deferlab.properties.fork``) pays them once and forks one child per run, whose guard
refuses a load whose record differs from the server's (that run goes cold). Plain runs' servers load the
campaign's unmutated tree, so a mutant that changes what loads runs cold, where the answer is the truth;
probed runs' servers (the reference) load the probed tree itself.

No process outlives the command: each server is started by `reports.core.process.spawn` (its group is killed
when the command ends, on Ctrl-C or SIGTERM), requests reach it through a FIFO whose end of input (this
process closing it, or dying) ends it, and a run's child, a group of its own, is killed here at its
timeout and when the server dies under it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deferlab.reports.core import process
from deferlab.reports.core.runner import Request, cold

SERVER = "deferlab.properties.fork"
PROBES_ENV = "DEFERLAB_MUTATE_PROBES"  # `properties.probes.PROBES_ENV`: a probed run (the reference)


class WarmUnavailable(RuntimeError):
    """The server could not start or died: the caller runs this one cold."""


class Server:
    """One server process for ``engine``, warmed by loading ``spec`` (``probes``: a tree carrying probes)."""

    def __init__(self, engine: str, spec: str, work: Path, *, probes: bool = False, start_timeout: float = 900) -> None:
        self.spec, self._buf, self.child, self.differs = spec, b"", None, False
        fifo = Path(tempfile.mkdtemp(prefix="fork-", dir=work)) / "requests"
        os.mkfifo(fifo)
        self.requests = os.open(fifo, os.O_RDWR)  # never blocks; closing it is the server's end of input
        with open(Path(work) / "fork.log", "ab") as err:
            cmd = [sys.executable, "-m", SERVER, engine, spec, str(fifo), *(["--probes"] if probes else [])]
            env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
            self.proc = process.spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=err)
        ready = self._read(start_timeout)
        if ready is None or not ready.get("ready"):
            self.close()
            raise WarmUnavailable(f"the warm server did not start: {(ready or {}).get('error') or 'no answer'}")

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next JSON line; {} at the end of the server's output (it died), None when ``timeout`` passes first."""
        end = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buf:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return {}
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def run(self, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path, timeout: float | None, spec: str) -> process.Finished:  # fmt: skip
        """``pytest argv`` in a forked child loading ``spec``, killed at ``timeout``; `WarmUnavailable` when the
        server is gone, rc None with ``differs`` noted when the load record was not the server's."""
        t0 = time.perf_counter()
        request = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log), "spec": spec}
        try:
            os.write(self.requests, (json.dumps(request) + "\n").encode())
        except OSError as e:
            raise WarmUnavailable(f"the warm server is gone ({type(e).__name__})") from None
        started = self._read(60)
        if started is None or "pid" not in started:
            self.close()
            raise WarmUnavailable("the warm server did not fork a run")
        self.child = int(started["pid"])
        try:
            done = self._read(timeout)
            timed_out = done is None
            if timed_out:
                self.kill_child()
                done = self._read(60)
        except BaseException:  # stopped (Ctrl-C, SIGTERM) while it ran: the child goes too
            self.kill_child()
            raise
        if not done or "rc" not in done:  # the server died under it: its child must not outlive it (`close`)
            self.close()
            if not timed_out:
                raise WarmUnavailable("the warm server died during a run")
        self.child, self.differs = None, bool((done or {}).get("differs"))
        rc = None if timed_out or done is None else int(done["rc"])
        return process.Finished(rc, timed_out, round(time.perf_counter() - t0, 2))

    def kill_child(self) -> None:
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.child, signal.SIGKILL)

    def close(self) -> None:
        """End the server: its input closed (it finishes and exits), then its group killed if it lingers."""
        self.kill_child()
        with contextlib.suppress(OSError):
            os.close(self.requests)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        process.reap(self.proc)
        self.proc.stdout.close()  # type: ignore[union-attr]


class Forks:
    """A `reports.core.runner.Launcher`: a run forked from its slot's server (the slot: the run's folder), or
    ``cold`` (off, a collection, no server, a load record that differed), each run's way counted."""

    def __init__(
        self, engine: str, source: Path, *, enabled: bool, cold: Callable[..., process.Finished] = cold,
        stop: threading.Event | None = None,
    ) -> None:  # fmt: skip
        self.engine, self.source, self.enabled, self.cold = engine, str(source), enabled, cold
        self.stop = stop or threading.Event()
        self.servers: dict[str, Server] = {}
        self.broken: dict[str, str] = {}  # a slot's server that did not start: why (its runs go cold)
        self.counts: Counter[str] = Counter()
        self.last: dict[str, str] = {}  # the run's folder -> how its last run ran
        self._lock = threading.Lock()

    def __call__(self, request: Request, cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> process.Finished:  # fmt: skip
        if request.collect_only:
            return self.cold(request, cmd, env, cwd, log)
        if not self.enabled or cmd[1:3] != ["-m", "pytest"]:
            return self._cold("warm forks off" if not self.enabled else "not a pytest command", request, cmd, env, cwd, log)  # fmt: skip
        probed = bool(request.env.get(PROBES_ENV))
        key = f"{cwd}|{'probed' if probed else 'plain'}"
        if key in self.broken:
            return self._cold(self.broken[key], request, cmd, env, cwd, log)
        try:
            server = self.servers.get(key)
            if server is None:
                spec = str(request.system.spec) if probed else self.source
                try:
                    server = self.servers[key] = Server(self.engine, spec, Path(cwd), probes=probed)
                except WarmUnavailable as e:
                    self.broken[key] = str(e)
                    raise
            got = server.run(cmd[3:], env=env, cwd=cwd, log=log, timeout=request.timeout, spec=str(request.system.spec))
        except WarmUnavailable as e:
            self.servers.pop(key, None)
            return self._cold(str(e), request, cmd, env, cwd, log)
        if server.differs:
            return self._cold("the load record differed from the warm server's", request, cmd, env, cwd, log)
        self._count(str(cwd), "warm")
        return got

    def _cold(self, why: str, request: Request, cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> process.Finished:  # fmt: skip
        if self.stop.is_set():  # the command is stopping: no new process
            return process.Finished(None, False, 0.0)
        self._count(str(cwd), f"cold: {why}")
        Path(log).write_text("")
        return self.cold(request, cmd, env, cwd, log)

    def _count(self, where: str, how: str) -> None:
        with self._lock:
            self.counts[how] += 1
            self.last[where] = how

    def close(self, probed_only: bool = False) -> None:
        """End the servers (``probed_only``: the reference's, whose probes are gone from the trees)."""
        for key in [k for k in self.servers if not probed_only or k.endswith("|probed")]:
            self.servers.pop(key).close()

    def summary(self) -> dict[str, Any]:
        """How the runs ran: forked warm, and cold with why."""
        cold_runs = {how: n for how, n in sorted(self.counts.items()) if how != "warm"}
        return {"enabled": self.enabled, "warm": self.counts["warm"], "cold": cold_runs}
