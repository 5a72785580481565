"""IPC acknowledgement counts per upstream version (semantics §8), as a description the simulator reads.

Only the ``cuda_ipc`` / VMM transports use these counts (CPU-transport items
ignore them). A pool slot is published with a total consumer count K_p; a
consumer acknowledges with a requested count K_c that must be 1 (its own
word) or K_p (the whole group). Which K_c each version requests, which K_p
the released producer declares and whether K_c is clamped are facts about
the versions (`reference.system.policies.Policy.ipc_consumer_count`,
``ipc_clamp``), so they are stated here, apart from ``impl.ipc`` (the system
under test, checked against this module) and from the real SGLang counts the
driver reads (``impl.sglang``).
"""

from __future__ import annotations

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.policies import Policy
from deferlab.reference.system.validate import check_positive_int


def check_topology(tp_size: int, attn_dp_size: int) -> tuple[int, int]:
    """Both sizes are positive ints and attention DP splits the TP world evenly; returned as Python ints."""
    tp_size = check_positive_int("tp_size", tp_size)
    attn_dp_size = check_positive_int("attn_dp_size", attn_dp_size)
    if tp_size % attn_dp_size != 0:
        raise InputValueError(f"attn_dp_size {attn_dp_size} must divide tp_size {tp_size}")
    return tp_size, attn_dp_size


def released_total(tp_size: int, attn_dp_size: int = 1) -> int:
    """K_p as released: the ranks one routed request reaches, the attention-TP group (``tp // dp``; ``tp``
    without attention DP)."""
    tp_size, attn_dp_size = check_topology(tp_size, attn_dp_size)
    return tp_size // attn_dp_size


def requested(policy: Policy, tp_size: int, attn_dp_size: int = 1, configured_tp_size: int | None = None) -> int:
    """K_c the owner passes before any clamp.

    PR #33921 asks for the live TP world (``tp_size``); 63833f803 for the
    configured TP size (equal to it in every server we model unless given);
    0.5.19-0.5.21 for the ranks a request reaches (the whole group); 0.5.22
    and later pass no count, so the proxy's default 1 (the owner's own word).
    """
    tp_size, attn_dp_size = check_topology(tp_size, attn_dp_size)
    rule = policy.ipc_consumer_count
    if rule == "tp_size":
        return tp_size
    if rule == "configured_tp_size":
        return max(1, tp_size if configured_tp_size is None else configured_tp_size)
    if rule == "dp_group":
        return released_total(tp_size, attn_dp_size)
    if rule == "own_word":
        return 1
    raise InputValueError(f"policy {policy.name!r} has an unknown ipc_consumer_count rule {rule!r}")


def resolve(requested_count: int, total: int, clamp: bool) -> int:
    """The count a consumer finally acknowledges: ``min(K_c, K_p)`` when the version clamps."""
    return min(requested_count, total) if clamp else requested_count


def is_valid_ack(count: int, total: int) -> bool:
    """The released pool accepts one word (count 1) or the whole group (count == K_p)."""
    return count in (1, total)
