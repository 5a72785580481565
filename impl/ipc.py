"""IPC acknowledgement counts (semantics §8): what the producer declares, what a consumer asks.

Only the ``cuda_ipc`` / VMM transports use these; CPU-transport deferred items
ignore them (``reconstruct`` is a no-op there). The producer gives each pool
slot a total consumer count K_p; a consumer acknowledges with a requested
count K_c, which must be 1 (its own word) or K_p (the whole group). The seed
PR's K_p is not known (semantics §8), so callers that model the PR pass it in.

The functions carry the oracle's names (``reference.oracle.ipc_counts``:
``check_topology``, ``released_total``, ``requested``, ``resolve``) so the two
can be compared name for name; this is the system under test and does not
import the oracle. Which counts a pool accepts is the pool's rule
(``sim.ipc.pool``), not modelled here.
"""

from __future__ import annotations

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.policies import Policy
from deferlab.reference.system.validate import check_positive_int


def check_topology(tp_size: int, attn_dp_size: int) -> None:
    """Both sizes are positive ints and attention DP splits the TP world evenly."""
    check_positive_int("tp_size", tp_size)
    check_positive_int("attn_dp_size", attn_dp_size)
    if tp_size % attn_dp_size:
        raise InputValueError(f"attention DP size {attn_dp_size} must divide tp_size {tp_size}")


def released_total(tp_size: int, attn_dp_size: int = 1) -> int:
    """K_p as released: the ranks a routed request reaches (tp // dp with attention DP)."""
    check_topology(tp_size, attn_dp_size)
    return tp_size // attn_dp_size


def requested(policy: Policy, tp_size: int, attn_dp_size: int = 1, configured_tp_size: int | None = None) -> int:
    """K_c an owner-only consumer passes to ``reconstruct`` under ``policy`` (before any clamp).

    PR #33921: ``max(get_parallel().tp_size, 1)``, the live TP world size.
    63833f803: ``max(configured_tp_size(), 1)``. 0.5.19-0.5.21: the DP group's count. 0.5.22+: 1.
    """
    check_topology(tp_size, attn_dp_size)
    if policy.ipc_consumer_count == "tp_size":
        return max(tp_size, 1)
    if policy.ipc_consumer_count == "configured_tp_size":
        return max(configured_tp_size if configured_tp_size is not None else tp_size, 1)
    if policy.ipc_consumer_count == "own_word":
        return 1  # 0.5.22+: no count passed, the proxy's default
    return released_total(tp_size, attn_dp_size)


def resolve(requested_count: int, total: int, clamp: bool) -> int:
    """The count actually acknowledged: released code clamps to K_p first."""
    return min(requested_count, total) if clamp else requested_count
