"""`impl.sglang.consumer`: owners, the model's loader on any owner subset, vision DP, the whitelist."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from tests.impl.sglang.support import K3, u8

LOCAL_INDEX_BUG = ("sglang-0.5.18",)  # semantics §6.2, found by features()["owner_subsets"]; see VERSIONS.md


def test_owner_assignment_worked_cases(sgl):
    assert sgl.assign_owners([1000, 100, 200, 50], 2) == [[0], [2, 1, 3]]
    assert sgl.assign_owners([8, 5, 3], 2) == [[0], [1, 2]]
    assert sgl.assign_owners([5, 5, 5, 5], 2) == [[0, 2], [1, 3]]
    local = sgl.local_item_indices([1000, 100, 200, 50], 1, 2)
    assert local is None or local == [2, 1, 3]


def _pinned_local_index_bug(sgl, run) -> bool:
    """On a release with the local-index bug, a non-prefix owner list must raise "wrong grids" (pinned)."""
    if sgl.name not in LOCAL_INDEX_BUG:
        return False
    with pytest.raises(ValueError, match="produced wrong grids"):
        run()
    return True


def test_any_owner_subset_gets_its_own_features(sgl):
    items = sgl.process([u8(3, 28, 28), u8(3, 56, 84, 1), u8(4, 112, 70, 2)], K3, policy=None).items
    if _pinned_local_index_bug(sgl, lambda: sgl.materialize(items, [2, 1], K3)):
        return
    parts = sgl.materialize(items, [0, 1, 2], K3, policy=None).split([4, 24, 48])
    for owner in ([2, 1], [1, 0, 2], [2]):
        assert torch.equal(sgl.materialize(items, owner, K3, policy=None), torch.cat([parts[i] for i in owner]))


def test_deferred_equals_eager_preprocessing_on_the_owner(sgl):
    images = [u8(3, 100, 90), Image.fromarray(np.random.default_rng(3).integers(0, 256, (40, 30, 4), dtype=np.uint8))]
    items = sgl.process(images, K3, policy=None).items
    if _pinned_local_index_bug(sgl, lambda: sgl.materialize(items, [1, 0], K3)):
        return
    feats = sgl.materialize(items, [1, 0], K3)
    pv, _ = sgl.preprocess([images[1], images[0]], K3)
    assert feats.dtype == torch.bfloat16 and torch.equal(feats, pv.to(torch.bfloat16))


def test_vision_dp_owners_and_copies(sgl):
    items = sgl.process([u8(3, 28, 28), u8(3, 56, 84, 1), u8(3, 112, 70, 2)], K3, policy=None).items
    if _pinned_local_index_bug(sgl, lambda: sgl.vision_dp(items, 2, K3, policy=None)):
        return
    group = sgl.vision_dp(items, 2, K3, policy=None)
    assert group.owners == sgl.assign_owners([4, 24, 48], 2) == [[2], [1, 0]]
    assert [r.log.images_preprocessed for r in group.ranks] == [1, 2]
    assert [r.log.h2d_copies for r in group.ranks] == [1, 2]  # whitelisted: owners copy only their own
    for i, feat in enumerate(group.per_image):
        assert torch.equal(feat, sgl.materialize(items, [i], K3))


def test_scheduler_whitelist(sgl):
    assert sgl.can_skip_pre_embed("KimiK3ForConditionalGeneration") is True
    assert sgl.can_skip_pre_embed("LlamaForCausalLM") is False
