"""TTFT percentiles and throughput, eager against deferred, at one load, over a load sweep, at capacity.

A request flows: tokenizer (`sim.des`, one FIFO server; EPD adds the
encoder) -> its attention-DP group's scheduler event loop (`sim.eventloop`).
Eager and deferred runs share the workload (same seed, same arrivals) and
differ only in the gate: ``never`` for eager, the policy's gate for deferred,
so every difference is the deferral's.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.policies import Policy
from deferlab.sim.accounting import account_images, place
from deferlab.sim.costmodel import CostModel
from deferlab.sim.des import Timeline, littles_law, simulate
from deferlab.sim.eventloop import run_loops
from deferlab.sim.service import RequestPath, StageTimes, request_path
from deferlab.sim.topology import Topology
from deferlab.sim.workload import Workload, WorkloadSpec, generate

MODES = (("eager", "never"), ("deferred", None))


def metrics(tl: Timeline) -> dict[str, float]:
    """TTFT p50/p90/p99 and mean (s), throughput (requests/s from first arrival to last first token).

    ``ttft_trend``: mean TTFT of the last quarter of arrivals over the first quarter's; near 1 when the queue is
    stable, growing with the run's length when the path is past saturation.
    """
    ttft = tl.ttft
    span = float(tl.finish.max() - tl.arrival.min()) if len(ttft) else 0.0
    by_arrival = ttft[np.argsort(tl.arrival, kind="stable")]
    q = max(len(ttft) // 4, 1)
    first = float(by_arrival[:q].mean()) if len(ttft) else 0.0
    return {
        "ttft_p50_s": float(np.percentile(ttft, 50)),
        "ttft_p90_s": float(np.percentile(ttft, 90)),
        "ttft_p99_s": float(np.percentile(ttft, 99)),
        "ttft_mean_s": float(ttft.mean()),
        "ttft_trend": float(by_arrival[-q:].mean()) / first if first > 0 else 1.0,
        "throughput_rps": len(ttft) / span if span > 0 else float("inf"),
    }


def simulate_mode(
    workload: Workload,
    topology: Topology,
    policy: Policy,
    config: PreprocessConfig,
    cm: CostModel,
    *,
    gate_mode: str | None,
    strategy: str = "lpt-patches",
    decode_on_gpu: bool = False,
    overlap: bool = True,
) -> tuple[Timeline, dict[str, float]]:
    """One run; the timeline and per-request seconds of each part (``per_request_*``) with loop utilizations.

    Each image's owner is placed per batch by the event loop, so outside EPD (whose encoders need the per-rank
    ledger) the per-image columns are all the path needs.
    """
    ledger = account_images(workload, topology, policy, config, cm, gate_mode=gate_mode)
    if topology.epd_encoders:
        ledger = place(ledger, workload, cm, strategy)
    path = request_path(ledger, workload, cm, decode_on_gpu=decode_on_gpu)
    n = workload.n_requests
    cols = [path.producer_s] + ([path.encoder_s] if path.encoder_s is not None else [])
    stages = StageTimes(
        ("producer", "encoder")[: len(cols)], np.stack(cols, axis=1), np.zeros((n, len(cols)), np.int64)
    )
    front = simulate(workload.arrival_s, stages)
    group = np.arange(n, dtype=np.int64) % topology.attn_dp_size
    loop = run_loops(path, front.finish, group, cm, overlap=overlap, strategy=strategy)
    tl = Timeline(front.arrival, loop.finish, front.stage_start, front.stage_end, [])
    span = float(tl.finish.max() - tl.arrival.min()) if n else 0.0
    diag = {f"per_request_{k}_s": v for k, v in _parts(path, loop, n).items()}
    diag.update(loop.summary(span, topology.attn_dp_size))
    return tl, diag


def _parts(path: RequestPath, loop: Any, n: int) -> dict[str, float]:
    """Seconds per request each serial resource spends: the tokenizer, and per group its loop's phases."""
    k = max(n, 1)
    return {
        "tokenizer": float(path.producer_s.mean() + (path.encoder_s.mean() if path.encoder_s is not None else 0.0))
        if n
        else 0.0,
        "scheduler_cpu": loop.cpu_phase_s / k,
        "owner_host": loop.host_vision_s / k,
        "device": loop.device_s / k,
    }


def bottleneck(diag: dict[str, float], groups: int, overlap: bool = True) -> tuple[str, float]:
    """The resource whose seconds per request bound throughput: the tokenizer, or a group's loop.

    A group's loop serves 1/``groups`` of the requests; with overlap its host
    (CPU phase + host-blocking vision) and its device run side by side, so the
    slower of the two sets its pace; without overlap they add up.
    """
    tok = diag["per_request_tokenizer_s"]
    host = (diag["per_request_scheduler_cpu_s"] + diag["per_request_owner_host_s"]) * groups
    dev = diag["per_request_device_s"] * groups
    loop = max(host, dev) if overlap else host + dev
    loop_name = "scheduler host (receive, broadcast, H2D)" if host >= dev or not overlap else "device (ViT, prefill)"
    return ("tokenizer", tok) if tok >= loop else (loop_name, loop)


def compare_modes(
    workload: Workload,
    topology: Topology,
    policy: Policy,
    config: PreprocessConfig,
    cm: CostModel,
    *,
    strategy: str = "lpt-patches",
    decode_on_gpu: bool = False,
    overlap: bool = True,
) -> dict[str, dict[str, float]]:
    """Eager vs deferred on the same workload, with the relative change of each metric."""
    out: dict[str, dict[str, float]] = {}
    for mode, gate in MODES:
        tl, diag = simulate_mode(
            workload,
            topology,
            policy,
            config,
            cm,
            gate_mode=gate,
            strategy=strategy,
            decode_on_gpu=decode_on_gpu,
            overlap=overlap,
        )
        m = metrics(tl) | diag
        if workload.arrival_s.max() > 0 and workload.n_requests >= 200:
            m.update({f"little_{k}": v for k, v in littles_law(tl).items()})
        out[mode] = m
    e, d = out["eager"], out["deferred"]
    out["change_pct"] = {
        k: 100.0 * (d[k] / e[k] - 1.0)
        for k in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "throughput_rps")
        if e[k] > 0 and np.isfinite(e[k])
    }
    return out


def capacity(
    spec: WorkloadSpec, topology: Topology, policy: Policy, config: PreprocessConfig, cm: CostModel, **kw: Any
) -> dict[str, float]:
    """Throughput at unlimited concurrency (every request offered at t = 0) per mode: where each path saturates."""
    return _throughputs(compare_modes(generate(replace(spec, arrival="closed")), topology, policy, config, cm, **kw))


def _throughputs(res: dict[str, dict[str, float]]) -> dict[str, float]:
    return {mode: res[mode]["throughput_rps"] for mode, _ in MODES}


def auto_rates(caps: dict[str, float], points: int = 12) -> list[float]:
    """``points`` offered loads, geometric, from a tenth of the slower path's capacity to 1.3x the faster's."""
    lo, hi = min(caps.values()), max(caps.values())
    return [float(f"{r:.4g}") for r in np.geomspace(0.1 * lo, 1.3 * hi, points)]


def load_sweep(
    spec: WorkloadSpec,
    rates: list[float] | str,
    topology: Topology,
    policy: Policy,
    config: PreprocessConfig,
    cm: CostModel,
    **kw: Any,
) -> list[dict]:
    """``compare_modes`` (``kw``: its keywords) at each Poisson rate and at unlimited concurrency (rate ``inf``).

    ``rates="auto"``: `auto_rates` around each path's capacity, plus ``inf``, extended
    until both paths are past saturation. Every row carries each path's
    unlimited-concurrency throughput (``capacity_rps``) and the highest load it
    carries (``saturation_rps``, see `saturation`), so a plot can mark both.
    """
    closed = compare_modes(generate(replace(spec, arrival="closed")), topology, policy, config, cm, **kw)
    caps = _throughputs(closed)  # `capacity`, from the run the ``inf`` row reports as well (it is deterministic)
    auto = rates == "auto"
    rates = [*auto_rates(caps), math.inf] if auto else list(rates)
    rows = []

    def point(rate: float) -> None:
        if rate == math.inf:
            res = closed
        else:
            res = compare_modes(
                generate(replace(spec, arrival="poisson", rate=rate)), topology, policy, config, cm, **kw
            )
        rows.append({"rate_rps": rate, "capacity_rps": dict(caps), **res})

    for rate in rates:
        point(rate)
    top = max((r for r in rates if math.isfinite(r)), default=None)
    for _ in range(4 if auto and top else 0):  # go on until both paths are past saturation (a Poisson stream can
        if top not in saturation(rows).values():  # be carried a little past the unlimited-concurrency throughput)
            break
        top = float(f"{top * 1.3:.4g}")
        point(top)
    rows.sort(key=lambda r: r["rate_rps"])
    sat = saturation(rows)
    for row in rows:
        row["saturation_rps"] = dict(sat)
    return rows


def saturation(rows: list[dict], served: float = 0.9, trend: float = 2.0) -> dict[str, float | None]:
    """Per path, the highest offered load it still carries: it serves >= ``served`` of the offered load and its
    queue does not keep growing (``ttft_trend`` <= ``trend``). None when even the lightest load is past it.

    Why not the unlimited-concurrency throughput: with every request offered at once the scheduler receives (and
    broadcasts) a burst before it can prefill any of it, so a Poisson stream can be carried a little faster.
    """
    finite = sorted((r for r in rows if math.isfinite(r["rate_rps"])), key=lambda r: r["rate_rps"])
    out: dict[str, float | None] = {}
    for mode, _ in MODES:
        best = None
        for r in finite:
            m = r[mode]
            if m["throughput_rps"] < served * r["rate_rps"] or m["ttft_trend"] > trend:
                break
            best = r["rate_rps"]
        out[mode] = best
    return out
