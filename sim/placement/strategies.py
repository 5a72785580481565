"""Owner placement strategies side by side: upstream LPT and the alternatives (semantics §7).

``lpt-patches`` is upstream's rule, from the placement oracle `reference.oracle.placement.assign`
(never re-written here). ``lpt-cost`` feeds the same greedy a better load: the
owner's whole cost, patches *plus* the preprocessing of source pixels that
deferral moves onto the owner. ``round-robin`` is the naive baseline and
``optimal`` the brute-force minimum of the largest owner cost (small n only).
Every rank of a group must compute the same answer, so each is a pure
function of per-image loads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from deferlab.reference.oracle.placement import assign as assign_owners
from deferlab.sim.costmodel import CostModel

STRATEGIES = ("lpt-patches", "lpt-cost", "round-robin", "optimal")
OPTIMAL_MAX_IMAGES = 9


def round_robin(n: int, num_ranks: int) -> list[list[int]]:
    """Image i to rank i % num_ranks."""
    return [list(range(r, n, num_ranks)) for r in range(num_ranks)]


def optimal(costs: Sequence[float], num_ranks: int) -> list[list[int]]:
    """An assignment minimizing the largest rank cost (ties: the first found in LPT-like order).

    Branch and bound over canonical assignments (an image may open at most
    one new, empty rank), so the search is at most Bell(n) leaves.
    """
    n = len(costs)
    if n > OPTIMAL_MAX_IMAGES:
        raise ValueError(f"optimal placement is brute force: at most {OPTIMAL_MAX_IMAGES} images, got {n}")
    if num_ranks <= 0:
        raise ValueError(f"num_ranks must be a positive int, got {num_ranks!r}")
    order = sorted(range(n), key=lambda i: costs[i], reverse=True)
    best_assign = assign_owners(list(costs), num_ranks)
    best = max((sum(costs[i] for i in r) for r in best_assign), default=0.0)
    loads = [0.0] * num_ranks
    current: list[list[int]] = [[] for _ in range(num_ranks)]

    def search(k: int, used: int) -> None:
        nonlocal best, best_assign
        if k == n:
            peak = max(loads)
            if peak < best:
                best, best_assign = peak, [list(r) for r in current]
            return
        i = order[k]
        for r in range(min(used + 1, num_ranks)):
            if loads[r] + costs[i] >= best:
                continue
            loads[r] += costs[i]
            current[r].append(i)
            search(k + 1, max(used, r + 1))
            current[r].pop()
            loads[r] -= costs[i]

    search(0, 0)
    return best_assign


def assign(strategy: str, patches: Sequence[int], costs: Sequence[float], num_ranks: int) -> list[list[int]]:
    """Owners per rank under ``strategy`` for one request's images."""
    if strategy == "lpt-patches":
        return assign_owners(list(patches), num_ranks)
    if strategy == "lpt-cost":
        return assign_owners(list(costs), num_ranks)
    if strategy == "round-robin":
        return round_robin(len(patches), num_ranks)
    if strategy == "optimal":
        return optimal(list(costs), num_ranks)
    raise ValueError(f"placement strategy must be one of {STRATEGIES}, got {strategy!r}")


def rank_loads(owners: Sequence[Sequence[int]], weights: Sequence[float]) -> np.ndarray:
    return np.array([sum(weights[i] for i in r) for r in owners], dtype=np.float64)


def imbalance(loads: np.ndarray) -> float:
    """max / mean over ranks (1.0 = perfect; num_ranks when one rank does everything)."""
    total = float(loads.sum())
    return 1.0 if total == 0 else float(loads.max()) * len(loads) / total


def allgather_padding(owners: Sequence[Sequence[int]], tokens: Sequence[int]) -> int:
    """Rows of padding the all-gather moves: every rank pads to the largest rank's tokens.

    One image is broadcast from its owner instead of gathered (semantics §15.1): no padding.
    """
    n = sum(len(r) for r in owners)
    if len(owners) <= 1 or n <= 1:
        return 0
    per_rank = [sum(tokens[i] for i in r) for r in owners]
    return len(owners) * max(per_rank) - sum(per_rank)


def owner_cost(
    patches: np.ndarray,
    preprocess_elements: np.ndarray,
    h2d_bytes: np.ndarray,
    deferred: np.ndarray,
    cost_model: CostModel,
) -> np.ndarray:
    """Marginal seconds an owner spends on each image: ViT, plus H2D + GPU preprocessing when deferred.

    Marginal: the per-call launch overhead is paid once per owner whatever it
    owns, so it cannot change which rank should take an image and is left out.
    """
    vit = cost_model.vit(patches.astype(np.float64))
    pre = cost_model.h2d(h2d_bytes.astype(np.float64)) + cost_model.gpu_preprocess(
        preprocess_elements.astype(np.float64), 0.0
    )
    return vit + np.where(deferred, pre, 0.0)
