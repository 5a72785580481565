"""Vision-DP owner assignment (semantics §7), the oracle: greedy largest-first over a min-heap of rank loads.

Written apart from ``impl.placement`` (the system under test, checked against
this module) so a bug there cannot become the simulator's evidence. The rule:
visit images by load, largest first, equal loads in index order; give each to
the rank with the smallest running total, the lowest rank on ties. A heap
keyed by ``(total, rank)`` pops exactly that rank. One rank owns every image
in request order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from reference.errors import InputValueError


def _check(loads: Sequence[float], num_ranks: int) -> None:
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 1:
        raise InputValueError(f"num_ranks must be an int >= 1, got {num_ranks!r}")
    for i, load in enumerate(loads):
        if isinstance(load, bool) or not isinstance(load, int | float) or not load >= 0:
            raise InputValueError(f"loads[{i}] must be a number >= 0, got {load!r}")


def visit_order(loads: Sequence[float]) -> list[int]:
    """Image indices by load, largest first; equal loads keep index order."""
    return sorted(range(len(loads)), key=lambda i: (-loads[i], i))


def assign(loads: Sequence[float], num_ranks: int) -> list[list[int]]:
    """Image indices per rank, each in the order the rank received them.

    ``loads[i]`` is image i's patch count t*h*w upstream; the simulator also
    feeds other costs through the same rule.
    """
    _check(loads, num_ranks)
    if num_ranks == 1:
        return [list(range(len(loads)))]
    owned: list[list[int]] = [[] for _ in range(num_ranks)]
    heap = [(0.0, r) for r in range(num_ranks)]
    for i in visit_order(loads):
        total, rank = heapq.heappop(heap)
        owned[rank].append(i)
        heapq.heappush(heap, (total + loads[i], rank))
    return owned


def owner_of(owned: Sequence[Sequence[int]]) -> dict[int, int]:
    """Image index -> owning rank."""
    return {i: r for r, idxs in enumerate(owned) for i in idxs}


def rank_rows(owned: Sequence[Sequence[int]], tokens: Sequence[int]) -> list[int]:
    """Output rows per rank (its images' tokens summed); every rank pads to the largest for the all-gather."""
    return [sum(tokens[i] for i in idxs) for idxs in owned]
