"""Simulator performance targets (issue 5), as pytest-benchmark benchmarks: run with ``-m bench``.

Targets on the 2-core testbed: accounting + placement of 100,000 requests in
under 10 s; 100,000 requests through the DES (tokenizer stage and the
schedulers' event loops, accounting included) under 10 s per path (issue 11);
the DES at 10,000 requests (eager and deferred) under 30 s; `deferlab calibrate`
is timed by its own run (it prints its wall time; target 3 min on 2 cores); all
IPC verdicts under 30 s. Each benchmark records its ratio to the target in
``extra_info`` and fails with the miss factor if it is over.
"""

from __future__ import annotations

import pytest

from deferlab.reference.system.policies import PR_33921
from deferlab.reference.system.profiles import profile
from deferlab.sim.accounting import account
from deferlab.sim.costmodel import load_cost_model
from deferlab.sim.latency import compare_modes, simulate_mode
from deferlab.sim.topology import Topology
from deferlab.sim.workload import WorkloadSpec, generate

pytestmark = pytest.mark.bench
CFG = profile("kimi-k3")
CM = load_cost_model()


def _check(benchmark, target_s: float) -> None:
    took = benchmark.stats.stats.max
    benchmark.extra_info["target_s"] = target_s
    benchmark.extra_info["ratio_to_target"] = took / target_s
    assert took < target_s, f"{took:.2f} s is {took / target_s:.2f}x the {target_s} s target"


@pytest.mark.parametrize("family", ["mixed", "chat"])
def test_accounting_and_placement_100k_requests(benchmark, family: str) -> None:
    """100,000 requests (generation excluded) through the gate, placement and every ledger on TP 8 / DP 2."""
    wl = generate(WorkloadSpec(family=family, n_requests=100_000, seed=11))
    topo = Topology(tp_size=8, attn_dp_size=2)

    def work():
        led = account(wl, topo, PR_33921, CFG, CM, strategy="lpt-cost")
        return led.summary()

    benchmark.pedantic(work, rounds=3, iterations=1)
    _check(benchmark, 10.0)


def test_des_10k_requests(benchmark) -> None:
    """10,000 Poisson requests through the DES, eager and deferred (accounting included)."""
    wl = generate(WorkloadSpec(family="mixed", n_requests=10_000, arrival="poisson", rate=10.0, seed=12))
    topo = Topology(tp_size=8, attn_dp_size=2)
    benchmark.pedantic(lambda: compare_modes(wl, topo, PR_33921, CFG, CM), rounds=3, iterations=1)
    _check(benchmark, 30.0)


@pytest.mark.parametrize("gate", ["never", None], ids=["eager", "deferred"])
def test_des_100k_requests(benchmark, gate: str | None) -> None:
    """100,000 Poisson requests (mixed, TP 8 / DP 2, 10 req/s) through the tokenizer DES and the event loops."""
    wl = generate(WorkloadSpec(family="mixed", n_requests=100_000, arrival="poisson", rate=10.0, seed=12))
    topo = Topology(tp_size=8, attn_dp_size=2)
    benchmark.pedantic(lambda: simulate_mode(wl, topo, PR_33921, CFG, CM, gate_mode=gate), rounds=2, iterations=1)
    _check(benchmark, 10.0)


def test_ipc_verdicts(benchmark) -> None:
    """Every policy's IPC verdicts at the default budget."""
    from deferlab.sim.ipc.claim import verdicts

    benchmark.pedantic(lambda: verdicts(60), rounds=1, iterations=1)
    _check(benchmark, 30.0)
