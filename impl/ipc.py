"""IPC acknowledgement counts (semantics §8): what the producer declares, what a consumer asks.

Only the ``cuda_ipc`` / VMM transports use these; CPU-transport deferred items
ignore them (``reconstruct`` is a no-op there). The producer gives each pool
slot a total consumer count K_p; a consumer acknowledges with a requested
count K_c, which must be 1 (its own word) or K_p (the whole group). The seed
PR's K_p is not known (semantics §8), so callers that model the PR pass it in.
"""

from __future__ import annotations

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.policies import Policy
from deferlab.reference.system.validate import check_positive_int


def _check_topology(tp_size: int, attn_dp_size: int) -> None:
    check_positive_int("tp_size", tp_size)
    check_positive_int("attn_dp_size", attn_dp_size)
    if tp_size % attn_dp_size:
        raise InputValueError(f"attention DP size {attn_dp_size} must divide tp_size {tp_size}")


def released_total_count(tp_size: int, attn_dp_size: int = 1) -> int:
    """K_p as released: the ranks a routed request reaches (tp // dp with attention DP)."""
    _check_topology(tp_size, attn_dp_size)
    return tp_size // attn_dp_size


def requested_count(policy: Policy, tp_size: int, attn_dp_size: int = 1, configured_tp_size: int | None = None) -> int:
    """K_c an owner-only consumer passes to ``reconstruct`` under ``policy`` (before any clamp).

    PR #33921: ``max(get_parallel().tp_size, 1)``, the live TP world size.
    63833f803: ``max(configured_tp_size(), 1)``. 0.5.19-0.5.21: the DP group's count. 0.5.22+: 1.
    """
    _check_topology(tp_size, attn_dp_size)
    if policy.ipc_consumer_count == "tp_size":
        return max(tp_size, 1)
    if policy.ipc_consumer_count == "configured_tp_size":
        return max(configured_tp_size if configured_tp_size is not None else tp_size, 1)
    if policy.ipc_consumer_count == "own_word":
        return 1  # 0.5.22+: no count passed, the proxy's default
    return released_total_count(tp_size, attn_dp_size)


def resolve_count(requested: int, total: int, clamp: bool) -> int:
    """The count actually acknowledged: released code clamps to K_p first."""
    return min(requested, total) if clamp else requested


def valid_ack(count: int, total: int) -> bool:
    """Released pool rule: acknowledge one word or all of them, nothing else."""
    return count == 1 or count == total
