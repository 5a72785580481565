"""Figures from the simulator's results (``SimResult.to_dict()`` per shipped scenario).

Drawn only from the public result dict: placement rows (``placement``), the
load sweep (``sweep``: TTFT and throughput per arrival rate, eager vs
deferred, with each path's capacity), the payload alternatives
(``accounting.payload_alternatives_bytes``), and the two extra entries of
`reports.report.simulation.run_scenarios`: ``anchors`` and ``grid``. A scenario
without the part a figure needs is left out of that figure.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from deferlab.reports.report.plots import save as _save  # noqa: E402
from deferlab.reports.report.simulation import scenario_order  # noqa: E402

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
    """TTFT p50/p90 and throughput against offered load, eager vs deferred, one block per scenario with a sweep.

    The PR's A/B setting (``pr-ab-*``) comes first. Dotted verticals mark the
    highest load each path carries (``saturation_rps``: past it the queue keeps
    growing and TTFT turns up); dash-dotted horizontals its throughput at
    unlimited concurrency (every request offered at once, the PR's metric).
    """
    rows = sorted((s for s in _ok(sim) if s["result"].get("sweep")), key=lambda s: scenario_order(s["scenario"]))
    if not rows:
        return None
    cols = min(3, len(rows))
    blocks = -(-len(rows) // cols)
    fig, axes = plt.subplots(2 * blocks, cols, figsize=(5.6 * cols, 7.2 * blocks), squeeze=False, layout="constrained")
    for k in range(blocks * cols):
        ax, ax2 = axes[2 * (k // cols)][k % cols], axes[2 * (k // cols) + 1][k % cols]
        if k >= len(rows):
            ax.set_visible(False)
            ax2.set_visible(False)
            continue
        s = rows[k]
        pts = s["result"]["sweep"]
        finite = [p for p in pts if math.isfinite(_num(p["rate_rps"]))]
        rates = [_num(p["rate_rps"]) for p in finite]
        caps = pts[0].get("capacity_rps") or {}
        sat = pts[0].get("saturation_rps") or {}
        for mode, color in (("eager", "#d9534f"), ("deferred", "#2e8b57")):
            ax.plot(
                rates, [p[mode]["ttft_p50_s"] * 1e3 for p in finite], "-o", ms=3.5, color=color, label=f"{mode} p50"
            )
            ax.plot(
                rates, [p[mode]["ttft_p90_s"] * 1e3 for p in finite], "--s", ms=3.5, color=color, label=f"{mode} p90"
            )
            ax2.plot(rates, [_num(p[mode]["throughput_rps"]) for p in finite], "-o", ms=3.5, color=color, label=mode)
            if sat.get(mode):
                ax.axvline(
                    _num(sat[mode]), color=color, ls=":", lw=1.3, label=f"{mode} carries up to {_num(sat[mode]):.3g}/s"
                )
                ax2.axvline(_num(sat[mode]), color=color, ls=":", lw=1.3)
            if mode in caps:
                ax2.axhline(_num(caps[mode]), color=color, ls="-.", lw=0.8, alpha=0.7, label=f"{mode}, all at once")
        if rates:
            ax2.plot(rates, rates, color="0.6", lw=0.8, label="offered = served")
        ax.set_title(s["scenario"], fontsize=10, fontweight="bold" if s["scenario"].startswith("pr-ab") else None)
        ax.set_yscale("log")
        ax2.set_yscale("log")
        for a in (ax, ax2):
            a.set_xscale("log")
            a.grid(True, which="both", alpha=0.25)
            a.set_xlabel("offered load (requests/s, Poisson; log)")
            for axis in (a.xaxis, a.yaxis):
                axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
                axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_ylabel("TTFT (ms, log)")
        ax2.set_ylabel("throughput (requests/s, log)")
        ax.legend(fontsize=7, loc="upper left")
        ax2.legend(fontsize=6.5, loc="lower right")
    fig.suptitle(
        "Simulated TTFT and throughput vs offered load, eager (red) vs deferred (green); dotted: the highest load each "
        "path carries; dash-dotted: throughput at unlimited concurrency"
    )
    return _save(fig, path)


def _extra(sim: list[dict[str, Any]], key: str) -> Any:
    for s in _ok(sim):
        if key in s["result"]:
            return s["result"][key]
    return None


def tp_size_grid(sim: list[dict[str, Any]], path: Path) -> Path | None:
    """Capacity gain of deferral (%) per TP size x image size; one panel per cost profile and host shape."""
    g = _extra(sim, "grid")
    if not g or not g.get("rows"):
        return None
    rows = g["rows"]
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    shapes = list(dict.fromkeys(r["gpus_per_node"] for r in rows))
    tps, sizes = g["tp_sizes"], [tuple(x) for x in g["image_sizes"]]
    fig, axes = plt.subplots(
        len(profiles),
        len(shapes),
        figsize=(4.6 * len(shapes) + 1, 3.6 * len(profiles)),
        squeeze=False,
        layout="constrained",
    )
    norm = matplotlib.colors.TwoSlopeNorm(vmin=-100, vcenter=0, vmax=400)
    im = None
    for i, prof in enumerate(profiles):
        for j, shape in enumerate(shapes):
            ax = axes[i][j]
            cell = {
                (r["tp_size"], (r["width"], r["height"])): r
                for r in rows
                if r["profile"] == prof and r["gpus_per_node"] == shape
            }
            gain = np.array(
                [[cell[(tp, sz)]["gain_pct"] if (tp, sz) in cell else np.nan for tp in tps] for sz in sizes]
            )
            im = ax.imshow(gain, cmap="RdYlGn", norm=norm, aspect="auto", origin="lower")
            for y, sz in enumerate(sizes):
                for x, tp in enumerate(tps):
                    r = cell.get((tp, sz))
                    if r:
                        ax.text(
                            x,
                            y,
                            f"{r['gain_pct']:+.0f}%\np90 {r['p90_change_pct_half_load']:+.0f}%",
                            ha="center",
                            va="center",
                            fontsize=7.5,
                        )
            ax.set_xticks(range(len(tps)), [f"TP {t}" + (" (2 nodes)" if t > shape else "") for t in tps], fontsize=8)
            ax.set_yticks(range(len(sizes)), [f"4 x {w}x{h}" for w, h in sizes], fontsize=8)
            ax.set_title(f"{prof}, hosts of {shape} GPUs", fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.8, label="capacity gain of deferral (%)")
    fig.suptitle(
        "Does deferral help my topology? Capacity gain (top line) and P90 TTFT change at half the eager capacity"
    )
    return _save(fig, path)


def anchors_chart(sim: list[dict[str, Any]], path: Path) -> Path | None:
    """Model vs the PR's reported numbers, per anchor, cost profile and topology (bars); the real impl run too."""
    rows = _extra(sim, "anchors")
    if not rows:
        return None
    anchors = list(dict.fromkeys(r["anchor"] for r in rows))
    combos = list(dict.fromkeys((r["profile"], r["topology"]) for r in rows))
    cols = 2
    fig, axes = plt.subplots(
        -(-len(anchors) // cols),
        cols,
        figsize=(15, 3.2 * -(-len(anchors) // cols) + 0.6),
        squeeze=False,
        layout="constrained",
    )
    colors = plt.get_cmap("tab10")
    for k, ax in enumerate(axes.flat):
        if k >= len(anchors):
            ax.set_visible(False)
            continue
        sel = {(r["profile"], r["topology"]): r for r in rows if r["anchor"] == anchors[k]}
        first = next(iter(sel.values()))
        unit = "x" if "model_x" in first else "pct"
        bars = [("PR #33921 reported", first[f"reported_{unit}"], "k")]
        bars += [
            (f"model: {p}, {t}", sel[(p, t)][f"model_{unit}"], colors(n))
            for n, (p, t) in enumerate(combos)
            if (p, t) in sel
        ]
        if unit == "x" and "real_impl_x" in first:
            bars.append(("impl's real producers, timed here", first["real_impl_x"], "0.55"))
        y = np.arange(len(bars))[::-1]
        ax.barh(y, [b[1] for b in bars], color=[b[2] for b in bars], height=0.7)
        for yy, b in zip(y, bars, strict=True):
            label = f" {b[1]:+.0f}% " if unit == "pct" else f" {b[1]:.1f}x "
            ax.text(b[1], yy, label, va="center", ha="left" if b[1] >= 0 else "right", fontsize=8)
        ax.set_yticks(y, [b[0] for b in bars], fontsize=8)
        ax.axvline(0 if unit == "pct" else 1, color="0.4", lw=0.8)
        lo, hi = min(0, *(b[1] for b in bars)), max(0, *(b[1] for b in bars))
        ax.set_xlim(lo - 0.18 * (hi - lo), hi + 0.18 * (hi - lo))
        ax.set_title(anchors[k], fontsize=9.5)
        ax.set_xlabel("deferred vs eager (%)" if unit == "pct" else "speed-up, eager time / deferred time (x)")
    fig.suptitle("Model vs what PR #33921 reported, per cost profile and topology; no constant was fitted to these")
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
