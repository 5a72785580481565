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
import math
from collections.abc import Sequence

from deferlab.reference.system.validate import check_number, check_positive_int


def _check(loads: Sequence[float], num_ranks: int) -> int:
    num_ranks = check_positive_int("num_ranks", num_ranks)
    for i, load in enumerate(loads):
        # The simulator places every request's images: a plain finite load skips the call, anything else
        # (NumPy scalars, bad values) gets the front door's own check and message.
        if not (type(load) in (int, float) and 0 <= load < math.inf):
            check_number(f"loads[{i}]", load, minimum=0)
    return num_ranks


def visit_order(loads: Sequence[float]) -> list[int]:
    """Image indices by load, largest first; equal loads keep index order."""
    return sorted(range(len(loads)), key=lambda i: (-loads[i], i))


def assign(loads: Sequence[float], num_ranks: int) -> list[list[int]]:
    """Image indices per rank, each in the order the rank received them.

    ``loads[i]`` is image i's patch count t*h*w upstream; the simulator also
    feeds other costs through the same rule.
    """
    num_ranks = _check(loads, num_ranks)
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
