"""A Hypothesis state machine over the feature pool: publish, read + ack, release, recycle, drain.

One machine class per (policy, assumptions, property) is built by
`machine_for`. The topology (tp_size, attention-DP size) and the pool size are
drawn at initialization from a list ordered smallest first, so shrinking
returns the smallest topology that breaks the property; every step is logged
so a failure carries its request sequence.

Model (vision DP always on, as for K3, semantics §6.1): an item is published for
one request routed to one attention-DP group; its only intended reader is
the owner rank; the owner reads, then acknowledges with the policy's count
K_c (after the clamp, if assumed); a non-owner of the group may release the
item without reading (count 1) if ``non_owner_release`` is assumed. Load is
bounded: the producer publishes only while fewer than ``slots`` items are
unfinished, and runs the recycler before allocating. Consumers and the
recycler interleave arbitrarily (they are separate processes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reference import ipc_counts
from reference.versions import Policy
from sim.ipc_pool import CounterPool, GenerationPool, InvalidAck

PROPERTIES = ("safety", "liveness", "valid_ack")
ALL = "all"  # check every property in one run (a cheap first pass when all of them hold)
# (tp_size, attn_dp_size), smallest first so shrinking lands on the smallest topology.
TOPOLOGIES = ((1, 1), (2, 1), (2, 2), (3, 1), (4, 1), (4, 2), (3, 3), (4, 4))


class AckCounts(Protocol):
    """Where the counts come from: a modelled policy (`PolicyCounts`) or real SGLang code (the driver's adapter).

    ``producer_total`` may return None when the source has no producer count
    of its own (the seed PR: semantics §8 leaves K_p open); the assumptions
    then say which K_p to use.
    """

    name: str
    from_real_code: bool

    def producer_total(self, tp_size: int, attn_dp_size: int) -> int | None: ...

    def requested(self, tp_size: int, attn_dp_size: int) -> int: ...

    def resolve(self, requested: int, total: int, clamp: bool | None) -> int: ...


@dataclass(frozen=True)
class PolicyCounts:
    """The counts a modelled version (`reference.versions.Policy`) gives, from `reference.ipc_counts`."""

    policy: Policy
    from_real_code: bool = False

    @property
    def name(self) -> str:
        return self.policy.name

    def producer_total(self, tp_size: int, attn_dp_size: int) -> int | None:
        return ipc_counts.released_total(tp_size, attn_dp_size) if self.policy.ipc_clamp else None

    def requested(self, tp_size: int, attn_dp_size: int) -> int:
        return ipc_counts.requested(self.policy, tp_size, attn_dp_size, configured_tp_size=tp_size)

    def resolve(self, requested: int, total: int, clamp: bool | None) -> int:
        return ipc_counts.resolve(requested, total, self.policy.ipc_clamp if clamp is None else clamp)


@dataclass(frozen=True)
class AckAssumptions:
    """What semantics §8 leaves open for the seed PR: the pool, K_p, the clamp, non-owner releases."""

    pool: str = "generation"  # "generation" (released) or "counter" (PR-era float counter)
    k_p: str = "dp_group"  # "tp_size", "dp_group" (tp_size // attn_dp_size) or "source" (the counts' own producer)
    clamp: bool | None = True  # None: whatever the count source does itself
    non_owner_release: bool = False

    def describe(self) -> str:
        if self.pool == "counter":
            return f"counter pool (recycle on == tp_size), non-owners release: {self.non_owner_release}"
        k_p = "the producer's own count" if self.k_p == "source" else self.k_p
        clamp = "as the code does" if self.clamp is None else self.clamp
        return f"generation pool, K_p = {k_p}, clamp K_c to K_p: {clamp}, non-owners release: {self.non_owner_release}"


class Violation(AssertionError):
    """A property broke; carries the topology and the logged step sequence."""

    def __init__(self, prop: str, message: str, topology: dict, trace: list[str]) -> None:
        super().__init__(f"{prop}: {message}")
        self.prop, self.message, self.topology, self.trace = prop, message, topology, list(trace)


class _AckMachine(RuleBasedStateMachine):
    counts: AckCounts
    assumptions: AckAssumptions
    prop: str

    def __init__(self) -> None:
        super().__init__()
        self.pool = None
        self.trace: list[str] = []

    # ---- helpers ---------------------------------------------------------------------------
    def _checks(self, prop: str) -> bool:
        return self.prop in (prop, ALL)

    def _fail(self, prop: str, message: str) -> None:
        raise Violation(prop, message, self.topology, self.trace)

    def _k_c(self) -> int:
        return self.counts.resolve(self.counts.requested(self.tp, self.dp), self.k_p, self.assumptions.clamp)

    def _producer_total(self) -> int:
        if self.assumptions.k_p == "tp_size":
            return self.tp
        if self.assumptions.k_p == "dp_group":
            return ipc_counts.released_total(self.tp, self.dp)
        total = self.counts.producer_total(self.tp, self.dp)
        if total is None:
            raise ValueError(f"{self.counts.name}: K_p = 'source' but the count source declares no producer count")
        return total

    def _unfinished(self) -> list[int]:
        return [i for i in self.items if self.unread_owner.get(i) is not None or self.pending_release[i]]

    @initialize(topo=st.sampled_from(TOPOLOGIES), slots=st.integers(1, 3))
    def setup(self, topo: tuple[int, int], slots: int) -> None:
        self.tp, self.dp = topo
        self.group_size = self.tp // self.dp
        self.k_p = self._producer_total()
        self.topology = {"tp_size": self.tp, "attn_dp_size": self.dp, "slots": slots, "K_p": self.k_p}
        if self.assumptions.pool == "counter":
            self.pool = CounterPool(slots, self.tp)
        else:
            self.pool = GenerationPool(slots)
        self.slots = slots
        self.items: list[int] = []
        self.unread_owner: dict[int, int | None] = {}
        self.pending_release: dict[int, list[int]] = {}
        self.trace.append(f"topology tp_size={self.tp} attn_dp_size={self.dp} slots={slots} K_p={self.k_p}")

    # ---- rules -----------------------------------------------------------------------------
    @precondition(lambda self: self.pool is not None and len(self._unfinished()) < self.slots)
    @rule(g=st.integers(0, 7), o=st.integers(0, 7))
    def publish(self, g: int, o: int) -> None:
        """Bounded load: the producer publishes only while fewer than ``slots`` items are unfinished."""
        group = g % self.dp
        owner = group * self.group_size + o % self.group_size
        item = len(self.items)
        self.pool.recycle()
        slot = self.pool.publish(item, self.k_p, {owner})
        self.trace.append(f"publish item {item} to group {group} (owner rank {owner}) -> slot {slot}")
        if slot is None:
            if self._checks("liveness"):
                self._fail(
                    "liveness",
                    f"pool ran dry with {len(self._unfinished())} unfinished item(s) for {self.slots} slot(s)",
                )
            return
        self.items.append(item)
        self.unread_owner[item] = owner
        others = [r for r in range(group * self.group_size, (group + 1) * self.group_size) if r != owner]
        self.pending_release[item] = others if self.assumptions.non_owner_release else []

    def _read(self, item: int) -> None:
        owner = self.unread_owner[item]
        self.unread_owner[item] = None
        self.pool.read(item, owner)
        count = self._k_c()
        try:
            self.pool.ack(item, owner, count)
            self.trace.append(f"owner rank {owner} reads item {item}, acks {count}")
        except InvalidAck as e:
            self.trace.append(f"owner rank {owner} reads item {item}, ack {count} rejected: {e}")
            if self._checks("valid_ack"):
                self._fail("valid_ack", f"rank {owner} requested {count} acknowledgements, K_p={self.k_p}: {e}")

    def _release(self, item: int) -> None:
        rank = self.pending_release[item].pop(0)
        self.pool.ack(item, rank, 1)
        self.trace.append(f"non-owner rank {rank} releases item {item} (ack 1)")

    def _maybe_recycle(self, recycle_after: bool) -> None:
        if recycle_after:
            self.pool.recycle()
            self.trace.append("recycler runs")

    @precondition(lambda self: self.pool is not None and any(v is not None for v in self.unread_owner.values()))
    @rule(i=st.integers(0, 15), recycle_after=st.booleans())
    def read(self, i: int, recycle_after: bool) -> None:
        pending = [k for k, v in self.unread_owner.items() if v is not None]
        self._read(pending[i % len(pending)])
        self._maybe_recycle(recycle_after)

    @precondition(lambda self: self.pool is not None and any(self.pending_release.values()))
    @rule(i=st.integers(0, 15), recycle_after=st.booleans())
    def release(self, i: int, recycle_after: bool) -> None:
        pending = [k for k, v in self.pending_release.items() if v]
        self._release(pending[i % len(pending)])
        self._maybe_recycle(recycle_after)

    @precondition(lambda self: self.pool is not None and self.prop in ("liveness", ALL) and bool(self.items))
    @rule()
    def drain(self) -> None:
        """Finish every outstanding read and release, recycle: every slot must be free again."""
        for item in list(self.items):
            if self.unread_owner[item] is not None:
                self._read(item)
            while self.pending_release[item]:
                self._release(item)
        self.pool.recycle()
        self.trace.append("drain: all reads and releases done, recycler runs")
        busy = [i for i, s in enumerate(self.pool.slots) if s.busy]
        if busy and self._checks("liveness"):
            self._fail("liveness", f"slot(s) {busy} never free after every consumer finished")

    @invariant()
    def no_early_reuse(self) -> None:
        if self.pool is None or not self._checks("safety"):
            return
        problems = self.pool.early_frees + self.pool.torn_reads
        if problems:
            self._fail("safety", problems[0])


def machine_for(counts: AckCounts | Policy, assumptions: AckAssumptions, prop: str) -> type[RuleBasedStateMachine]:
    """A state-machine class checking ``prop`` with ``counts`` (a policy is read through `PolicyCounts`)."""
    if prop not in (*PROPERTIES, ALL):
        raise ValueError(f"property must be one of {(*PROPERTIES, ALL)}, got {prop!r}")
    if isinstance(counts, Policy):
        counts = PolicyCounts(counts)
    name = "Ack_" + "".join(ch if ch.isalnum() else "_" for ch in counts.name) + f"_{prop}"
    return type(name, (_AckMachine,), {"counts": counts, "assumptions": assumptions, "prop": prop})
