"""Transports (semantics §1.2, §8): ``cpu`` really serializes; ``cuda_ipc`` / ``fabric`` are modeled, eager only.

Under ``cpu`` every rank of the group receives a full copy of every item: the
items are serialized once (``torch.save`` into bytes; the size is measured)
and each rank deserializes its own copy. The IPC transports pass handles, so
no host bytes move; each consumer's acknowledgement count comes from
`impl.ipc` under the policy.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from deferlab.impl.ipc import released_total, requested, resolve
from deferlab.impl.items import MultimodalItem
from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY, TRANSPORTS
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.policies import PR_33921, Policy, get_policy
from deferlab.reference.system.validate import check_positive_int


def serialize_items(items: Sequence[MultimodalItem]) -> bytes:
    """The items as bytes (features, grids and deferred configs; tensors by value)."""
    buf = io.BytesIO()
    torch.save(list(items), buf)
    return buf.getvalue()


def deserialize_items(data: bytes) -> list[MultimodalItem]:
    """Inverse of `serialize_items`: fresh objects, tensors on the CPU."""
    return torch.load(io.BytesIO(data), weights_only=False, map_location="cpu")


@dataclass
class Delivery:
    """Per-rank item copies and what the transport cost."""

    rank_items: list[list[MultimodalItem]]
    bytes_per_rank: int
    ipc_consumer_count: int | None


def deliver(
    items: Sequence[MultimodalItem], transport: str, num_ranks: int, policy: Policy | str = PR_33921
) -> Delivery:
    """Ship a request's items to ``num_ranks`` scheduler ranks over ``transport``."""
    policy = get_policy(policy)
    if transport not in TRANSPORTS:
        raise InputValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
    num_ranks = check_positive_int("num_ranks", num_ranks)
    if transport == "cpu":
        data = serialize_items(items)
        return Delivery([deserialize_items(data) for _ in range(num_ranks)], len(data), None)
    if any(DEFERRED_PREPROCESSING_KEY in it.model_specific_data for it in items):
        raise InputValueError(f"deferred items travel only over the 'cpu' transport, not {transport!r}")
    total = released_total(num_ranks)
    count = resolve(requested(policy, num_ranks), total, policy.ipc_clamp)
    return Delivery([list(items) for _ in range(num_ranks)], 0, count)
