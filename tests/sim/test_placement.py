"""Owner placement strategies (sim.placement.strategies): hand cases and properties against an exhaustive oracle."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.impl.placement import assign_owners
from deferlab.sim.placement.compare import compare_placements
from deferlab.sim.placement.strategies import (
    OPTIMAL_MAX_IMAGES,
    STRATEGIES,
    allgather_padding,
    assign,
    imbalance,
    optimal,
    rank_loads,
    round_robin,
)

loads = st.lists(st.integers(0, 10_000), min_size=0, max_size=6)
ranks = st.integers(1, 4)


def _exhaustive_best(costs: list[int], g: int) -> int:
    """The smallest possible largest rank load, by trying every assignment (independent of sim.placement.strategies)."""
    if not costs:
        return 0
    best = None
    for combo in itertools.product(range(g), repeat=len(costs)):
        per = [0] * g
        for i, r in enumerate(combo):
            per[r] += costs[i]
        best = max(per) if best is None else min(best, max(per))
    return best


def test_round_robin_hand_case() -> None:
    """Image i goes to rank i % G."""
    assert round_robin(5, 2) == [[0, 2, 4], [1, 3]]
    assert round_robin(2, 4) == [[0], [1], [], []]


def test_lpt_is_not_optimal_on_the_classic_case() -> None:
    """[3,3,2,2,2] on 2 ranks: LPT reaches 7, the optimum 6 (semantics §7.2)."""
    lpt = assign("lpt-patches", [3, 3, 2, 2, 2], [3, 3, 2, 2, 2], 2)
    assert max(rank_loads(lpt, [3, 3, 2, 2, 2])) == 7
    best = optimal([3, 3, 2, 2, 2], 2)
    assert max(rank_loads(best, [3, 3, 2, 2, 2])) == 6


def test_lpt_patches_is_upstream() -> None:
    """``lpt-patches`` is impl's upstream rule: semantics §7's worked case [1000,100,200,50] -> [[0],[2,1,3]]."""
    assert assign("lpt-patches", [1000, 100, 200, 50], [0, 0, 0, 0], 2) == [[0], [2, 1, 3]]


def test_lpt_cost_uses_the_cost_not_the_patches() -> None:
    """Equal patches but one image costs far more to preprocess: lpt-cost isolates it, lpt-patches cannot tell."""
    owners = assign("lpt-cost", [10, 10, 10], [1.0, 1.0, 5.0], 2)
    assert owners == [[2], [0, 1]]
    assert assign("lpt-patches", [10, 10, 10], [1.0, 1.0, 5.0], 2) == [[0, 2], [1]]


def test_imbalance_and_padding_hand_cases() -> None:
    """Loads [7,5]: imbalance 7/6; owners [[0],[2,1,3]] with tokens [250,25,50,12]: padding 2*250-337."""
    assert imbalance(np.array([7.0, 5.0])) == pytest.approx(7 / 6)
    assert imbalance(np.array([0.0, 0.0])) == 1.0
    assert allgather_padding([[0], [2, 1, 3]], [250, 25, 50, 12]) == 2 * 250 - 337
    assert allgather_padding([[0], []], [99]) == 0  # one image is broadcast, not gathered


@given(costs=loads, g=ranks)
@example(costs=[3, 3, 2, 2, 2], g=2)
def test_optimal_matches_exhaustive_search(costs: list[int], g: int) -> None:
    """The branch-and-bound optimum equals the best of all G^n assignments."""
    best = optimal(costs, g)
    assert max(rank_loads(best, costs), default=0) == _exhaustive_best(costs, g)


@given(costs=loads, g=ranks, strategy=st.sampled_from(STRATEGIES))
def test_every_strategy_is_a_partition(costs: list[int], g: int, strategy: str) -> None:
    """Each image is owned by exactly one of the G ranks."""
    owners = assign(strategy, costs, [float(c) for c in costs], g)
    assert len(owners) == g
    assert sorted(i for r in owners for i in r) == list(range(len(costs)))


@given(costs=loads, g=ranks, strategy=st.sampled_from(STRATEGIES))
def test_optimal_is_never_worse(costs: list[int], g: int, strategy: str) -> None:
    """No strategy beats the optimum's largest rank cost."""
    other = assign(strategy, costs, [float(c) for c in costs], g)
    assert max(rank_loads(optimal(costs, g), costs), default=0) <= max(rank_loads(other, costs), default=0)


def test_optimal_refuses_large_requests() -> None:
    """Brute force only for small n: a clear error past the limit."""
    with pytest.raises(ValueError, match="at most"):
        optimal([1] * (OPTIMAL_MAX_IMAGES + 1), 2)


def test_unknown_strategy_is_named() -> None:
    with pytest.raises(ValueError, match="placement strategy must be one of"):
        assign("random", [1], [1.0], 2)


def test_compare_placements_rows() -> None:
    """One row per strategy; optimal's mean cost imbalance is the lowest; equal loads need no padding."""
    offsets = np.array([0, 5, 9])
    patches = np.array([3, 3, 2, 2, 2, 5, 5, 5, 5])
    tokens = patches
    rows = compare_placements(offsets, patches, tokens, patches.astype(float), 2)
    by = {r["strategy"]: r for r in rows}
    assert set(by) == set(STRATEGIES)
    assert by["optimal"]["cost_imbalance_mean"] <= min(r["cost_imbalance_mean"] for r in rows)
    assert by["lpt-patches"]["cost_imbalance_max"] == pytest.approx(7 / 6)
    assert by["optimal"]["padding_tokens_total"] == 0
    assert assign_owners([5, 5, 5, 5], 2) == [[0, 2], [1, 3]]
