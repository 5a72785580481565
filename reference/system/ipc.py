"""The IPC acknowledgement-count source, written once: what the simulator's pool machine asks of its counts.

Why here: three rooms meet at this shape (``sim.ipc.machine`` checks a source,
``impl.sglang`` adapts real SGLang code to it, the seam hands such sources
over), and none may import the others, so the description holds it. A
``typing.Protocol`` only (duck-typed, no algorithms): the rules themselves are
the oracle's (``reference.oracle.ipc_counts``) and the pool's (``sim.ipc.pool``).
"""

from __future__ import annotations

from typing import Protocol


class AckCounts(Protocol):
    """Where the counts come from: a modelled policy (`PolicyCounts`) or real SGLang code (the driver's adapter).

    The contract (duck-typed; a real source is passed in as an object, sim never imports it):

    * ``name``, ``from_real_code``: what the verdict rows say the counts are.
    * ``producer_total(tp_size, attn_dp_size) -> int | None``: K_p of one pool slot; None when the source
      has no producer count of its own (the seed PR: semantics §8 leaves K_p open; the assumptions then
      say which K_p to use). ``attn_dp_size > 1`` means attention DP is on with that many groups.
    * ``requested(tp_size, attn_dp_size) -> int``: K_c the vision-DP owner passes.
    * ``resolve(requested, total, clamp) -> int``: the count finally acknowledged; ``clamp=None`` means
      "as the source's code does".
    * ``acknowledge(count, total, rank, *, tp_size, attn_dp_size) -> set[int]``: the ack words a consumer
      of global TP ``rank`` writes when it acknowledges ``count`` of a slot of ``total`` words (the
      topology is given for sources whose word depends on the group). When the code refuses, it
      raises ``ValueError`` (`sim.ipc.pool.InvalidAck` is one; a real source raises its own subclass
      carrying the code's message); the machine records any ValueError from it as a refused ack.
    * ``non_owner_release: bool | None``: whether every non-owner rank of the group acknowledges its own
      word (count 1) for an item it never read (SGLang: at request end); None when unknown (the
      assumption grid then tries both).

    Optional (read with ``getattr``): ``late_acks`` (`sim.ipc.pool.LATE_ACKS`: what a write for a lease the
    slot no longer holds does; default "ignored"), and ``transports`` with ``for_transport(name)``: the
    pools (e.g. "cuda_ipc", "cuda_vmm") this source can describe, each as its own `AckCounts` view.

    ``pool`` (optional, default "generation") says which bookkeeping the answers describe. Everything above
    is "generation" (ack words). "counter" is the PR-era shared-memory counter (SGLang 0.5.17), which has
    no words, so three answers change meaning (the grid then gives the source counter rows):

    * ``producer_total``: the counter value at which the recycler frees a chunk (None: the row's
      ``tp_size``); the machine passes it on as ``total``.
    * ``resolve``: the count that reaches the counter (``requested`` where the code has no clamp).
    * ``acknowledge(count, total, rank, ...) -> float``: the amount one rank's *first* acknowledgement of
      an item adds to the chunk's counter; refusals as above. ``idempotent_acks`` (default True) says
      whether that rank's later acknowledgements of the same item add nothing. ``late_acks`` is not
      read: with no generation, a late add always lands on the chunk's counter, whoever holds it now.
    """

    name: str
    from_real_code: bool
    non_owner_release: bool | None

    def producer_total(self, tp_size: int, attn_dp_size: int) -> int | None: ...

    def requested(self, tp_size: int, attn_dp_size: int) -> int: ...

    def resolve(self, requested: int, total: int, clamp: bool | None) -> int: ...

    def acknowledge(
        self, count: int, total: int, rank: int, *, tp_size: int, attn_dp_size: int
    ) -> set[int] | float: ...  # words (generation pool) or the amount added (counter pool)
