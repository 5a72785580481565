"""The negative control of claim C6: without the scheduler's pre-embed skip, every rank copies every item.

Why a test of the model: C6's claim test (``properties/claims/test_placement.py``)
asks the system under test through the seam whether ranks that own nothing
keep deferred features in host memory; that check is only meaningful if it can
fail. Here deferlab's own model is run with the skip turned off
(``skip_move=False``, a model not on the whitelist) to show the counters the
check reads do see every copy.
"""

from __future__ import annotations

import torch

from deferlab.impl.model import get_image_features
from deferlab.impl.processor import Processor
from deferlab.properties.claims.test_mixed import SMALL


def test_without_the_skip_every_rank_copies_every_item() -> None:
    """Three deferred items on four ranks, no pre-embed skip: each rank makes at least three H2D copies."""
    control = Processor(SMALL, cuda_available=True, device="cpu").process(
        [torch.zeros((3, 4, 4), dtype=torch.uint8) for _ in range(3)]
    )
    no_skip = get_image_features(control.items, 4, config=SMALL, device="cpu", skip_move=False)
    assert all(r.log.h2d_copies >= 3 for r in no_skip.ranks), "the control run should copy everything everywhere"
