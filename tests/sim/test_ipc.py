"""IPC acknowledgement verdicts (claim C9, semantics §8): expectations derived from the semantics, checked by sim.ipc.

Derivation (semantics §8.2), with vision DP on and the owner the only reader:

* K_c is ``tp_size`` under PR_33921 (and PR_OPEN) and INTERIM_418975B (configured = live TP
  size here), ``tp_size // attn_dp_size`` (the whole group) under
  RELEASED_0_5_19 and 1 (the owner's own word) under RELEASED; with the clamp
  it becomes ``min(K_c, K_p)``.
* Generation pool: an ack is valid iff the count is 1 or K_p. With K_c == K_p
  the owner acks every word *after* reading, so nothing frees early and every
  slot frees (safe, live). With K_p = tp // dp, no clamp and attention DP,
  K_c = tp is neither 1 nor K_p (smallest: tp 2, dp 2, K_p 1): the consumer
  errors and the slot never frees (valid_ack and liveness fail, safety holds).
* Counter pool (PR era): the owner adds tp and the recycler frees on equality,
  so without non-owner releases all three hold. If non-owners release (+1),
  the counter overshoots (never equal: liveness fails) or, when the recycler
  ran in between, pre-charges the chunk's next lease so it frees before its
  owner reads (safety fails); smallest: tp 2, dp 1. No validity rule exists.

Words (the machine acknowledges the words a count source names, `AckCounts.acknowledge`):
`PolicyCounts` names the released rule's words (all for K_p, ``rank % K_p``
for 1), so every verdict above is the same through words. What a *late*
write does is the pool's ``late_acks`` rule. With "overwrite" or "count", a
non-owner's release that lands after the owner acknowledged the whole group
(and the slot was reused) either erases a word of the next lease
("overwrite": liveness fails) or counts for it ("count": safety fails);
smallest for both: tp 2, dp 1, two slots (one lease still waiting for the
release, one reusing the slot). RELEASED_0_5_19 is that arrangement with
CUDA IPC's overwrite (its ranks release at request end, as 0.5.19-0.5.21 do:
liveness fails). RELEASED acknowledges one word per rank, each written once
per item, so no late write exists and everything holds.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from deferlab.reference.system.policies import INTERIM_418975B, PR_33921, RELEASED, RELEASED_0_5_19, Policy
from deferlab.sim.ipc.claim import assumption_grid, check, explore, verdicts
from deferlab.sim.ipc.machine import AckAssumptions, PolicyCounts, machine_for
from deferlab.sim.ipc.pool import CounterPool, GenerationPool, InvalidAck


def expected(policy: Policy, a: AckAssumptions, prop: str) -> tuple[str, tuple[int, int] | None]:
    """(verdict, smallest (tp_size, attn_dp_size) that breaks it) from the derivation above."""
    if a.pool == "counter":
        if a.non_owner_release and prop in ("safety", "liveness"):
            return "fails", (2, 1)
        return "holds", None
    k_c_is_tp = policy.ipc_consumer_count in ("tp_size", "configured_tp_size")
    if k_c_is_tp and a.k_p == "dp_group" and not a.clamp and prop in ("valid_ack", "liveness"):
        return "fails", (2, 2)
    whole_group_then_late = policy.ipc_consumer_count == "dp_group" and a.non_owner_release
    if whole_group_then_late and (a.late_acks, prop) in (("overwrite", "liveness"), ("count", "safety")):
        return "fails", (2, 1)
    return "holds", None


# The PR with its pool, K_p, clamp and releases left open, as the PR's report leaves them (semantics §8.2): the
# grid the simulator had to check before the PR commit was run. PR_33921 itself is pinned to what that commit does.
PR_OPEN = PR_33921.with_(name="PR_OPEN", ipc_pool=None, ipc_non_owner_release=None)
POLICIES = (PR_OPEN, PR_33921, INTERIM_418975B, RELEASED_0_5_19, RELEASED)


@pytest.fixture(scope="module")
def all_verdicts() -> list[dict]:
    return verdicts(budget=60, policies=POLICIES)


def test_every_verdict_matches_the_spec(all_verdicts: list[dict]) -> None:
    """Each (policy, assumptions, property) verdict and smallest topology is the semantics-derived one."""
    policies = {p.name: p for p in POLICIES}
    grids = {name: {a.describe(): a for a in assumption_grid(p)} for name, p in policies.items()}
    assert len(all_verdicts) == sum(len(g) for g in grids.values()) * 3
    for row in all_verdicts:
        a = grids[row["policy"]][row["assumptions"]]
        verdict, smallest = expected(policies[row["policy"]], a, row["property"])
        assert row["verdict"] == verdict, row
        if smallest is not None:
            topo = row["counterexample"]["topology"]
            assert (topo["tp_size"], topo["attn_dp_size"]) == smallest, row
            assert len(row["counterexample"]["sequence"]) >= 2


def test_released_holds_and_the_open_pr_breaks_under_attention_dp(all_verdicts: list[dict]) -> None:
    """C9 in one line: RELEASED and the PR as committed hold everywhere; the PR with its pool left open fails
    somewhere, and only with attention DP or releases."""
    assert all(r["verdict"] == "holds" for r in all_verdicts if r["policy"] in ("RELEASED", "PR_33921"))
    pr_fails = [r for r in all_verdicts if r["policy"] == "PR_OPEN" and r["verdict"] == "fails"]
    assert pr_fails
    for r in pr_fails:
        topo = r["counterexample"]["topology"]
        assert topo["attn_dp_size"] > 1 or "non-owners release: True" in r["assumptions"]


def test_verdicts_are_deterministic() -> None:
    """Derandomized: the same budget gives the same counterexample."""
    a = AckAssumptions("counter", "tp_size", False, True)
    assert check(PR_33921, a, "safety", 40) == check(PR_33921, a, "safety", 40)


TestReleasedSafety = machine_for(RELEASED, AckAssumptions("generation", "dp_group", True, True), "safety").TestCase
TestReleasedSafety.settings = settings(stateful_step_count=12)
TestReleasedLiveness = machine_for(RELEASED, AckAssumptions("generation", "dp_group", True, True), "liveness").TestCase
TestReleasedLiveness.settings = settings(stateful_step_count=12)


def test_generation_pool_rejects_counts_outside_one_or_all() -> None:
    """semantics §8: K_c must be 1 or K_p; anything else is an error."""
    pool = GenerationPool(1)
    pool.publish(0, 4, {0})
    with pytest.raises(InvalidAck, match="2/4"):
        pool.ack(0, 0, 2)


def test_generation_pool_frees_only_when_every_word_is_acked() -> None:
    """Two words: one ack leaves the slot busy, the second frees it; a stale ack for a reused slot is ignored."""
    pool = GenerationPool(1)
    pool.publish(0, 2, {0, 1})
    pool.read(0, 0)
    pool.ack(0, 0, 1)
    pool.recycle()
    assert pool.slots[0].busy
    pool.read(0, 1)
    pool.ack(0, 1, 1)
    pool.recycle()
    assert not pool.slots[0].busy
    pool.publish(1, 2, {0})
    pool.ack(0, 0, 2)  # late ack of the old generation
    pool.recycle()
    assert pool.slots[0].busy and pool.slots[0].item == 1
    assert not pool.early_frees and not pool.torn_reads


def test_counter_pool_recycles_on_equality_only() -> None:
    """Facts 7.4: an overshooting counter never equals tp_size, so the chunk never frees."""
    pool = CounterPool(1, tp_size=2)
    pool.publish(0, 2, {0})
    pool.read(0, 0)
    pool.ack(0, 0, 2)
    pool.ack(0, 1, 1)
    pool.recycle()
    assert pool.slots[0].busy
    assert pool.free_slots() == 0


def test_pinned_counter_pool_precharge_frees_the_next_item_before_its_owner_reads() -> None:
    """The shrunk safety counterexample, replayed by hand: tp 2, one slot, a late non-owner release pre-charges it."""
    pool = CounterPool(1, tp_size=2)
    pool.publish(0, 2, {0})
    pool.read(0, 0)
    pool.ack(0, 0, 2)  # owner acks the whole group
    pool.recycle()  # counter == 2: freed and zeroed
    pool.ack(0, 1, 1)  # the non-owner's release lands late: counter 1 on a free chunk
    pool.publish(1, 2, {0})
    pool.ack(1, 1, 1)  # the non-owner releases the new item: counter 2
    pool.recycle()
    assert pool.early_frees == ["slot 0 freed while item 1 unread by rank(s) [0]"]


def test_pinned_pr_count_under_attention_dp_is_rejected_by_the_released_pool() -> None:
    """The shrunk valid_ack counterexample: tp 2, attention DP 2, K_p 1; the PR's K_c = tp_size = 2 is neither 1 nor K_p."""
    from deferlab.impl.ipc import released_total, requested, resolve

    k_p = released_total(2, 2)
    k_c = resolve(requested(PR_33921, 2, 2), k_p, clamp=False)
    pool = GenerationPool(1)
    pool.publish(0, k_p, {0})
    pool.read(0, 0)
    with pytest.raises(InvalidAck):
        pool.ack(0, 0, k_c)
    pool.recycle()
    assert pool.slots[0].busy  # never frees: the liveness failure that follows
    assert resolve(requested(RELEASED_0_5_19, 2, 2), k_p, clamp=True) == k_p


def test_the_exhaustive_walk_finds_every_failing_verdict_at_the_same_smallest_topology(
    all_verdicts: list[dict],
) -> None:
    """Two searches, one answer: `explore` (breadth-first, depth 7) breaks each failing cell on Hypothesis's topology."""
    policies = {p.name: p for p in POLICIES}
    grids = {name: {a.describe(): a for a in assumption_grid(p)} for name, p in policies.items()}
    failing = [r for r in all_verdicts if r["verdict"] == "fails"]
    assert failing
    for row in failing:
        v = explore(PolicyCounts(policies[row["policy"]]), grids[row["policy"]][row["assumptions"]], row["property"], 7)
        assert v is not None and v.prop == row["property"], row
        got, want = v.topology, row["counterexample"]["topology"]
        assert (got["tp_size"], got["attn_dp_size"]) == (want["tp_size"], want["attn_dp_size"]), (row, v.trace)
