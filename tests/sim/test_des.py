"""The discrete-event engine (sim.des): event order, FIFO service, queueing theory sanity checks."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from deferlab.reference.system.policies import PR_33921
from deferlab.reference.system.profiles import profile
from deferlab.sim.costmodel import load_cost_model
from deferlab.sim.des import EventKind, littles_law, simulate
from deferlab.sim.latency import compare_modes
from deferlab.sim.service import StageTimes
from deferlab.sim.topology import Topology
from deferlab.sim.workload import WorkloadSpec, generate


def _stages(times: np.ndarray, servers: np.ndarray | None = None) -> StageTimes:
    times = np.asarray(times, dtype=np.float64)
    if times.ndim == 1:
        times = times[:, None]
    servers = np.zeros(times.shape, np.int64) if servers is None else np.asarray(servers, np.int64)
    return StageTimes(tuple(f"s{i}" for i in range(times.shape[1])), times, servers)


def test_single_server_fifo_by_hand() -> None:
    """Arrivals 0, 0.5, 5 with service 1: finishes 1, 2, 6 (the second waits, the third finds the server idle)."""
    tl = simulate(np.array([0.0, 0.5, 5.0]), _stages(np.array([1.0, 1.0, 1.0])))
    assert tl.finish.tolist() == [1.0, 2.0, 6.0]
    assert tl.stage_start[:, 0].tolist() == [0.0, 1.0, 5.0]


def test_tandem_closed_loop_is_paced_by_the_bottleneck() -> None:
    """Stages of 1 s and 2 s, n requests at t=0: the last first token is at 1 + 2n."""
    n = 7
    tl = simulate(np.zeros(n), _stages(np.tile([1.0, 2.0], (n, 1))))
    assert tl.finish.max() == 1 + 2 * n


def test_completion_is_handled_before_a_same_time_arrival() -> None:
    """Heap key (time, EventKind, seq): a server freeing at t serves the request arriving at t without queueing it."""
    tl = simulate(np.array([0.0, 1.0]), _stages(np.array([1.0, 1.0])), keep_order=True)
    at_one = [(kind, r) for t, kind, r in tl.order if t == 1.0]
    assert at_one[0] == (EventKind.DONE, 0)
    assert tl.stage_start[1, 0] == 1.0 and tl.finish[1] == 2.0
    assert EventKind.DONE < EventKind.ARRIVE


def test_parallel_servers_do_not_wait_for_each_other() -> None:
    """Two groups (servers 0 and 1): requests routed to different servers run concurrently."""
    tl = simulate(np.zeros(2), _stages(np.array([3.0, 3.0]), np.array([[0], [1]])))
    assert tl.finish.tolist() == [3.0, 3.0]


@given(
    arrivals=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=30),
    data=st.data(),
)
def test_ttft_is_at_least_the_work_and_fifo_keeps_order(arrivals: list[float], data: st.DataObject) -> None:
    """Every request waits at least its own service; one FIFO server finishes requests in arrival order."""
    arr = np.sort(np.array(arrivals))
    service = np.array(data.draw(st.lists(st.floats(0.0, 5.0), min_size=len(arr), max_size=len(arr))))
    tl = simulate(arr, _stages(service))
    assert (tl.ttft >= service - 1e-12).all()
    assert (np.diff(tl.finish) >= 0).all()


def test_mm1_mean_sojourn_matches_theory() -> None:
    """M/M/1 at lambda 0.5, mu 1: mean time in system 1/(mu - lambda) = 2 s, within 10 % over 40,000 requests."""
    rng = np.random.default_rng(12345)
    n = 40_000
    arrivals = np.cumsum(rng.exponential(2.0, n))
    tl = simulate(arrivals, _stages(rng.exponential(1.0, n)))
    assert abs(tl.ttft.mean() - 2.0) / 2.0 < 0.10


def test_littles_law_holds_at_steady_state() -> None:
    """L = lambda * W over the middle half of a Poisson run, within 5 % (stated tolerance: finite window)."""
    rng = np.random.default_rng(7)
    n = 20_000
    arrivals = np.cumsum(rng.exponential(1.0, n))
    tl = simulate(arrivals, _stages(rng.uniform(0.2, 1.4, n)))
    ll = littles_law(tl)
    assert abs(ll["L"] - ll["lambda_W"]) / ll["lambda_W"] < 0.05


def test_littles_law_on_a_simulated_scenario() -> None:
    """The same identity on the full model (docs, TP 8, Poisson 5/s): the DES's bookkeeping is consistent."""
    wl = generate(WorkloadSpec(family="docs", n_requests=4000, arrival="poisson", rate=5.0, seed=3))
    res = compare_modes(wl, Topology(tp_size=8), PR_33921, profile("kimi-k3"), load_cost_model())
    for mode in ("eager", "deferred"):
        m = res[mode]
        assert abs(m["little_L"] - m["little_lambda_W"]) / m["little_lambda_W"] < 0.05
        assert m["ttft_p50_s"] <= m["ttft_p90_s"] <= m["ttft_p99_s"]
