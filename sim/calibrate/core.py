"""Shared parts of ``deferlab calibrate``: timing with repeats, the machine's description, the recorder.

Split out so the in-process measurements (`sim.calibrate.run`) and the
cross-process ones (`sim.calibrate.crossproc`) use one timing rule and one
record format.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MiB = 1 << 20
SMALL = 5  # small messages are cheap and noisy on a shared host: this many times the repeats
Say = Callable[[str], None]


def _proc(path: str, key: str) -> str:
    try:
        return next(x.split(":", 1)[1].strip() for x in Path(path).read_text().splitlines() if x.startswith(key))
    except (OSError, StopIteration):
        return "unknown"


def machine() -> str:
    """CPU model, cores, memory, OS, Python and torch: where the numbers were taken."""
    import torch

    model, mem = _proc("/proc/cpuinfo", "model name"), _proc("/proc/meminfo", "MemTotal")
    mem = f"{int(mem.split()[0]) / 2**20:.0f} GiB" if mem.split()[0].isdigit() else mem
    return (
        f"{model}, {os.cpu_count()} cores, {mem}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, torch {torch.__version__}"
    )


def timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Seconds per call over ``repeats`` calls after one warm-up call."""
    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


class Recorder:
    """Collects measured constants (value from the median, spread = [min, max] over the repeats) and observations."""

    def __init__(self, repeats: int, say: Say) -> None:
        self.repeats, self.say, self.mach = repeats, say, machine()
        self.c: dict[str, dict[str, Any]] = {}
        self.obs: dict[str, Any] = {}

    def put(self, name: str, per: Sequence[float], unit: str, how: str, value: float | None = None) -> None:
        """A constant from per-repeat values ``per`` (already in ``unit``)."""
        v = statistics.median(per) if value is None else value
        self.c[name] = {"value": v, "unit": unit, "source": "measured", "how": how, "machine": self.mach}
        self.c[name].update(spread=[min(per), max(per)], repeats=len(per))

    def rate(self, name: str, nbytes: float, times: Sequence[float], how: str, base: float = 0.0) -> None:
        """Bytes per second: ``nbytes`` over (time - ``base``), ``base`` being a fixed cost measured apart."""
        per = [nbytes / max(t - base, 1e-9) for t in times]
        self.put(name, per, "bytes/s", how, nbytes / max(statistics.median(times) - base, 1e-9))
