"""Run the report's steps one by one: a failing step is recorded as failed and the run goes on.

Why: the report composes parts other people own (the property suites, the
simulator, the benchmarks); one of them being broken must not hide what the
others found. Every step is timed and announced on stderr, because some take
minutes.

One step may run beside the others (`StepRunner.start`): the properties step, whose work is child processes
(the checks under pytest-xdist), so the report's own steps use the time the parent would spend waiting. Its
record keeps its place (the order the steps started in), whenever it ends.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from deferlab.reference.system.errors import Stopped
from deferlab.reports.core import process


class StepFailed(Exception):
    """Raised by a step that produced a usable ``value`` but must still be reported as failed."""

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


@dataclass
class StepRecord:
    name: str
    status: str  # ok | failed | skipped | stopped (never written: a stopped report writes nothing)
    seconds: float
    error: str | None = None


class StepRunner:
    """Runs named steps, records `StepRecord`s, prints progress to ``log``."""

    def __init__(self, skip: set[str] | None = None, log: TextIO | None = None) -> None:
        self.skip = set(skip or ())
        self.log = log or sys.stderr
        self.records: list[StepRecord] = []
        self._lock = threading.RLock()  # `say` and the records: a step started beside the others ends any time

    def say(self, message: str) -> None:
        with self._lock:
            print(f"[deferlab] {message}", file=self.log, flush=True)

    def skipped(self, name: str, why: str, slot: int | None = None) -> None:
        with self._lock:
            self._record(StepRecord(name, "skipped", 0.0, why), slot)
            self.say(f"{name}: skipped ({why})")

    def start(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], Any]:
        """`run` ``fn`` in a thread, beside the steps that follow; returns the function that waits for it and
        gives what `run` would have. For a step whose work is a child process (the parent only waits): the steps
        run meanwhile are the report's own, in this process. Its record is placed where it started."""
        with self._lock:
            slot = len(self.records)
            self.records.append(StepRecord(name, "running", 0.0))
        out: list[Any] = [None]

        def step() -> None:
            with contextlib.suppress(Stopped):  # the main thread stops the command; this thread just ends
                out[0] = self.run(name, fn, *args, _slot=slot, **kwargs)

        thread = threading.Thread(target=step, name=f"deferlab-step-{name}", daemon=True)
        thread.start()

        def wait() -> Any:
            thread.join()
            if process.stopping():
                raise Stopped(f"{name}: stopped with the command")
            return out[0]

        return wait

    def run(
        self, name: str, fn: Callable[..., Any], *args: Any, group: str | None = None, _slot: int | None = None,
        **kwargs: Any,
    ) -> Any:  # fmt: skip
        """Run ``fn``; return its value, or None when skipped/failed (a `StepFailed` value is still returned)."""
        if name in self.skip or (group is not None and group in self.skip):
            self.skipped(name, "--skip", _slot)
            return None
        self.say(f"{name}: running")
        t0 = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except Exception as e:
            if process.stopping():  # the command is being stopped: its children were killed under this step
                self._done(name, "stopped", t0, None, _slot)
                raise Stopped(f"{name}: stopped with the command") from None
            if isinstance(e, StepFailed):
                self._done(name, "failed", t0, str(e), _slot)
                return e.value
            tb = traceback.format_exc(limit=6)
            self._done(name, "failed", t0, f"{type(e).__name__}: {e}", _slot)
            with self._lock:
                print(tb, file=self.log)
            return None
        if process.stopping():  # what a stopped child left is no step's result
            self._done(name, "stopped", t0, None, _slot)
            raise Stopped(f"{name}: stopped with the command")
        self._done(name, "ok", t0, None, _slot)
        return value

    def _record(self, record: StepRecord, slot: int | None) -> None:
        with self._lock:
            if slot is None:
                self.records.append(record)
            else:
                self.records[slot] = record

    def _done(self, name: str, status: str, t0: float, error: str | None, slot: int | None = None) -> None:
        secs = round(time.perf_counter() - t0, 2)
        self._record(StepRecord(name, status, secs, error), slot)
        self.say(f"{name}: {status} in {secs:.1f} s" + (f" ({error})" if error else ""))

    def as_dicts(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]
