"""Run the report's steps one by one: a failing step is recorded as failed and the run goes on.

Why: the report composes parts other people own (the property suites, the
simulator, the benchmarks); one of them being broken must not hide what the
others found. Every step is timed and announced on stderr, because some take
minutes.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TextIO


class StepFailed(Exception):
    """Raised by a step that produced a usable ``value`` but must still be reported as failed."""

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


@dataclass
class StepRecord:
    name: str
    status: str  # ok | failed | skipped
    seconds: float
    error: str | None = None


class StepRunner:
    """Runs named steps, records `StepRecord`s, prints progress to ``log``."""

    def __init__(self, skip: set[str] | None = None, log: TextIO | None = None) -> None:
        self.skip = set(skip or ())
        self.log = log or sys.stderr
        self.records: list[StepRecord] = []

    def say(self, message: str) -> None:
        print(f"[deferlab] {message}", file=self.log, flush=True)

    def skipped(self, name: str, why: str) -> None:
        self.records.append(StepRecord(name, "skipped", 0.0, why))
        self.say(f"{name}: skipped ({why})")

    def run(self, name: str, fn: Callable[..., Any], *args: Any, group: str | None = None, **kwargs: Any) -> Any:
        """Run ``fn``; return its value, or None when skipped/failed (a `StepFailed` value is still returned)."""
        if name in self.skip or (group is not None and group in self.skip):
            self.skipped(name, "--skip")
            return None
        self.say(f"{name}: running")
        t0 = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except StepFailed as e:
            self._done(name, "failed", t0, str(e))
            return e.value
        except Exception as e:  # noqa: BLE001 - a broken part is reported, not fatal
            tb = traceback.format_exc(limit=6)
            self._done(name, "failed", t0, f"{type(e).__name__}: {e}")
            print(tb, file=self.log)
            return None
        self._done(name, "ok", t0, None)
        return value

    def _done(self, name: str, status: str, t0: float, error: str | None) -> None:
        secs = round(time.perf_counter() - t0, 2)
        self.records.append(StepRecord(name, status, secs, error))
        self.say(f"{name}: {status} in {secs:.1f} s" + (f" ({error})" if error else ""))

    def as_dicts(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]
