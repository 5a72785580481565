"""IPC acknowledgement verdicts (claim C9, semantics §8): expectations derived from the semantics, checked by sim.ipc.

Derivation (semantics §8.2), with vision DP on and the owner the only reader:

* K_c is ``tp_size`` under PR_33921 and INTERIM_418975B (configured = live TP
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

from dataclasses import dataclass

import pytest
from hypothesis import settings

from impl.policy import HARDENED, INTERIM_418975B, PR_33921, RELEASED, RELEASED_0_5_19, Policy
from sim.ipc import assumption_grid, check, explore, verdicts
from sim.ipc_machine import AckAssumptions, PolicyCounts, machine_for, released_words
from sim.ipc_pool import CounterPool, GenerationPool, InvalidAck


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


@pytest.fixture(scope="module")
def all_verdicts() -> list[dict]:
    return verdicts(budget=60)


def test_every_verdict_matches_the_spec(all_verdicts: list[dict]) -> None:
    """Each (policy, assumptions, property) verdict and smallest topology is the semantics-derived one."""
    policies = {p.name: p for p in (PR_33921, INTERIM_418975B, RELEASED_0_5_19, RELEASED)}
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


def test_released_holds_and_the_pr_breaks_under_attention_dp(all_verdicts: list[dict]) -> None:
    """C9 in one line: RELEASED holds everywhere; PR_33921 fails somewhere, and only with attention DP or releases."""
    assert all(r["verdict"] == "holds" for r in all_verdicts if r["policy"] == "RELEASED")
    pr_fails = [r for r in all_verdicts if r["policy"] == "PR_33921" and r["verdict"] == "fails"]
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
    from impl.ipc import released_total_count, requested_count, resolve_count

    k_p = released_total_count(2, 2)
    k_c = resolve_count(requested_count(PR_33921, 2, 2), k_p, clamp=False)
    pool = GenerationPool(1)
    pool.publish(0, k_p, {0})
    pool.read(0, 0)
    with pytest.raises(InvalidAck):
        pool.ack(0, 0, k_c)
    pool.recycle()
    assert pool.slots[0].busy  # never frees: the liveness failure that follows
    assert resolve_count(requested_count(RELEASED_0_5_19, 2, 2), k_p, clamp=True) == k_p


# -- words -----------------------------------------------------------------------------------------------------


def test_released_words_are_the_count_rule() -> None:
    """`PolicyCounts.acknowledge` names exactly the words the count-based ``ack`` writes, and refuses the same counts."""
    for total in range(1, 5):
        for count in range(0, 6):
            for rank in range(8):
                by_count, by_words = GenerationPool(1), GenerationPool(1)
                for pool in (by_count, by_words):
                    pool.publish(0, total, {rank})
                try:
                    by_count.ack(0, rank, count)
                except InvalidAck:
                    with pytest.raises(InvalidAck):
                        PolicyCounts(RELEASED).acknowledge(count, total, rank, tp_size=8, attn_dp_size=1)
                    continue
                by_words.ack_words(0, PolicyCounts(RELEASED).acknowledge(count, total, rank, tp_size=8, attn_dp_size=1))
                assert by_count.slots[0].acked == by_words.slots[0].acked, (total, count, rank)


def test_the_exhaustive_walk_finds_every_failing_verdict_at_the_same_smallest_topology(
    all_verdicts: list[dict],
) -> None:
    """Two searches, one answer: `explore` (breadth-first, depth 7) breaks each failing cell on Hypothesis's topology."""
    policies = {p.name: p for p in (PR_33921, INTERIM_418975B, RELEASED_0_5_19, RELEASED)}
    grids = {name: {a.describe(): a for a in assumption_grid(p)} for name, p in policies.items()}
    failing = [r for r in all_verdicts if r["verdict"] == "fails"]
    assert failing
    for row in failing:
        v = explore(PolicyCounts(policies[row["policy"]]), grids[row["policy"]][row["assumptions"]], row["property"], 7)
        assert v is not None and v.prop == row["property"], row
        got, want = v.topology, row["counterexample"]["topology"]
        assert (got["tp_size"], got["attn_dp_size"]) == (want["tp_size"], want["attn_dp_size"]), (row, v.trace)


@dataclass
class WholeGroupPlusReleases:
    """A count source shaped like SGLang 0.5.19-0.5.21: K_p = tp, K_c = tp (whole group), non-owners release."""

    late_acks: str = "ignored"
    name: str = "whole-group owner + releases"
    from_real_code: bool = True
    non_owner_release: bool | None = True

    def producer_total(self, tp_size: int, attn_dp_size: int) -> int:
        return tp_size

    def requested(self, tp_size: int, attn_dp_size: int) -> int:
        return tp_size

    def resolve(self, requested: int, total: int, clamp: bool | None) -> int:
        return min(requested, total)

    def acknowledge(self, count: int, total: int, rank: int, *, tp_size: int, attn_dp_size: int) -> set[int]:
        return released_words(count, total, rank)


@pytest.mark.parametrize(
    ("late", "prop", "message"),
    [
        ("ignored", None, None),
        ("overwrite", "liveness", "never free"),
        ("count", "safety", "freed while item 1 unread"),
    ],
)
def test_a_late_release_after_a_whole_group_ack(late: str, prop: str | None, message: str | None) -> None:
    """The derivation's last paragraph: the late-write rule alone decides; smallest tp 2, dp 1, two slots."""
    rows = verdicts(30, policies=(WholeGroupPlusReleases(late),))
    assert [
        r["assumptions"].endswith("non-owners release: True" + ("" if late == "ignored" else f", late acks: {late}"))
        for r in rows
    ] == [True] * 3
    failing = [r for r in rows if r["verdict"] == "fails"]
    if prop is None:
        assert not failing
        return
    assert [r["property"] for r in failing] == [prop]
    cex = failing[0]["counterexample"]
    assert (cex["topology"]["tp_size"], cex["topology"]["attn_dp_size"], cex["topology"]["slots"]) == (2, 1, 2)
    assert message in cex["message"]


@dataclass
class NoModuloSingleAck(WholeGroupPlusReleases):
    """0.5.18-0.5.21's CUDA IPC single ack (global tp_rank, no modulo) into a pool of K_p = tp // dp."""

    name: str = "no-modulo single ack"

    def producer_total(self, tp_size: int, attn_dp_size: int) -> int:
        return tp_size // attn_dp_size

    def requested(self, tp_size: int, attn_dp_size: int) -> int:
        return 1

    def acknowledge(self, count: int, total: int, rank: int, *, tp_size: int, attn_dp_size: int) -> set[int]:
        if count == total:
            return set(range(total))
        if total == 1:
            return {0}
        if rank >= total:
            raise _Refused(f"consumer rank {rank} is outside [0, {total})")
        return {rank}


class _Refused(ValueError):
    """A source's own refusal (the AckCounts contract: any ValueError)."""


def test_a_source_refusal_breaks_valid_ack_first_at_tp4_dp2() -> None:
    """Group 1 of tp 4 / dp 2 holds ranks 2 and 3; a 2-word slot refuses rank 2 (tp 2 / dp 2 has K_p 1: word 0)."""
    rows = verdicts(30, policies=(NoModuloSingleAck(),))
    by_prop = {r["property"]: r for r in rows}
    assert by_prop["valid_ack"]["verdict"] == "fails" and by_prop["liveness"]["verdict"] == "fails"
    assert by_prop["safety"]["verdict"] == "holds"
    topo = by_prop["valid_ack"]["counterexample"]["topology"]
    assert (topo["tp_size"], topo["attn_dp_size"]) == (4, 2)
    assert "outside [0, 2)" in by_prop["valid_ack"]["counterexample"]["message"]


@dataclass
class TwoPools(WholeGroupPlusReleases):
    """A source describing two transports, one of which leaves non-owner releases unknown."""

    transports: tuple[str, ...] = ("cuda_ipc", "cuda_vmm")

    def for_transport(self, transport: str) -> WholeGroupPlusReleases:
        view = WholeGroupPlusReleases("overwrite" if transport == "cuda_ipc" else "count")
        view.non_owner_release = True if transport == "cuda_ipc" else None
        return view


def test_the_grid_for_a_real_source_fixes_what_the_code_says() -> None:
    """One row per transport; non_owner_release fixed when known, both tried when None; the late-ack rule named."""
    grid = assumption_grid(TwoPools())
    assert [(a.transport, a.non_owner_release, a.late_acks, a.clamp, a.k_p) for a in grid] == [
        ("cuda_ipc", True, "overwrite", None, "source"),
        ("cuda_vmm", False, "count", None, "source"),
        ("cuda_vmm", True, "count", None, "source"),
    ]
    assert "(cuda_vmm pool)" in grid[1].describe() and grid[1].describe().endswith("late acks: count")
    assert [a.describe() for a in assumption_grid(RELEASED)] == [
        "generation pool, K_p = dp_group, clamp K_c to K_p: True, non-owners release: True, late acks: overwrite",
    ]


def test_hardened_holds_through_words_and_the_exhaustive_walk() -> None:
    """HARDENED (own-word acks, clamp on) is not in the default policy set: checked here with the walk included."""
    rows = verdicts(20, policies=(HARDENED,))
    assert rows and all(r["verdict"] == "holds" and r["depth"] == 7 for r in rows)


def test_pinned_overwrite_a_late_release_erases_the_next_lease() -> None:
    """CUDA IPC as shipped (generation words): the stale generation written last leaves the slot busy for good."""
    pool = GenerationPool(2, late_acks="overwrite")
    pool.publish(0, 2, {0})
    pool.read(0, 0)
    pool.ack(0, 0, 2)  # owner acks the whole group (0.5.19-0.5.21: K_c = tp, clamped to K_p = tp)
    pool.recycle()
    pool.publish(1, 2, {1})  # the same slot, next generation
    pool.read(1, 1)
    pool.ack(1, 1, 2)
    pool.ack(0, 1, 1)  # rank 1 ends request 0 after request 1's forward: writes generation 1 into word 1
    pool.recycle()
    assert pool.slots[0].busy and pool.slots[0].acked == {0}
    pool.ack(1, 0, 1)  # rank 0 releases item 1: word 0 again, word 1 still stale
    pool.recycle()
    assert pool.slots[0].busy
    assert not pool.early_frees and not pool.torn_reads


def test_pinned_count_two_late_releases_free_a_lease_its_owner_never_read() -> None:
    """VMM as shipped (flag words), in lockstep order (each item read by its owner before anyone releases it).

    Three requests share one chunk in turn; the two late releases of the older two set both
    flags of the third lease, which then frees before its owner copies it.
    """
    pool = GenerationPool(3, late_acks="count")
    pool.publish(0, 2, {0})
    pool.read(0, 0)
    pool.ack(0, 0, 2)  # item 0: owner rank 0, whole group
    pool.recycle()
    pool.publish(1, 2, {1})
    pool.read(1, 1)
    pool.ack(1, 1, 2)  # item 1: owner rank 1, whole group, same chunk
    pool.recycle()
    pool.publish(2, 2, {1})  # item 2: owner rank 1, same chunk, not read yet
    pool.ack(0, 1, 1)  # rank 1 finishes request 0: its flag lands on item 2's chunk
    pool.ack(1, 0, 1)  # rank 0 finishes request 1: likewise
    pool.recycle()
    assert pool.early_frees == ["slot 0 freed while item 2 unread by rank(s) [1]"]


# -- a counter-pool count source (SGLang 0.5.17's shape: `pool = "counter"`) ------------------------------------


@dataclass
class CounterSource:
    """A real-code-shaped counter source: threshold tp, the owner adds ``factor`` x tp, nothing else acknowledges.

    0.5.17 itself is ``factor=1.0`` without releases (properties/impl/test_sglang_ipc.py runs the real one);
    the variants check that the machine takes the threshold, the amount and idempotence from the source.
    """

    factor: float = 1.0
    non_owner_release: bool | None = False
    idempotent_acks: bool = True
    threshold_is_group: bool = False
    pool: str = "counter"
    late_acks: str = "count"
    name: str = "counter source"
    from_real_code: bool = True

    def producer_total(self, tp_size: int, attn_dp_size: int) -> int:
        return tp_size // attn_dp_size if self.threshold_is_group else tp_size

    def requested(self, tp_size: int, attn_dp_size: int) -> int:
        return tp_size

    def resolve(self, requested: int, total: int, clamp: bool | None) -> int:
        return requested

    def acknowledge(self, count: int, total: int, rank: int, *, tp_size: int, attn_dp_size: int) -> float:
        if count <= 0:
            raise _Refused("consumer_count must be positive")
        return self.factor * count


def _by_prop(source: CounterSource) -> dict[str, dict]:
    return {r["property"]: r for r in verdicts(20, policies=(source,))}


def test_a_counter_source_gets_counter_rows_at_its_own_threshold() -> None:
    """`pool == "counter"`: counter rows (K_p "source"), never generation rows; both releases tried when None."""
    grid = assumption_grid(CounterSource(non_owner_release=None))
    assert [(a.pool, a.k_p, a.non_owner_release, a.clamp) for a in grid] == [
        ("counter", "source", False, None),
        ("counter", "source", True, None),
    ]
    assert grid[0].describe() == "counter pool (recycle on == the producer's own count), non-owners release: False"


def test_the_owner_alone_adding_tp_holds_everywhere() -> None:
    """One add of tp per lease, after the read, against a threshold of tp: 0.5.17's arrangement; all hold."""
    assert all(r["verdict"] == "holds" and r["depth"] == 7 for r in _by_prop(CounterSource()).values())


def test_the_machine_uses_the_source_amount_and_threshold() -> None:
    """A source adding 2 x tp overshoots (liveness, tp 1); a threshold of tp // dp is overshot under attention DP."""
    double = _by_prop(CounterSource(factor=2.0))
    assert double["liveness"]["verdict"] == "fails" and double["safety"]["verdict"] == "holds"
    assert double["liveness"]["counterexample"]["topology"]["tp_size"] == 1
    group = _by_prop(CounterSource(threshold_is_group=True))
    assert group["liveness"]["verdict"] == "fails" and group["valid_ack"]["verdict"] == "holds"
    topo = group["liveness"]["counterexample"]["topology"]
    assert (topo["tp_size"], topo["attn_dp_size"]) == (2, 2)


def test_counter_releases_break_it_as_the_modelled_pr_counter_rows_do() -> None:
    """Non-owner releases of 1 on top of the owner's tp: safety and liveness fail at tp 2, dp 1 (as for PR_33921)."""
    rows = _by_prop(CounterSource(non_owner_release=True))
    assert (rows["safety"]["verdict"], rows["liveness"]["verdict"], rows["valid_ack"]["verdict"]) == (
        "fails",
        "fails",
        "holds",
    )
    for prop in ("safety", "liveness"):
        topo = rows[prop]["counterexample"]["topology"]
        assert (topo["tp_size"], topo["attn_dp_size"]) == (2, 1)


def test_counter_pool_add_honours_idempotence() -> None:
    """`CounterPool.add`: a rank's second add of an item counts only when the source's code is not idempotent."""
    for idempotent, counter in ((True, 1.0), (False, 2.0)):
        pool = CounterPool(1, tp_size=2, idempotent=idempotent)
        pool.publish(0, 2, {0})
        pool.add(0, 1, 1.0)
        pool.add(0, 1, 1.0)
        assert pool.slots[0].counter == counter
