"""Two models of the GPU feature pool's acknowledgement bookkeeping (semantics §8.2).

``GenerationPool`` is the released protocol: a slot carries a total consumer
count K_p and one acknowledgement word per consumer; a consumer acks one word
(K_c == 1, word ``tp_rank % K_p``) or all of them (K_c == K_p); anything else
errors; a slot is reusable only when every word carries the current
generation. An ack for an older generation is ignored (generation tags).

``CounterPool`` is the PR-era protocol: one float counter per chunk; a consumer
adds its count (idempotent per rank and item); the recycler frees the chunk
only when the counter *equals* ``tp_size`` and then zeroes it. There are no
generations, so an ack that lands after the chunk was recycled is added to
whatever the chunk holds next.

Both record, per live item, which intended readers have not read yet, so the
caller can tell a safe free from an early one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class InvalidAck(ValueError):
    """A requested count outside {1, K_p} (the released pool's rule)."""


@dataclass
class Slot:
    busy: bool = False
    generation: int = 0
    item: int | None = None
    total: int = 0  # K_p (generation pool)
    acked: set[int] = field(default_factory=set)  # words acked for the current generation
    counter: float = 0.0  # counter pool


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

    def free_slots(self) -> int:
        return sum(not s.busy for s in self.slots)

    def _take(self, item: int, readers: set[int]) -> int | None:
        for i, s in enumerate(self.slots):
            if not s.busy:
                s.busy, s.item = True, item
                s.generation += 1
                s.acked = set()
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
    """Released, stream-ordered pool: generation-tagged words, ack 1 or all."""

    def publish(self, item: int, total: int, readers: set[int]) -> int | None:
        index = self._take(item, readers)
        if index is not None:
            self.slots[index].total = total
            self.leases[item].total = total
        return index

    def ack(self, item: int, rank: int, count: int) -> None:
        lease = self.leases[item]
        s = self.slots[lease.slot]
        if count not in (1, lease.total):
            raise InvalidAck(f"acknowledgements support one consumer or the complete group, got {count}/{lease.total}")
        if not s.busy or s.generation != lease.generation:
            return  # stale: the slot moved on; a generation-tagged word cannot match
        if count == s.total:
            s.acked = set(range(s.total))
        else:
            s.acked.add(rank % s.total)

    def recycle(self) -> None:
        for i, s in enumerate(self.slots):
            if s.busy and len(s.acked) >= s.total:
                self._free(i)


class CounterPool(_Pool):
    """PR-era pool: float counter per chunk, recycled on equality with tp_size."""

    def __init__(self, slots: int, tp_size: int) -> None:
        super().__init__(slots)
        self.tp_size = tp_size
        self._acked: set[tuple[int, int]] = set()

    def publish(self, item: int, total: int, readers: set[int]) -> int | None:
        return self._take(item, readers)

    def ack(self, item: int, rank: int, count: int) -> None:
        if (item, rank) in self._acked:
            return  # idempotent per proxy (_consumer_acknowledged)
        self._acked.add((item, rank))
        self.slots[self.leases[item].slot].counter += float(count)

    def recycle(self) -> None:
        for i, s in enumerate(self.slots):
            if s.busy and s.counter == float(self.tp_size):
                self._free(i)
                s.counter = 0.0
