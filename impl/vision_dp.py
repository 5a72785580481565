"""The model's vision-DP runner whole: each rank runs the tower on the images it owns, the all-gather puts every
rank's rows together, and every rank returns all images' embeddings in request order (semantics §7.3).

What SGLang's ``run_dp_sharded_mrope_vision_model`` computes, stated without its
bookkeeping: owners by `impl.placement.assign_owners` (the LPT rule), one tower
call per owned image (``tower.embed(features, grid)``, the tower's own per-image
answer), a rank's rows in the order it owns them, and the gathered rows cut back
per rank and per image. Padding to the longest rank is invisible (cut away), so
it is not modelled; one rank is the same answer computed once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from deferlab.impl.placement import assign_owners
from deferlab.reference.system.validate import check_positive_int


def run_sharded(
    features: Sequence[torch.Tensor], grids: Sequence[Sequence[int]], num_ranks: int, tower: Any
) -> list[torch.Tensor]:
    """Each rank's return: every image's tower embeddings, concatenated in request order."""
    num_ranks = check_positive_int("num_ranks", num_ranks)
    owners = assign_owners([math.prod(int(v) for v in g) for g in grids], num_ranks)
    per_image: list[torch.Tensor | None] = [None] * len(grids)
    gathered: list[torch.Tensor] = []
    for idxs in owners:  # each rank's own rows, in the order it owns its images (then "all-gathered")
        gathered += [tower.embed(features[i], [int(v) for v in grids[i]]) for i in idxs]
    for i, rows in zip([i for idxs in owners for i in idxs], gathered, strict=True):
        per_image[i] = rows
    whole = torch.cat([t for t in per_image if t is not None]) if grids else torch.empty(0)
    return [whole.clone() for _ in range(num_ranks)]
