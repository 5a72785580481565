"""Scheduler-side feature placement (semantics §1.3, §15.5): the skip whitelist and the pre-embed move.

`TransferLog` counts host-to-device copies so properties can assert that only
the owner copies. On a CPU-only machine the compute device is the host too:
a copy of a host-resident feature to the rank's compute device is still
counted (it is the copy a GPU rank would make), though no bytes move.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from deferlab.impl.items import MultimodalItem
from deferlab.reference.system.policies import Policy

SKIP_PRE_EMBED_MOVE_MODELS = frozenset(
    {
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "KimiK3ForConditionalGeneration",  # added by PR #33921
    }
)
_SKIPPABLE_FUNCTIONS = ("get_image_feature", "get_video_feature")


@dataclass
class TransferLog:
    """Per-rank accounting: H2D copies and bytes, preprocessing calls and images preprocessed."""

    h2d_copies: int = 0
    h2d_bytes: int = 0
    preprocess_calls: int = 0
    images_preprocessed: int = 0
    # Storages already placed on the compute device: a second placement is free (on a GPU it is a no-op).
    resident: set[int] = field(default_factory=set, repr=False, compare=False)


def skip_pre_embed_move_models(policy: Policy | None = None) -> frozenset[str]:
    """The whitelist under ``policy``: before PR #33921 it did not name Kimi-K3."""
    if policy is None or policy.k3_skips_pre_embed_move:
        return SKIP_PRE_EMBED_MOVE_MODELS
    return SKIP_PRE_EMBED_MOVE_MODELS - {"KimiK3ForConditionalGeneration"}


def can_skip_pre_embed_feature_move(fn: Callable[..., object], policy: Policy | None = None) -> bool:
    """True iff ``fn`` is a bound get_image/video_feature of a whitelisted model class (by class name)."""
    owner = getattr(fn, "__self__", None)
    if owner is None:
        return False
    if getattr(fn, "__name__", None) not in _SKIPPABLE_FUNCTIONS:
        return False
    return type(owner).__name__ in skip_pre_embed_move_models(policy)


def copy_to_device(x: torch.Tensor, device: torch.device, log: TransferLog | None) -> torch.Tensor:
    """Move a tensor to the compute device, counting it as one H2D copy when it sat in host memory.

    A host tensor this log already placed (a CPU-only run, where host and
    device memory coincide) is not counted twice.
    """
    out = x.to(device)
    if log is not None and x.device.type == "cpu" and x.data_ptr() not in log.resident:
        log.h2d_copies += 1
        log.h2d_bytes += x.numel() * x.element_size()
        if out.device.type == "cpu":
            log.resident.add(out.data_ptr())
    return out


def move_items_to_device(
    items: Sequence[MultimodalItem], device: str | torch.device, log: TransferLog | None = None
) -> None:
    """Upstream ``_move_items_to_device``: every tensor feature goes to ``device`` (in place)."""
    dev = torch.device(device)
    for item in items:
        if isinstance(item.feature, torch.Tensor) and (item.feature.device != dev or item.feature.device.type == "cpu"):
            item.feature = copy_to_device(item.feature, dev, log)
