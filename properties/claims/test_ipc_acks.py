"""The acknowledgement rule itself (``real_code``): a generation pool's proxy writes every word for the whole group,
its own rank's word for one consumer, and refuses any other count (semantics §8.1), on the model and on real code.

Why beside C9: C9's state machine acknowledges only the counts its topologies
produce (the clamp gives 1 or the group's size), so a count of 0, a negative
one or one between 1 and the group's size is never asked; whether SGLang's
``_acknowledge_on_stream`` refuses them was seen by nothing (a mutation
campaign's survivor: ``consumer_count == 1`` read as ``<= 1`` acknowledged a
count of 0 as one consumer). Every count from -1 to the group's size + 1, every
rank, groups of one to four; a pool that is a counter (0.5.17, the PR's) has no
such rule and is left out.
"""

from __future__ import annotations

import pytest

from deferlab.sim.ipc.machine import PolicyCounts

pytestmark = pytest.mark.real_code


def _sources(impl, policy):
    """The count sources the claims feed the IPC machine (a modelled policy read as `PolicyCounts`)."""
    out = []
    for src in impl.ack_counts(policy):
        src = src if hasattr(src, "acknowledge") else PolicyCounts(src)
        pool = getattr(src, "pool", None) or getattr(getattr(src, "policy", None), "ipc_pool", None)
        if pool != "counter":  # a modelled policy's open pool (None) acknowledges by the released rule
            out.append(src)
    return out


@pytest.mark.policies("RELEASED", "HARDENED")
def test_an_acknowledgement_is_one_word_the_whole_group_or_refused(impl, policy):
    """count == total: every word; count == 1: the rank's own word; any other count: refused (a ValueError)."""
    sources = _sources(impl, policy)
    if not sources:
        pytest.skip("no generation pool here (a counter pool has no acknowledgement words)")
    for src in sources:
        name = getattr(src, "transport", getattr(src, "name", "?"))
        for total in range(1, 5):
            for count in range(-1, total + 2):
                for rank in range(total):
                    try:
                        words = src.acknowledge(count, total, rank, tp_size=total, attn_dp_size=1)
                    except ValueError:
                        words = None
                    want = set(range(total)) if count == total else ({rank} if count == 1 else None)
                    assert words == want, (
                        f"{name}: acknowledging {count} of a group of {total} from rank {rank} wrote {words}, "
                        f"the rule says {'refused' if want is None else sorted(want)}"
                    )
