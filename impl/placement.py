"""Vision-DP owner assignment (semantics §7): greedy largest-first, exactly as upstream.

Every rank of the attention-TP group computes this independently and must get
the same answer, so it is a pure function of the loads: a stable sort by load
(descending, equal loads keep index order), then each image goes to the rank
with the smallest running total, the lowest rank on ties.
"""

from __future__ import annotations

from collections.abc import Sequence

from deferlab.reference.system.validate import check_number, check_positive_int


def assign_owners(loads: Sequence[int], num_ranks: int) -> list[list[int]]:
    """Image indices per rank, each rank's list in the order images were given to it.

    ``loads[i]`` is image i's patch count t*h*w. With one rank, rank 0 owns
    every image in request order.
    """
    num_ranks = check_positive_int("num_ranks", num_ranks)
    for i, load in enumerate(loads):
        check_number(f"loads[{i}]", load, minimum=0)
    if num_ranks == 1:
        return [list(range(len(loads)))]
    order = sorted(range(len(loads)), key=lambda i: loads[i], reverse=True)
    totals = [0] * num_ranks
    owners: list[list[int]] = [[] for _ in range(num_ranks)]
    for i in order:
        rank = min(range(num_ranks), key=lambda r: totals[r])
        owners[rank].append(i)
        totals[rank] += loads[i]
    return owners


def owner_of(owners: Sequence[Sequence[int]]) -> dict[int, int]:
    """Invert an assignment: image index -> owning rank."""
    return {i: rank for rank, idxs in enumerate(owners) for i in idxs}


def rank_tokens(owners: Sequence[Sequence[int]], tokens: Sequence[int]) -> list[int]:
    """Output rows per rank (sum of its images' tokens); all ranks pad to the max."""
    return [sum(tokens[i] for i in idxs) for idxs in owners]
