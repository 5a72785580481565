"""Two models of the GPU feature pool's acknowledgement bookkeeping (semantics §8.2).

``GenerationPool`` is the released protocol: a slot carries a total consumer
count K_p and one acknowledgement word per consumer; a consumer acks one word
(K_c == 1, word ``tp_rank % K_p``) or all of them (K_c == K_p); anything else
errors; a slot is reusable only when every word carries the current
generation. Which words an ack writes can also be given explicitly
(``ack_words``: the words a count source says the code writes). What a *late*
write (one whose lease the slot no longer holds) does is the pool's
``late_acks`` rule, because the real pools differ there:

* ``"ignored"``: it cannot touch the current lease (semantics §8.1 as stated);
* ``"overwrite"``: the word takes the writer's old generation, undoing the
  current lease's ack of that word (a generation-valued word written with
  ``cuStreamWriteValue32``, compared for equality: SGLang's CUDA IPC pool);
* ``"count"``: the word is a flag without a generation, so the write counts
  for whichever lease holds the slot now; publishing clears the flags
  (SGLang's VMM pool).

``CounterPool`` is the PR-era protocol: one float counter per chunk; a consumer
adds its count (idempotent per rank and item: each rank holds its own copy of
the proxy, which remembers that it acknowledged); the recycler frees the chunk
only when the counter *equals* ``tp_size`` and then zeroes it. There are no
generations, so an ack that lands after the chunk was recycled is added to
whatever the chunk holds next. ``add`` takes the amount a count source says
one acknowledgement adds (SGLang 0.5.17's pool, run), ``ack`` the count itself
(the modelled PR).

Both record, per live item, which intended readers have not read yet, so the
caller can tell a safe free from an early one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Self, get_args

from deferlab.reference.oracle.ipc_counts import is_valid_ack
from deferlab.reference.system.policies import LateAcks


class InvalidAck(ValueError):
    """An acknowledgement the code refuses: a count outside {1, K_p} (the released rule), or what a source refuses."""


def released_words(count: int, total: int, rank: int) -> set[int]:
    """The released rule (semantics §8.1): all words for ``count == total``, ``rank % total`` for 1, else refused."""
    if not is_valid_ack(count, total):
        raise InvalidAck(f"acknowledgements support one consumer or the complete group, got {count}/{total}")
    return set(range(total)) if count == total else {rank % total}


LATE_ACKS: tuple[str, ...] = get_args(LateAcks)


@dataclass
class Slot:
    busy: bool = False
    generation: int = 0
    item: int | None = None
    total: int = 0  # K_p (generation pool)
    words: dict[int, int] = field(default_factory=dict)  # ack word -> the generation last written there
    counter: float = 0.0  # counter pool

    @property
    def acked(self) -> set[int]:
        """The words that carry the current generation (the lease's acknowledged consumers)."""
        return {w for w, g in self.words.items() if g == self.generation}


@dataclass
class Lease:
    """Where an item went and who still has to read it."""

    slot: int
    generation: int
    unread: set[int]
    total: int = 0  # K_p the proxy carries


class _Pool:
    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a pool needs at least one slot, got {slots}")
        self.slots = [Slot() for _ in range(slots)]
        self.leases: dict[int, Lease] = {}
        self.early_frees: list[str] = []  # safety violations observed at free time
        self.torn_reads: list[str] = []  # reads of a slot that no longer holds the item

    def clone(self) -> Self:
        """An independent copy (the exhaustive search branches on every step; deepcopy is several times slower)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.slots = [replace(s, words=dict(s.words)) for s in self.slots]
        twin.leases = {k: replace(v, unread=set(v.unread)) for k, v in self.leases.items()}
        twin.early_frees, twin.torn_reads = list(self.early_frees), list(self.torn_reads)
        return twin

    def acked_by(self, item: int) -> frozenset[int]:
        """The ranks whose acknowledgement of ``item`` the pool remembers (none: only `CounterPool`'s proxies do)."""
        return frozenset()

    def free_slots(self) -> int:
        return sum(not s.busy for s in self.slots)

    def _take(self, item: int, readers: set[int]) -> int | None:
        for i, s in enumerate(self.slots):
            if not s.busy:
                s.busy, s.item = True, item
                s.generation += 1
                self.leases[item] = Lease(i, s.generation, set(readers))
                return i
        return None

    def _free(self, index: int) -> None:
        s = self.slots[index]
        lease = self.leases.get(s.item) if s.item is not None else None
        if lease is not None and lease.generation == s.generation and lease.unread:
            self.early_frees.append(f"slot {index} freed while item {s.item} unread by rank(s) {sorted(lease.unread)}")
        s.busy, s.item = False, None

    def read(self, item: int, rank: int) -> None:
        """An intended reader maps and copies the item (before acknowledging)."""
        lease = self.leases[item]
        s = self.slots[lease.slot]
        if not (s.busy and s.item == item and s.generation == lease.generation):
            self.torn_reads.append(f"rank {rank} read item {item} from slot {lease.slot} after it was freed or reused")
        lease.unread.discard(rank)


class GenerationPool(_Pool):
    """Released, stream-ordered pool: one word per consumer, ack one or all; ``late_acks`` says what a late write does."""

    def __init__(self, slots: int, late_acks: str = "ignored") -> None:
        if late_acks not in LATE_ACKS:
            raise ValueError(f"late_acks must be one of {LATE_ACKS}, got {late_acks!r}")
        super().__init__(slots)
        self.late_acks = late_acks

    def publish(self, item: int, total: int, readers: set[int]) -> int | None:
        index = self._take(item, readers)
        if index is not None:
            self.slots[index].total = total
            self.leases[item].total = total
            if self.late_acks == "count":
                self.slots[index].words = {}  # flag words are zeroed when a lease is published
        return index

    def ack(self, item: int, rank: int, count: int) -> None:
        """The released count rule: ``count == K_p`` writes every word, ``1`` writes ``rank % K_p``, else refused."""
        self.ack_words(item, released_words(count, self.leases[item].total, rank))

    def ack_words(self, item: int, words: set[int] | frozenset[int]) -> None:
        """Write exactly ``words`` for ``item``'s lease (what a count source says the code writes)."""
        lease = self.leases[item]
        outside = sorted(w for w in words if not 0 <= w < lease.total)
        if outside:
            raise InvalidAck(f"ack word(s) {outside} outside the lease's [0, {lease.total})")
        s = self.slots[lease.slot]
        if s.busy and s.generation == lease.generation:
            stamp = lease.generation
        elif self.late_acks == "overwrite":
            stamp = lease.generation  # a stale generation: never equal to the current one, may erase its ack
        elif self.late_acks == "count" and s.busy:
            stamp = s.generation  # a flag word cannot tell leases apart
        else:
            return  # "ignored", or a flag written on a free slot (cleared when it is published)
        for w in words:
            s.words[w] = stamp

    def recycle(self) -> None:
        for i, s in enumerate(self.slots):
            if s.busy and all(s.words.get(w) == s.generation for w in range(s.total)):
                self._free(i)


class CounterPool(_Pool):
    """PR-era pool: float counter per chunk, recycled on equality with ``tp_size`` (the recycle threshold).

    ``idempotent``: a rank's second acknowledgement of the same item adds nothing (the proxy's
    ``_consumer_acknowledged`` flag); False adds every time, for a source whose code does.
    """

    def __init__(self, slots: int, tp_size: int, idempotent: bool = True) -> None:
        super().__init__(slots)
        self.tp_size = tp_size
        self.idempotent = idempotent
        self._acked: set[tuple[int, int]] = set()

    def clone(self) -> Self:
        twin = super().clone()
        twin._acked = set(self._acked)
        return twin

    def acked_by(self, item: int) -> frozenset[int]:
        return frozenset(r for i, r in self._acked if i == item)

    def publish(self, item: int, total: int, readers: set[int]) -> int | None:
        return self._take(item, readers)

    def ack(self, item: int, rank: int, count: int) -> None:
        """``rank`` acknowledges ``count`` consumers: the modelled counter adds the count itself."""
        self.add(item, rank, float(count))

    def add(self, item: int, rank: int, amount: float) -> None:
        """``rank``'s acknowledgement of ``item`` adds ``amount`` to whichever lease holds the chunk now (or to a
        free chunk: there is no generation to tell them apart)."""
        if self.idempotent and (item, rank) in self._acked:
            return  # idempotent per proxy (_consumer_acknowledged)
        self._acked.add((item, rank))
        self.slots[self.leases[item].slot].counter += float(amount)

    def recycle(self) -> None:
        for i, s in enumerate(self.slots):
            if s.busy and s.counter == float(self.tp_size):
                self._free(i)
                s.counter = 0.0
