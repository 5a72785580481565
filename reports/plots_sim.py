"""Figures from the simulator's results (``SimResult.to_dict()`` per shipped scenario).

Drawn only from the public result dict: placement rows (``placement``), the
load sweep (``sweep``: TTFT and throughput per arrival rate, eager vs
deferred) and the payload alternatives (``accounting.payload_alternatives_bytes``).
A scenario without the part a figure needs is left out of that figure.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from reports.atomic import write_with_atomic  # noqa: E402

STRATEGY_ORDER = ("lpt-patches", "lpt-cost", "round-robin", "optimal")
PAYLOADS = (
    ("fp32_patches", "FP32 patches (eager)"),
    ("bf16_patches", "BF16 patches"),
    ("raw_uint8", "raw uint8 (deferred)"),
    ("encoded_file", "encoded file"),
)


def _ok(sim: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        s
        for s in sim
        if s.get("status") == "ok" and isinstance(s.get("result"), dict) and not s["result"].get("skipped")
    ]


def _save(fig: plt.Figure, path: Path) -> Path:
    write_with_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path


def _num(x: Any) -> float:
    if isinstance(x, str):
        return math.inf if x == "inf" else math.nan
    return math.nan if x is None else float(x)


def placement_imbalance(sim: list[dict[str, Any]], path: Path) -> Path | None:
    """Owner-cost imbalance (max / mean over vision ranks) per placement strategy and scenario."""
    rows = [(s["scenario"], [p for p in s["result"].get("placement", []) if p.get("requests")]) for s in _ok(sim)]
    rows = [(name, ps) for name, ps in rows if ps]
    if not rows:
        return None
    seen = {p["strategy"] for _, ps in rows for p in ps}
    strategies = [st for st in STRATEGY_ORDER if st in seen] + sorted(seen - set(STRATEGY_ORDER))
    fig, ax = plt.subplots(figsize=(2.4 + 2.2 * len(rows), 4.6), layout="constrained")
    width = 0.8 / len(strategies)
    for k, strat in enumerate(strategies):
        means, maxes = [], []
        for _, ps in rows:
            p = next((p for p in ps if p["strategy"] == strat), None)
            means.append(_num(p["cost_imbalance_mean"]) if p else math.nan)
            maxes.append(_num(p["cost_imbalance_max"]) if p else math.nan)
        x = np.arange(len(rows)) + k * width
        ax.bar(x, means, width, label=f"{strat} (mean)")
        ax.scatter(x, maxes, marker="_", s=200, color="k", zorder=3, label="max over requests" if k == 0 else None)
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2, [name for name, _ in rows])
    ax.axhline(1.0, color="gray", ls="--", lw=0.8)
    ax.set_xlabel("scenario (multi-image requests only)")
    ax.set_ylabel("owner cost imbalance, max / mean over ranks")
    ax.set_title("Owner load imbalance per placement strategy (1.0 = balanced)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def latency_vs_load(sim: list[dict[str, Any]], path: Path) -> Path | None:
    """TTFT p50/p90 and throughput against offered load, eager vs deferred, per scenario with a load sweep."""
    rows = [s for s in _ok(sim) if s["result"].get("sweep")]
    if not rows:
        return None
    fig, axes = plt.subplots(2, len(rows), figsize=(4.8 * len(rows), 7.5), squeeze=False, layout="constrained")
    for j, s in enumerate(rows):
        pts = s["result"]["sweep"]
        finite = [p for p in pts if math.isfinite(_num(p["rate_rps"]))]
        rates = [_num(p["rate_rps"]) for p in finite]
        ax, ax2 = axes[0][j], axes[1][j]
        for mode, color in (("eager", "#d9534f"), ("deferred", "#5cb85c")):
            ax.plot(rates, [p[mode]["ttft_p50_s"] * 1e3 for p in finite], "-o", color=color, label=f"{mode} p50")
            ax.plot(rates, [p[mode]["ttft_p90_s"] * 1e3 for p in finite], "--s", color=color, label=f"{mode} p90")
            ax2.plot(rates, [_num(p[mode]["throughput_rps"]) for p in finite], "-o", color=color, label=mode)
            unlimited = [p for p in pts if not math.isfinite(_num(p["rate_rps"]))]
            if unlimited:
                ax2.axhline(
                    _num(unlimited[0][mode]["throughput_rps"]),
                    color=color,
                    ls=":",
                    lw=1,
                    label=f"{mode}, unlimited concurrency",
                )
        ax.set_title(s["scenario"])
        ax.set_xlabel("offered load (requests/s)")
        ax.set_ylabel("TTFT (ms)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        ax2.set_xlabel("offered load (requests/s)")
        ax2.set_ylabel("throughput (requests/s)")
        ax2.legend(fontsize=7)
    fig.suptitle("Simulated TTFT and throughput vs load, eager vs deferred (cost model: sim/profiles)")
    return _save(fig, path)


def payload_alternatives(sim: list[dict[str, Any]], path: Path) -> Path | None:
    """Bytes one copy of the workload's images takes in each form, per scenario (log scale)."""
    rows = [(s["scenario"], (s["result"].get("accounting") or {}).get("payload_alternatives_bytes")) for s in _ok(sim)]
    rows = [(n, p) for n, p in rows if isinstance(p, dict)]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(2.4 + 2.2 * len(rows), 4.6), layout="constrained")
    width = 0.8 / len(PAYLOADS)
    for k, (key, label) in enumerate(PAYLOADS):
        vals = [_num(p.get(key)) / 2**30 if p.get(key) else math.nan for _, p in rows]
        ax.bar(np.arange(len(rows)) + k * width, vals, width, label=label)
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2, [n for n, _ in rows])
    ax.set_yscale("log")
    ax.set_xlabel("scenario")
    ax.set_ylabel("GiB per copy of every image (log)")
    ax.set_title("Payload alternatives: what a rank would receive per form")
    ax.legend(fontsize=8)
    return _save(fig, path)
