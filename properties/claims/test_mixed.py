"""Property 4: batches mixing deferred and eager items (semantics §6), claim C7.

A forward batch can hold a deferred request next to an eager one (a float
tensor, a big image, a GPU-transport fallback), so an owner's selection may
mix both kinds. Each policy must behave as documented: the PR raises
"cannot mix", the released consumer accepts and must give every image the
features the all-eager path gives it, for any owner subset in any order.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deferlab.properties import claimcheck, seam
from deferlab.properties import strategies as s
from deferlab.properties.claims.test_eager_deferred import bits, eager_features, patch_counts
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.contract import ACCEPTED_MODES

POLICIES = ["PR_33921", "RELEASED", "HARDENED", "INTERIM_3D3194F"]
SMALL = PreprocessConfig(patch_size=2, merge_kernel_size=2, in_patch_limit=16, patch_limit_on_one_side=4)


def mixed_items(
    impl: seam.Impl, policy: str, config: PreprocessConfig, images: list, mask: list[bool], eager: list | None = None
) -> list:
    """Image i's item deferred where ``mask[i]``, else its eager item (FP32 patches; ``eager``: the eager
    producer's items for these images, config and policy, when the caller already has them)."""
    if eager is None:
        eager = impl.process(images, config, policy=policy, transport="cuda_ipc").items
    deferred = impl.epd_items(images, config, policy=policy)
    return [deferred[i] if m else eager[i] for i, m in enumerate(mask)]


def check_mixed_equals_eager(
    impl: seam.Impl, policy: str, config: PreprocessConfig, images: list, mask: list[bool], partition: list
) -> None:
    """Every owner materializes its mixed selection, and each image gets its all-eager BF16 features.

    On deferlab's model the eager producer runs once: its items give the all-eager features and the batch's
    eager half (the same call on the same inputs; the model's owner, `impl.model.materialize`, reads items
    without changing them). Real code's owner might change them, so there each use gets its own producer call."""
    eager = None
    if not seam.is_real_code(impl):
        eager = impl.process(images, config, policy=policy, transport="cuda_ipc", device="cpu").items
    want = eager_features(impl, policy, config, images, "cpu", items=eager)
    counts = patch_counts(images, config)
    rank_items = impl.deliver(mixed_items(impl, policy, config, images, mask, eager), len(partition), policy=policy)
    for rank, owned in enumerate(partition):
        if not owned:
            continue
        feats = torch.as_tensor(seam.to_numpy(impl.materialize(rank_items[rank], owned, config, policy=policy)))
        assert feats.shape[0] == sum(counts[i] for i in owned), f"rank {rank} produced {feats.shape[0]} rows"
        for i, part in zip(owned, feats.split([counts[i] for i in owned]), strict=True):
            assert (bits(part) == bits(want[i])).all(), f"image {i} (deferred={mask[i]}) on rank {rank} != all-eager"


@st.composite
def mixed_requests(
    draw: st.DrawFn, *, modes: tuple[str, ...] | None = None
) -> tuple[PreprocessConfig, list[Any], list[bool], list[list[int]]]:
    """(config, images, deferred mask with both kinds, owner partition) on small images."""
    config = draw(st.just(SMALL) | s.pixel_configs())
    images = draw(s.requests(min_images=2, max_images=4, max_side=9, modes=modes))
    n = len(images)
    mask = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(lambda m: any(m) and not all(m)))
    return config, images, mask, draw(s.owner_partitions(n))


def _pinned() -> list[tuple]:
    t = [torch.full((3, h, w), 40 * k, dtype=torch.uint8) for k, (h, w) in enumerate([(3, 3), (9, 5), (5, 9)])]
    return [
        (SMALL, t[:2], [True, False], [[0, 1]]),  # one owner, one deferred and one eager image
        (SMALL, t, [True, True, False], [[1], [2, 0]]),  # rank 1: local position 1 holds global image 0
    ]


@pytest.mark.policies("RELEASED", "HARDENED")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(req=mixed_requests(modes=ACCEPTED_MODES))
@example(req=_pinned()[0])
@example(req=_pinned()[1])
def test_mixed_batches_give_the_all_eager_output(impl, policy, req):
    """A consumer that accepts mixed batches gives each image exactly its all-eager BF16 features."""
    check_mixed_equals_eager(impl, policy, *req)


@given(req=mixed_requests())
@example(req=_pinned()[0])
def test_pr_rejects_mixed_selection_clearly(impl, req):
    """The PR consumer raises "cannot mix" exactly when an owner's selection mixes kinds, else it is exact."""
    config, images, mask, partition = req
    mixes = any(len({mask[i] for i in owned}) == 2 for owned in partition)
    if not mixes:
        check_mixed_equals_eager(impl, "PR_33921", config, images, mask, partition)
        return
    with pytest.raises(ValueError, match="cannot mix deferred and preprocessed"):
        check_mixed_equals_eager(impl, "PR_33921", config, images, mask, partition)


@pytest.mark.claim("C7")
def test_claim_c7_mixed_batches(impl, policy):
    """C7: mixed deferred/eager batches are handled and give the all-eager output."""
    claimcheck.verify_deferred_claim(
        "C7", impl, policy, mixed_requests, lambda req: check_mixed_equals_eager(impl, policy, *req), pinned=_pinned()
    )
