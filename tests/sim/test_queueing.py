"""The DES against queueing theory: mean waiting time of a single FIFO stage vs M/M/1 and M/D/1 closed forms.

Why this bound is fair. Mean waits at load 0.9 are dominated by long busy
periods, so a short run can miss theory by more than 2 % for a correct engine,
and a long one makes a 2 % bound meaningless only if its own noise is far
below 2 %. So the test measures its noise: R = 16 independent replications
(one seed each), each of n requests started empty with the first 5 % dropped as
warm-up, and it asserts both

* the 99.9 % confidence half-width of the replication mean (Student t, 15
  degrees of freedom, 4.07) is at most 1 % of theory: the run is long enough for
  a correct engine to pass the 2 % bound except with probability far below
  10^-3 (and the seeds are fixed, so the outcome is deterministic); and
* the estimate is within 2 % of theory.

n grows with the load (the relaxation time grows like 1/(1 - sqrt(rho))^2):
0.3: 300k, 0.6: 1M, 0.9: 4M requests per replication. The closed-form
(Lindley) engine runs them in about 10 s in all; `test_engines_agree` below and
`test_eventloop.test_loop_reduces_to_one_fifo_stage` extend the check to the
heap engine and the scheduler's event loop, which must give the same timeline.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deferlab.sim.des import simulate
from deferlab.sim.service import StageTimes

REPLICATIONS = 16
T_999 = 4.073  # Student t, two-sided 99.9 %, 15 degrees of freedom
N_PER_LOAD = {0.3: 300_000, 0.6: 1_000_000, 0.9: 4_000_000}


def _one(times: np.ndarray) -> StageTimes:
    return StageTimes(("s",), times[:, None], np.zeros((len(times), 1), np.int64))


def mean_wait(rho: float, kind: str, n: int, seed: int) -> float:
    """Mean time in queue (start of service - arrival) of one replication, service time 1 (mu = 1)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rho, n))
    service = rng.exponential(1.0, n) if kind == "M/M/1" else np.ones(n)
    tl = simulate(arrival, _one(service))
    wait = tl.stage_start[:, 0] - arrival
    return float(wait[n // 20 :].mean())


def theory(rho: float, kind: str) -> float:
    """Wq = rho / (mu - lambda) for M/M/1; half of it for M/D/1 (Pollaczek-Khinchine), mu = 1."""
    wq = rho / (1.0 - rho)
    return wq if kind == "M/M/1" else wq / 2.0


@pytest.mark.parametrize("kind", ["M/M/1", "M/D/1"])
@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
def test_mean_wait_matches_theory_within_2_percent(rho: float, kind: str) -> None:
    n = N_PER_LOAD[rho]
    waits = np.array([mean_wait(rho, kind, n, seed=1000 * int(rho * 10) + r) for r in range(REPLICATIONS)])
    expected = theory(rho, kind)
    estimate = float(waits.mean())
    half = T_999 * float(waits.std(ddof=1)) / math.sqrt(REPLICATIONS)
    assert half <= 0.01 * expected, f"{kind} at {rho}: noise {half / expected:.2%} of theory; the 2 % bound is unfair"
    assert abs(estimate - expected) <= 0.02 * expected, f"{kind} at {rho}: {estimate:.4f} vs theory {expected:.4f}"


@settings(max_examples=60)
@given(
    gaps=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=40),
    data=st.data(),
    stages=st.integers(1, 3),
)
def test_engines_agree(gaps: list[float], data: st.DataObject, stages: int) -> None:
    """One server per stage: the heapq engine and the closed form give the same timeline (ties included)."""
    n = len(gaps)
    arrival = np.cumsum(np.array(gaps))
    times = np.array(data.draw(st.lists(st.floats(0.0, 5.0), min_size=n * stages, max_size=n * stages)))
    st_ = StageTimes(tuple(f"s{i}" for i in range(stages)), times.reshape(n, stages), np.zeros((n, stages), np.int64))
    heap = simulate(arrival, st_, engine="heap")
    closed = simulate(arrival, st_, engine="lindley")
    assert np.allclose(heap.finish, closed.finish, rtol=1e-12, atol=1e-9)
    assert np.allclose(heap.stage_start, closed.stage_start, rtol=1e-12, atol=1e-9)


def test_engine_choice_is_checked() -> None:
    st_ = StageTimes(("s",), np.ones((2, 1)), np.array([[0], [1]]))
    with pytest.raises(ValueError, match="one server per stage"):
        simulate(np.zeros(2), st_, engine="lindley")
    with pytest.raises(ValueError, match="engine must be one of"):
        simulate(np.zeros(2), st_, engine="fast")
