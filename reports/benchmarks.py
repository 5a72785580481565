"""Benchmarks: run the ``bench``-marked pytest-benchmark suites and read their ratios.

Why ratios: absolute times on a shared 2-core machine are noise; the bench
files measure both sides of a comparison in one run (eager vs deferred,
reference vs impl) and put the ratio into ``extra_info`` (keys ending in
``_ratio``). Those ratios are what the baseline compares, with a loose
per-ratio threshold; absolute medians are reported but never gate.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from reports.claims import REPO_ROOT

DEFAULT_TOLERANCE = 0.5  # a ratio may fall to half its baseline before it counts as a regression


def bench_command(json_path: Path, extra: list[str] | None = None) -> list[str]:
    """The benchmark command: every ``bench``-marked test under properties/, results as pytest-benchmark JSON."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "properties",
        "-m",
        "bench",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--benchmark-json={json_path}",
        *(extra or []),
    ]


def run_benchmarks(json_path: Path, *, extra: list[str] | None = None, log: Any = sys.stderr) -> int:
    """Run the benchmarks in a subprocess; returns pytest's exit code (5 = no benchmark collected)."""
    proc = subprocess.run(bench_command(json_path, extra), cwd=REPO_ROOT, stdout=log, stderr=log, check=False)
    return proc.returncode


def parse_benchmark_json(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per benchmark: name, median/mean/min seconds, rounds, every ``*_ratio`` and the rest of extra_info."""
    out = []
    for b in data.get("benchmarks", []):
        stats = b.get("stats", {})
        extra = b.get("extra_info", {}) or {}
        ratios = {k: float(v) for k, v in extra.items() if k.endswith("_ratio") and isinstance(v, (int, float))}
        out.append(
            {
                "name": b.get("fullname") or b.get("name"),
                "group": b.get("group"),
                "median_s": stats.get("median"),
                "mean_s": stats.get("mean"),
                "min_s": stats.get("min"),
                "stddev_s": stats.get("stddev"),
                "rounds": stats.get("rounds"),
                "ratios": ratios,
                "extra_info": {k: v for k, v in extra.items() if k not in ratios},
            }
        )
    return out


def load_benchmarks(json_path: Path) -> list[dict[str, Any]]:
    """`parse_benchmark_json` of a file, ValueError naming it when unreadable."""
    try:
        return parse_benchmark_json(json.loads(Path(json_path).read_text()))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read benchmark results {str(json_path)!r}: {e}") from None
