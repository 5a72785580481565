"""Owner-side materialization (semantics §6) and the vision-DP flow (semantics §7) under each consumer policy."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from deferlab.impl.items import MultimodalItem, item_grid
from deferlab.impl.model import get_image_features, materialize
from deferlab.impl.placement import assign_owners
from deferlab.impl.processor import Processor
from deferlab.impl.transport import deliver
from deferlab.reference.system.config import BackgroundConfig
from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY
from deferlab.reference.system.policies import INTERIM_3D3194F, PR_33921, RELEASED, Policy
from tests.impl.support import bf16_bits, small_config

K3ISH = small_config(patch_size=14, in_patch_limit=65536, patch_limit_on_one_side=512)
# Three images with three different grids: 84x84 -> 6x6, 56x56 -> 4x4, 28x28 -> 2x2 patches.
SIZES = [(3, 84, 84), (4, 56, 56), (3, 28, 28)]


def _images(sizes=SIZES, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 256, s, dtype=torch.uint8, generator=gen) for s in sizes]


def _items(policy: Policy, defer: bool, imgs: list[torch.Tensor] | None = None) -> list[MultimodalItem]:
    out = Processor(K3ISH, policy=policy, cuda_available=defer, device="cpu").process(imgs or _images())
    assert all((DEFERRED_PREPROCESSING_KEY in it.model_specific_data) is defer for it in out.items)
    return deliver(out.items, "cpu", 1, policy).rank_items[0]


def _eager_per_image(policy: Policy) -> list[torch.Tensor]:
    items = _items(policy, defer=False)
    return [materialize(items, [i], config=K3ISH, device="cpu", policy=policy) for i in range(len(items))]


def test_pr_rejects_mixed_batches() -> None:
    """PR #33921: an owner selection mixing deferred and eager items raises the upstream ValueError."""
    d, e = _items(PR_33921, True), _items(PR_33921, False)
    with pytest.raises(ValueError, match="cannot mix deferred and preprocessed image features"):
        materialize([d[0], e[1], d[2]], [0, 1, 2], config=K3ISH, device="cpu", policy=PR_33921)


def test_released_accepts_mixed_batches_equal_to_all_eager() -> None:
    """Released: a mixed selection materializes, BF16 bitwise equal to the all-eager features."""
    d, e = _items(RELEASED, True), _items(RELEASED, False)
    mixed = [d[0], e[1], d[2]]
    got = materialize(mixed, [2, 0, 1], config=K3ISH, device="cpu", policy=RELEASED)
    want = torch.cat([_eager_per_image(RELEASED)[i] for i in (2, 0, 1)])
    assert torch.equal(bf16_bits(got), bf16_bits(want))


def test_interim_local_grid_bug_and_released_fix() -> None:
    """3 images, 2 ranks: rank 1 owns [1, 2]; INTERIM_3D3194F checks grids [0, 1] and raises; released is right."""
    items = _items(INTERIM_3D3194F, True)
    owners = assign_owners([int(item_grid(it).prod()) for it in items], 2)
    assert owners == [[0], [1, 2]]
    with pytest.raises(ValueError, match="produced wrong grids"):
        materialize(items, owners[1], config=K3ISH, device="cpu", policy=INTERIM_3D3194F)
    with pytest.raises(ValueError, match="produced wrong grids"):
        get_image_features(items, 2, config=K3ISH, device="cpu", policy=INTERIM_3D3194F)
    released = get_image_features(_items(RELEASED, True), 2, config=K3ISH, device="cpu", policy=RELEASED)
    want = torch.cat(_eager_per_image(RELEASED))
    assert torch.equal(bf16_bits(released.features), bf16_bits(want))


@pytest.mark.parametrize("policy", [PR_33921, INTERIM_3D3194F, RELEASED], ids=lambda p: p.name)
@given(st.permutations([0, 1, 2]), st.integers(1, 3))
def test_any_owner_subset_in_any_order(policy: Policy, order: list[int], k: int) -> None:
    """Materializing any subset in any order gives each image its own features; the interim version instead
    raises exactly when the local-position grids differ from the selected images' grids."""
    items = _items(policy, True)
    idxs = order[:k]
    grids = [item_grid(it)[0].tolist() for it in items]
    if policy.grid_check == "local" and [grids[p] for p in range(k)] != [grids[i] for i in idxs]:
        with pytest.raises(ValueError, match="produced wrong grids"):
            materialize(items, idxs, config=K3ISH, device="cpu", policy=policy)
        return
    got = materialize(items, idxs, config=K3ISH, device="cpu", policy=policy)
    want = torch.cat([_eager_per_image(RELEASED)[i] for i in idxs])
    assert torch.equal(bf16_bits(got), bf16_bits(want))


def test_non_tensor_feature_is_a_type_error() -> None:
    """A non-deferred item's feature must be a tensor."""
    items = [MultimodalItem(feature=[1.0, 2.0], model_specific_data={"image_grid_thw": torch.tensor([[1, 1, 1]])})]
    for policy in (PR_33921, RELEASED):
        with pytest.raises(TypeError, match="must be a torch.Tensor"):
            materialize(items, [0], config=K3ISH, device="cpu", policy=policy)


def test_pr_uses_the_first_items_config() -> None:
    """PR: mean/std/background come from the FIRST selected item, so an item's own config is ignored after it."""
    imgs = _images([(4, 28, 28), (4, 28, 28)], seed=3)
    white = Processor(K3ISH.with_(background=BackgroundConfig("white")), cuda_available=True, device="cpu")
    black = Processor(K3ISH.with_(background=BackgroundConfig("black")), cuda_available=True, device="cpu")
    w_items, b_items = white.process(imgs).items, black.process(imgs).items
    mixed = [w_items[0], b_items[1]]
    got = materialize(mixed, [0, 1], config=K3ISH, device="cpu", policy=PR_33921)
    all_white = materialize(w_items, [0, 1], config=K3ISH, device="cpu", policy=PR_33921)
    assert torch.equal(bf16_bits(got), bf16_bits(all_white))
    own = materialize(b_items, [1], config=K3ISH, device="cpu", policy=PR_33921)
    assert not torch.equal(bf16_bits(got[4:]), bf16_bits(own))  # image 1 lost its own (black) background


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_vision_dp_restores_request_order(ranks: int) -> None:
    """Features come back in request order whatever the owner split, and each image is preprocessed once."""
    imgs = _images([(3, 84, 84), (3, 28, 28), (4, 56, 56), (3, 56, 28), (3, 28, 56)], seed=5)
    items = _items(RELEASED, True, imgs)
    res = get_image_features(items, ranks, config=K3ISH, device="cpu", policy=RELEASED)
    want = torch.cat([materialize(items, [i], config=K3ISH, device="cpu", policy=RELEASED) for i in range(len(items))])
    assert torch.equal(bf16_bits(res.features), bf16_bits(want))
    assert sorted(i for r in res.ranks for i in r.owned) == list(range(len(items)))
    assert sum(r.log.preprocess_calls for r in res.ranks) == sum(1 for r in res.ranks if r.owned)


def test_empty_selection_and_request() -> None:
    """No owned images: an empty (0, 3, p, p) BF16 tensor; an empty request gives empty features."""
    items = _items(RELEASED, True)
    assert tuple(materialize(items, [], config=K3ISH, device="cpu", policy=RELEASED).shape) == (0, 3, 14, 14)
    assert get_image_features([], 2, config=K3ISH, device="cpu").features.shape[0] == 0
