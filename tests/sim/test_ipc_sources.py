"""IPC acknowledgement verdicts on count sources shaped like real code (words, late writes, counter pools).

The modelled policies' verdicts and the pool rules are in ``test_ipc.py``;
here, sources that name their own words, releases and late-write rule (as
`impl.sglang.ackcounts` does for real SGLang) are checked against what the
derivation in ``test_ipc.py``'s docstring predicts for that shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from deferlab.reference.system.policies import HARDENED, RELEASED
from deferlab.sim.ipc.claim import assumption_grid, verdicts
from deferlab.sim.ipc.machine import PolicyCounts, released_words
from deferlab.sim.ipc.pool import CounterPool, GenerationPool, InvalidAck

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


def test_the_count_source_protocol_is_written_once_in_the_description() -> None:
    """sim's AckCounts is reference.system.ipc's (one Protocol, no copy), with the members the machine calls."""
    from deferlab.reference.system import ipc as shared
    from deferlab.sim.ipc import claim, machine

    assert machine.AckCounts is shared.AckCounts and claim.AckCounts is shared.AckCounts
    methods = {n for n, v in vars(shared.AckCounts).items() if callable(v) and not n.startswith("_")}
    assert set(shared.AckCounts.__annotations__) | methods == {
        "name",
        "from_real_code",
        "non_owner_release",
        "producer_total",
        "requested",
        "resolve",
        "acknowledge",
    }
    assert "class AckCounts" not in Path(machine.__file__).read_text()


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

    0.5.17 itself is ``factor=1.0`` without releases (tests/impl/test_sglang_ipc.py runs the real one);
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
