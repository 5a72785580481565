"""TTFT percentiles and throughput, eager against deferred, at one load or over a sweep.

Eager and deferred runs share the workload (same seed, same arrivals) and
differ only in the gate: ``never`` for eager, the policy's gate for deferred,
so every difference is the deferral's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from reference.config import PreprocessConfig
from reference.versions import Policy
from sim.accounting import account
from sim.costmodel import CostModel
from sim.des import Timeline, littles_law, simulate
from sim.service import stage_times
from sim.topology import Topology
from sim.workload import Workload, WorkloadSpec, generate


def metrics(tl: Timeline, stage_busy: dict[str, float] | None = None) -> dict[str, float]:
    """TTFT p50/p90/p99 (s), throughput (requests/s from first arrival to last first token)."""
    ttft = tl.ttft
    span = float(tl.finish.max() - tl.arrival.min()) if len(ttft) else 0.0
    out = {
        "ttft_p50_s": float(np.percentile(ttft, 50)),
        "ttft_p90_s": float(np.percentile(ttft, 90)),
        "ttft_p99_s": float(np.percentile(ttft, 99)),
        "ttft_mean_s": float(ttft.mean()),
        "throughput_rps": len(ttft) / span if span > 0 else float("inf"),
    }
    if stage_busy:
        out.update({f"busy_{k}_s": v for k, v in stage_busy.items()})
    return out


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
) -> tuple[Timeline, dict[str, float]]:
    """One DES run; returns the timeline and the mean service time per stage."""
    ledger = account(workload, topology, policy, config, cm, gate_mode=gate_mode, strategy=strategy)
    st = stage_times(ledger, workload, cm, decode_on_gpu=decode_on_gpu)
    tl = simulate(workload.arrival_s, st)
    busy = {name: float(st.times[:, i].mean()) for i, name in enumerate(st.stages)}
    span = float(tl.finish.max() - tl.arrival.min()) if workload.n_requests else 0.0
    if span > 0 and st.rank_vision_s is not None:
        util = ledger.per_rank(st.rank_vision_s) / span
        busy["rank_vision_util_max"] = float(util.max())
        busy["rank_vision_util_min"] = float(util.min())
    return tl, busy


def compare_modes(
    workload: Workload,
    topology: Topology,
    policy: Policy,
    config: PreprocessConfig,
    cm: CostModel,
    *,
    strategy: str = "lpt-patches",
    decode_on_gpu: bool = False,
) -> dict[str, dict[str, float]]:
    """Eager vs deferred on the same workload, with the relative change of each metric."""
    out: dict[str, dict[str, float]] = {}
    for mode, gate in (("eager", "never"), ("deferred", None)):
        tl, busy = simulate_mode(
            workload, topology, policy, config, cm, gate_mode=gate, strategy=strategy, decode_on_gpu=decode_on_gpu
        )
        m = metrics(tl)
        m.update({k if k.startswith("rank_") else f"mean_service_{k}_s": v for k, v in busy.items()})
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


def load_sweep(
    spec: WorkloadSpec,
    rates: list[float],
    topology: Topology,
    policy: Policy,
    config: PreprocessConfig,
    cm: CostModel,
    *,
    strategy: str = "lpt-patches",
    decode_on_gpu: bool = False,
) -> list[dict]:
    """``compare_modes`` at each Poisson rate and at unlimited concurrency (rate ``inf``)."""
    rows = []
    for rate in rates:
        s = replace(spec, arrival="closed") if rate == float("inf") else replace(spec, arrival="poisson", rate=rate)
        res = compare_modes(generate(s), topology, policy, config, cm, strategy=strategy, decode_on_gpu=decode_on_gpu)
        rows.append({"rate_rps": rate, **res})
    return rows
