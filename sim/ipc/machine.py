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

Acknowledgements are *words*: the count source says which ack words a
(count, K_p, rank) writes (`AckCounts.acknowledge`), so a source whose code
writes a different word than the released rule (or refuses) is checked as
it is, not as the rule says it should be. The pool's ``late_acks`` rule says
what a write for a lease the slot no longer holds does (`sim.ipc.pool`).
`_steps`, `_clone` and `_key` expose the same steps to `sim.ipc.claim.explore`,
the exhaustive walk that backs every "holds".
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from deferlab.reference.oracle import ipc_counts
from deferlab.reference.system.ipc import AckCounts
from deferlab.reference.system.policies import Policy
from deferlab.sim.ipc.pool import CounterPool, GenerationPool, released_words

PROPERTIES = ("safety", "liveness", "valid_ack")
ALL = "all"  # check every property in one run (a cheap first pass when all of them hold)
# (tp_size, attn_dp_size), smallest first so shrinking lands on the smallest topology.
TOPOLOGIES = ((1, 1), (2, 1), (2, 2), (3, 1), (4, 1), (4, 2), (3, 3), (4, 4))


@dataclass(frozen=True)
class PolicyCounts:
    """The counts a modelled version (`reference.system.policies.Policy`) gives, from `reference.oracle.ipc_counts`."""

    policy: Policy
    from_real_code: bool = False

    @property
    def non_owner_release(self) -> bool | None:
        """What the version's ranks do at request end (None: the semantics leave it open; the grid tries both)."""
        return self.policy.ipc_non_owner_release

    @property
    def late_acks(self) -> str:
        return self.policy.ipc_late_acks

    @property
    def name(self) -> str:
        return self.policy.name

    def producer_total(self, tp_size: int, attn_dp_size: int) -> int | None:
        return ipc_counts.released_total(tp_size, attn_dp_size) if self.policy.ipc_clamp else None

    def requested(self, tp_size: int, attn_dp_size: int) -> int:
        return ipc_counts.requested(self.policy, tp_size, attn_dp_size, configured_tp_size=tp_size)

    def resolve(self, requested: int, total: int, clamp: bool | None) -> int:
        return ipc_counts.resolve(requested, total, self.policy.ipc_clamp if clamp is None else clamp)

    def acknowledge(self, count: int, total: int, rank: int, *, tp_size: int = 0, attn_dp_size: int = 1) -> set[int]:
        return released_words(count, total, rank)


@dataclass(frozen=True)
class AckAssumptions:
    """What semantics §8 leaves open for the seed PR (the pool, K_p, the clamp, non-owner releases), and for real code
    which transport's pool a row checks and what a late write does there (both fixed by the source)."""

    pool: str = "generation"  # "generation" (released) or "counter" (PR-era float counter)
    k_p: str = "dp_group"  # "tp_size", "dp_group" (tp_size // attn_dp_size) or "source" (the counts' own producer)
    clamp: bool | None = True  # None: whatever the count source does itself
    non_owner_release: bool = False
    transport: str | None = None  # a real source's pool ("cuda_ipc", "cuda_vmm"); None: the source itself
    late_acks: str = "ignored"  # what a write for a lease the slot no longer holds does (sim.ipc.pool.LATE_ACKS)

    def describe(self) -> str:
        if self.pool == "counter" and self.k_p == "source":
            where = "" if self.transport is None else f", {self.transport} pool"
            return (
                f"counter pool (recycle on == the producer's own count{where}), "
                f"non-owners release: {self.non_owner_release}"
            )
        if self.pool == "counter":
            return f"counter pool (recycle on == tp_size), non-owners release: {self.non_owner_release}"
        k_p = "the producer's own count" if self.k_p == "source" else self.k_p
        if self.transport is not None:
            k_p += f" ({self.transport} pool)"
        clamp = "as the code does" if self.clamp is None else self.clamp
        text = f"generation pool, K_p = {k_p}, clamp K_c to K_p: {clamp}, non-owners release: {self.non_owner_release}"
        # Only a non-default rule is named, so the modelled policies' rows read as before.
        return text if self.late_acks == "ignored" else f"{text}, late acks: {self.late_acks}"


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
        counter_source = getattr(self.counts, "pool", "generation") == "counter"
        if counter_source and self.assumptions.pool != "counter":
            raise ValueError(f"{self.counts.name} describes a counter pool; it has no ack words for a generation row")
        if self.assumptions.pool == "counter":
            # a modelled row recycles on tp_size (semantics §8.2); a source's own threshold when it names one
            threshold = self.k_p if self.assumptions.k_p == "source" else self.tp
            self.pool = CounterPool(slots, threshold, bool(getattr(self.counts, "idempotent_acks", True)))
        else:
            self.pool = GenerationPool(slots, self.assumptions.late_acks)
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

    def _ack(self, item: int, rank: int, count: int) -> str | None:
        """Acknowledge ``count`` for ``item`` as ``rank``; the refusal's message when the code refuses it."""
        try:
            if isinstance(self.pool, CounterPool):
                if getattr(self.counts, "pool", "generation") == "counter":  # what the source's code adds
                    amount = self.counts.acknowledge(count, self.k_p, rank, tp_size=self.tp, attn_dp_size=self.dp)
                    self.pool.add(item, rank, float(amount))
                else:
                    self.pool.ack(item, rank, count)  # modelled PR-era counter: the count is added, there are no words
                return None
            words = self.counts.acknowledge(count, self.k_p, rank, tp_size=self.tp, attn_dp_size=self.dp)
            self.pool.ack_words(item, set(words))
        except ValueError as e:  # InvalidAck, or a real source's own refusal (the AckCounts contract)
            return str(e) or type(e).__name__
        return None

    def _refused(self, who: str, count: int, refusal: str) -> None:
        if self._checks("valid_ack"):
            self._fail("valid_ack", f"{who} requested {count} acknowledgements, K_p={self.k_p}: {refusal}")

    def _read(self, item: int) -> None:
        owner = self.unread_owner[item]
        self.unread_owner[item] = None
        self.pool.read(item, owner)
        count = self._k_c()
        refusal = self._ack(item, owner, count)
        if refusal is None:
            self.trace.append(f"owner rank {owner} reads item {item}, acks {count}")
            return
        self.trace.append(f"owner rank {owner} reads item {item}, ack {count} rejected: {refusal}")
        self._refused(f"rank {owner}", count, refusal)

    def _release(self, item: int) -> None:
        rank = self.pending_release[item].pop(0)
        refusal = self._ack(item, rank, 1)
        if refusal is None:
            self.trace.append(f"non-owner rank {rank} releases item {item} (ack 1)")
            return
        self.trace.append(f"non-owner rank {rank} releases item {item}, ack 1 rejected: {refusal}")
        self._refused(f"non-owner rank {rank}", 1, refusal)

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

    # ---- the same steps, enumerated (sim.ipc.explore walks them exhaustively) -------------------
    def _steps(self) -> list[tuple[str, tuple]]:
        """Every step the rules' preconditions allow now, as (rule name, arguments), one per distinct outcome."""
        steps: list[tuple[str, tuple]] = []
        if len(self._unfinished()) < self.slots:
            steps += [("publish", (g, o)) for g in range(self.dp) for o in range(self.group_size)]
        unread = sum(v is not None for v in self.unread_owner.values())
        steps += [("read", (i, r)) for i in range(unread) for r in (False, True)]
        releasing = sum(bool(v) for v in self.pending_release.values())
        steps += [("release", (i, r)) for i in range(releasing) for r in (False, True)]
        if self.prop in ("liveness", ALL) and self.items:
            steps.append(("drain", ()))
        return steps

    def _clone(self) -> _AckMachine:
        """A copy of the model state only (not Hypothesis's bookkeeping): cheap enough to branch on every step."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.pool = self.pool.clone()
        twin.items = list(self.items)
        twin.unread_owner = dict(self.unread_owner)
        twin.pending_release = {k: list(v) for k, v in self.pending_release.items()}
        twin.trace = list(self.trace)
        return twin

    def _key(self) -> tuple:
        """The state up to renaming items and generations: two states with equal keys have the same futures."""
        pool, live = self.pool, self._unfinished()
        # live items named in item order first: drain and the read/release indices follow that order
        names = {item: n for n, item in enumerate(live)}
        for s in pool.slots:
            if s.item is not None and s.item not in names:
                names[s.item] = len(names)
        slots = tuple(
            # a free counter chunk keeps what late acks added to it (the PR-era pre-charge)
            (True, names.get(s.item), s.total, frozenset(s.acked), s.counter) if s.busy else (False, s.counter)
            for s in pool.slots
        )
        items = []
        for item in live:
            lease = pool.leases[item]
            held = pool.slots[lease.slot]
            current = held.busy and held.item == item and held.generation == lease.generation
            acked = pool.acked_by(item)
            pending = tuple(self.pending_release[item])
            items.append(
                (names[item], self.unread_owner[item], pending, lease.slot, current, frozenset(lease.unread), acked)
            )
        return slots, tuple(items)

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
