"""Scheduler placement (semantics §15.5): the skip whitelist, and that only the owner copies features to its device."""

from __future__ import annotations

import pytest
import torch

from deferlab.impl.model import KimiK3ForConditionalGeneration, get_image_features
from deferlab.impl.processor import Processor
from deferlab.impl.scheduler import TransferLog, can_skip_pre_embed_feature_move, move_items_to_device
from deferlab.impl.transport import deliver
from deferlab.reference.system.policies import PR_33921, PRE_PR
from tests.impl.support import small_config


class KimiK25ForConditionalGeneration:
    def get_image_feature(self, items: list) -> None:
        return None

    def get_audio_feature(self, items: list) -> None:
        return None


class LlavaForConditionalGeneration:
    def get_image_feature(self, items: list) -> None:
        return None


def test_whitelist_by_class_and_function_name() -> None:
    """Bound get_image_feature of a whitelisted class name skips the move; anything else does not."""
    assert can_skip_pre_embed_feature_move(KimiK3ForConditionalGeneration(small_config(), "cpu").get_image_feature)
    assert can_skip_pre_embed_feature_move(KimiK25ForConditionalGeneration().get_image_feature)
    assert not can_skip_pre_embed_feature_move(KimiK25ForConditionalGeneration().get_audio_feature)
    assert not can_skip_pre_embed_feature_move(LlavaForConditionalGeneration().get_image_feature)
    assert not can_skip_pre_embed_feature_move(KimiK3ForConditionalGeneration.get_image_feature)  # unbound
    assert not can_skip_pre_embed_feature_move(len)


def test_move_items_counts_host_copies() -> None:
    """_move_items_to_device moves every tensor feature and counts host-resident ones with their bytes."""
    items = (
        Processor(small_config(), cuda_available=True, device="cpu")
        .process([torch.zeros(3, 8, 8, dtype=torch.uint8)])
        .items
    )
    log = TransferLog()
    move_items_to_device(items, "cpu", log)
    assert log.h2d_copies == 1 and log.h2d_bytes == 3 * 8 * 8


def _request(ranks: int):
    cfg = small_config()
    gen = torch.Generator().manual_seed(0)
    imgs = [torch.randint(0, 256, (3, 8 + 4 * i, 12), dtype=torch.uint8, generator=gen) for i in range(5)]
    out = Processor(cfg, cuda_available=True, device="cpu").process(imgs)
    assert out.deferred is True
    return deliver(out.items, "cpu", ranks).rank_items[0], cfg


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_only_owner_copies_when_whitelisted(ranks: int) -> None:
    """Whitelisted (the PR): each rank copies exactly its own images, once; the group copies each image once."""
    items, cfg = _request(ranks)
    res = get_image_features(items, ranks, config=cfg, device="cpu")
    for r in res.ranks:
        assert r.log.h2d_copies == len(r.owned) == r.log.images_preprocessed
    assert sum(r.log.h2d_copies for r in res.ranks) == len(items)


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_every_rank_copies_everything_when_not_whitelisted(ranks: int) -> None:
    """Not whitelisted: every rank moves every item first, so H2D copies = n per rank and n * ranks overall."""
    items, cfg = _request(ranks)
    res = get_image_features(items, ranks, config=cfg, device="cpu", skip_move=False)
    for r in res.ranks:
        assert r.log.h2d_copies == len(items)
        assert r.log.images_preprocessed == len(r.owned)


def test_pre_pr_whitelist_lacks_kimi_k3() -> None:
    """Before the PR the whitelist did not name Kimi-K3: its get_image_feature is not skipped under PRE_PR."""
    fn = KimiK3ForConditionalGeneration(small_config(), "cpu", PRE_PR).get_image_feature
    assert not can_skip_pre_embed_feature_move(fn, PRE_PR)
    assert can_skip_pre_embed_feature_move(fn, PR_33921)
    assert can_skip_pre_embed_feature_move(KimiK25ForConditionalGeneration().get_image_feature, PRE_PR)


@pytest.mark.parametrize("ranks", [2, 3])
def test_pre_pr_every_rank_copies_everything(ranks: int) -> None:
    """PRE_PR (eager, no whitelist entry): every rank moves every item to its device before the embedding."""
    cfg = small_config()
    gen = torch.Generator().manual_seed(1)
    imgs = [torch.randint(0, 256, (3, 8 + 4 * i, 12), dtype=torch.uint8, generator=gen) for i in range(4)]
    out = Processor(cfg, policy=PRE_PR, cuda_available=True, device="cpu").process(imgs)
    assert out.deferred is False
    items = deliver(out.items, "cpu", ranks).rank_items[0]
    res = get_image_features(items, ranks, config=cfg, device="cpu", policy=PRE_PR)
    assert [r.log.h2d_copies for r in res.ranks] == [len(items)] * ranks
