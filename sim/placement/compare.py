"""Every placement strategy on the same requests: load imbalance and all-gather padding.

Imbalance is max / mean over the vision ranks, in owner cost (seconds of
ViT + deferred preprocessing) and in patches; padding is the rows the
all-gather moves beyond the real tokens. ``optimal`` (brute force) is only
evaluated on requests with at most `OPTIMAL_MAX_IMAGES` images; the row says
how many requests each strategy covered.
"""

from __future__ import annotations

import numpy as np

from deferlab.sim.placement.strategies import (
    OPTIMAL_MAX_IMAGES,
    STRATEGIES,
    allgather_padding,
    assign,
    imbalance,
    rank_loads,
)


def compare_placements(
    offsets: np.ndarray,
    patches: np.ndarray,
    tokens: np.ndarray,
    costs: np.ndarray,
    num_ranks: int,
    *,
    max_requests: int = 2000,
) -> list[dict]:
    """One row per strategy over the first ``max_requests`` multi-image requests."""
    if num_ranks <= 1:
        return []
    counts = np.diff(offsets)
    chosen = np.flatnonzero(counts >= 2)[:max_requests]
    rows = []
    for strategy in STRATEGIES:
        cost_imb, patch_imb, pads, covered = [], [], [], 0
        cache: dict[tuple, tuple[float, float, int]] = {}
        for r in chosen:
            a, b = int(offsets[r]), int(offsets[r + 1])
            if strategy == "optimal" and b - a > OPTIMAL_MAX_IMAGES:
                continue
            p, c, t = patches[a:b].tolist(), costs[a:b].tolist(), tokens[a:b].tolist()
            key = (tuple(p), tuple(c))
            if key not in cache:
                owners = assign(strategy, p, c, num_ranks)
                cache[key] = (
                    imbalance(rank_loads(owners, c)),
                    imbalance(rank_loads(owners, p)),
                    allgather_padding(owners, t),
                )
            ci, pi, pad = cache[key]
            cost_imb.append(ci)
            patch_imb.append(pi)
            pads.append(pad)
            covered += 1
        rows.append(
            {
                "strategy": strategy,
                "requests": covered,
                "cost_imbalance_mean": float(np.mean(cost_imb)) if covered else None,
                "cost_imbalance_max": float(np.max(cost_imb)) if covered else None,
                "patch_imbalance_mean": float(np.mean(patch_imb)) if covered else None,
                "patch_imbalance_max": float(np.max(patch_imb)) if covered else None,
                "padding_tokens_mean": float(np.mean(pads)) if covered else None,
                "padding_tokens_total": int(np.sum(pads)) if covered else 0,
            }
        )
    return rows
