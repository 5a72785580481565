"""Real SGLang IPC acknowledgement counts and words, shaped as the simulator's `AckCounts` source (claim C9).

Why a separate adapter: ``sim`` must stay free of torch and ``impl`` (a test
checks it), so the simulator takes its count source as a duck-typed object;
this class is that object for one loaded SGLang version. Every answer runs
SGLang's own code through `impl.sglang.counts.IPCCounts` (nothing is read off
a version number); `sources` names the function behind each answer, and
`provenance` says what could not run and why.

The protocol it meets (``reference.system.ipc.AckCounts``, the description's):
``name``, ``from_real_code``, ``producer_total(tp_size, attn_dp_size)``,
``requested(tp_size, attn_dp_size)``, ``resolve(requested, total, clamp)``,
``acknowledge(count, total, rank, *, tp_size, attn_dp_size) -> set[int]``
(SGLang's refusal raised as `AckRefused`, a ValueError), ``non_owner_release``,
``late_acks``, ``transports`` and ``for_transport(name)``, and ``pool``:
"generation" (0.5.18+: ack words) or "counter" (0.5.17: a shared-memory
counter per chunk, `impl.sglang.counterpool`; then ``producer_total`` is the
recycle threshold, ``acknowledge`` the amount added, and ``idempotent_acks``
says whether a rank's copy of a proxy adds only once). A topology
``(tp_size, attn_dp_size)`` with ``attn_dp_size > 1`` is attention DP on
with that many groups (``dp_size = attn_dp_size``); ``attn_dp_size == 1`` is
attention DP off.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from deferlab.impl.sglang.counts import IPCCounts

TRANSPORTS = ("cuda_ipc", "cuda_vmm")


class AckRefused(ValueError):
    """SGLang refused the acknowledgement: its own ValueError (a count) or RuntimeError (a rank), message kept."""


class SGLangAckCounts:
    """One loaded SGLang's counts for one transport pool (``transports``: the pools this object describes).

    ``transport="all"`` describes every pool the version has (CUDA IPC and VMM; 0.5.17: its CUDA IPC
    counter pool only); the simulator then checks each through `for_transport`. Answers are cached
    per argument: the state machine asks the same few questions thousands of times.
    """

    from_real_code = True

    def __init__(self, counts: IPCCounts, transport: str = "cuda_ipc", _cache: dict | None = None) -> None:
        if transport not in (*TRANSPORTS, "all"):
            raise ValueError(f"transport must be one of {(*TRANSPORTS, 'all')}, got {transport!r}")
        pools = counts.transports
        if transport not in (*pools, "all"):
            raise ValueError(f"{counts.source.name} has no {transport} pool (its pools: {pools}, {counts.pool_kind})")
        self.counts = counts
        self.pool = counts.pool_kind  # "generation" | "counter" (the AckCounts protocol's optional ``pool``)
        self.transport = "cuda_ipc" if transport == "all" else transport
        self.transports: tuple[str, ...] = pools if transport == "all" else (transport,)
        self._cache: dict[tuple, Any] = {} if _cache is None else _cache
        self._notes: dict[str, str] = {}
        self._views: dict[str, SGLangAckCounts] = {}
        pools = " + ".join(self.transports) + (" pools" if len(self.transports) > 1 else " pool")
        self.name = f"{counts.source.name} ({pools})"

    def for_transport(self, transport: str) -> SGLangAckCounts:
        """The view of one pool (shares this object's SGLang calls and cache)."""
        if transport not in self.transports:
            raise ValueError(f"{self.name} describes {self.transports}, not {transport!r}")
        if self.transports == (transport,):
            return self
        if transport not in self._views:
            self._views[transport] = SGLangAckCounts(self.counts, transport, self._cache)
        return self._views[transport]

    # -- cached calls into SGLang -------------------------------------------------------------------------------
    def _cached(self, key: tuple, fn: Callable[[], Any], refusals: tuple[type[Exception], ...] = ()) -> Any:
        """``fn()`` once per key; an exception in ``refusals`` is SGLang refusing, kept and raised as AckRefused."""
        if key not in self._cache:
            try:
                self._cache[key] = ("ok", fn())
            except refusals as e:
                self._cache[key] = ("refused", f"{type(e).__name__}: {e}")
        kind, value = self._cache[key]
        if kind == "refused":
            raise AckRefused(value)
        return value

    @staticmethod
    def _parallel(attn_dp_size: int) -> dict[str, Any]:
        return {"dp_size": attn_dp_size, "enable_dp_attention": attn_dp_size > 1}

    # -- the AckCounts protocol -----------------------------------------------------------------------------------
    def producer_total(self, tp_size: int, attn_dp_size: int) -> int:
        """K_p of this transport's pool: the code that builds the pool, run with this topology's parallel state.

        Counter pool: the counter value at which the recycler frees a chunk (its ``try_to_recycle``, run).
        """
        p = self._parallel(attn_dp_size)
        key = ("K_p", self.transport, tp_size, attn_dp_size)
        if self.pool == "counter":
            return self._cached(key, lambda: self.counts.counter.recycle_threshold(tp_size, **p))
        return self._cached(key, lambda: self.counts.producer_total(tp_size, transport=self.transport, **p))

    def requested(self, tp_size: int, attn_dp_size: int) -> int:
        """K_c the Kimi-K3 owner's loader passes to ``reconstruct`` (its default when it passes none)."""
        p = self._parallel(attn_dp_size)
        key = ("K_c", tp_size, attn_dp_size)
        return self._cached(key, lambda: self.counts.consumer_requested(tp_size, tp_size // attn_dp_size, **p))

    def resolve(self, requested: int, total: int, clamp: bool | None) -> int:
        """SGLang's clamp (``clamp`` None or True: the code's own; False: an assumed "no clamp")."""
        if clamp is False:
            return requested
        key = ("clamp", self.transport, requested, total)
        if self.pool == "counter":  # the count the owner's reconstruct hands the counter (0.5.17 has no clamp)
            return self._cached(key, lambda: self.counts.counter.owner_ack(requested)[0])
        return self._cached(key, lambda: self.counts.clamp(requested, total, self.transport))

    def acknowledge(self, count: int, total: int, rank: int, *, tp_size: int, attn_dp_size: int) -> set[int] | float:
        """The words this transport's proxy writes for ``count`` from global TP ``rank`` (AckRefused if refused).

        Counter pool: the amount one rank's first acknowledgement adds to the chunk's counter (rank and
        topology do not enter SGLang's add).
        """
        if self.pool == "counter":
            key = ("added", count)
            return self._cached(key, lambda: self.counts.counter.added(count), refusals=(ValueError,))
        p = self._parallel(attn_dp_size)
        key = ("words", self.transport, count, total, rank, tp_size, attn_dp_size)
        words, _ = self._cached(
            key,
            lambda: self.counts.ack_words(count, total, rank, transport=self.transport, tp_size=tp_size, **p),
            refusals=(ValueError, RuntimeError),  # SGLang's count check and its rank-range check
        )
        return set(words)

    @cached_property
    def non_owner_release(self) -> bool | None:
        """Whether a rank that never read an item acknowledges its word at request end: SGLang's release run.

        ``MultimodalInputs.release_features()`` is run on an item whose feature is a recording
        stand-in of this transport's proxy class (a non-owner's item), and on one holding the
        tensor an owner has after ``reconstruct``. True when the non-owner's item acknowledges
        exactly one word (count 1), False when nothing is acknowledged, None (with the reason in
        `provenance`) when the path cannot run or does something the simulator does not model.
        """
        try:
            if self.pool == "counter":
                calls, added = self.counts.counter.request_end_releases()
                owner_calls, _ = self.counts.counter.request_end_releases(owner=True)
                if added != sum(c for c, _ in calls):
                    raise RuntimeError(f"the counter holds {added} after acknowledgements {calls}")
            else:
                calls = self.counts.request_end_releases(self.transport, 2)
                owner_calls = self.counts.request_end_releases(self.transport, 2, owner=True)
        except Exception as e:  # a version whose release path cannot run here: unknown, not guessed
            self._notes["non_owner_release"] = f"could not run the release path: {type(e).__name__}: {e}"
            return None
        self._notes["non_owner_release"] = (
            f"release_features() on a non-owner's item acknowledged {[c for c, _ in calls] or 'nothing'}"
            + (f" via {calls[0][1]}" if calls else "")
            + f"; on the owner's (reconstructed) item: {[c for c, _ in owner_calls] or 'nothing'}"
        )
        if owner_calls:
            self._notes["non_owner_release"] += " (the owner acknowledges again at request end: not modelled)"
            return None
        if not calls:
            return False
        if [c for c, _ in calls] == [1]:
            return True
        self._notes["non_owner_release"] += " (not a single count-1 acknowledgement: not modelled)"
        return None

    @cached_property
    def late_acks(self) -> str:
        """What a write for a lease the slot no longer holds does, from what the proxy writes (run twice).

        The words are written once with generation 7 and once with 8: values that follow the proxy's
        generation are generation words ("overwrite": compared for equality by the recycler, so a stale
        value erases the current lease's ack); values that do not are flags ("count": they count for
        whichever lease holds the slot).
        """
        if self.pool == "counter":
            after = self.counts.counter.late_add()
            kind = "count" if after == 1.0 else "ignored"
            self._notes["late_acks"] = (
                f"a stale proxy copy's ack of 1 after its chunk was recycled (counter zeroed) leaves the counter at "
                f"{after}: {kind} (no generation: it counts for the chunk's next lease, or pre-charges a free one)"
            )
            return kind
        a = self.counts.ack_words(1, 1, 0, transport=self.transport, tp_size=1, generation=7)[1]
        b = self.counts.ack_words(1, 1, 0, transport=self.transport, tp_size=1, generation=8)[1]
        if a == [7] and b == [8]:
            kind = "overwrite"
        elif a == b and a:
            kind = "count"
        else:
            raise RuntimeError(f"{self.name}: unexpected ack word values {a} / {b}")
        self._notes["late_acks"] = (
            f"a single ack writes {a} (generation 7) and {b} (generation 8): {kind}; that the recycler "
            "compares words for equality (CUDA IPC) or counts nonzero flags and the producer zeroes them "
            "(VMM) is read from the pool code, which needs CUDA to run"
        )
        return kind

    @cached_property
    def idempotent_acks(self) -> bool:
        """Counter pool: whether a rank's second acknowledgement of an item adds nothing (run; True otherwise)."""
        if self.pool != "counter":
            return True
        got = self.counts.counter.idempotence()
        self._notes["idempotent_acks"] = f"one copy acked 1 twice -> {got['one copy, twice']}; " + (
            f"another copy of the same proxy then adds {got['another copy adds']} (idempotent per copy, i.e. per rank)"
        )
        if got["another copy adds"] != 1.0:
            raise RuntimeError(f"{self.name}: a second copy of the proxy added {got['another copy adds']}, not 1")
        return got["one copy, twice"] == 1.0

    # -- what ran --------------------------------------------------------------------------------------------------
    @property
    def sources(self) -> dict[str, str]:
        """Every SGLang function behind an answer given so far (IPCCounts.sources) and the adapter's own probes."""
        return {**self.counts.sources, **{f"ackcounts.{k}": v for k, v in self._notes.items()}}

    def provenance(self) -> dict[str, str]:
        """Per protocol member: real (the function run) or modelled and why."""
        _ = self.non_owner_release, self.late_acks, self.idempotent_acks
        src = self.counts.sources
        if self.pool == "counter":
            return {
                "pool": "real: " + src["pool_kind"],
                "producer_total": "real: " + src.get("producer_total[counter]", "not asked yet"),
                "requested": "real: " + src.get("consumer_requested", "not asked yet"),
                "resolve": "real: " + src.get("resolve[counter]", "not asked yet"),
                "acknowledge": "real: " + src.get("ack[counter]", "not asked yet"),
                "idempotent_acks": "real: " + self._notes["idempotent_acks"],
                "non_owner_release": ("real: " if self.non_owner_release is not None else "unknown: ")
                + self._notes["non_owner_release"],
                "late_acks": "real (add, recycle, stale add on one segment): " + self._notes["late_acks"],
                "topology": "attn_dp_size > 1 means enable_dp_attention with dp_size = attn_dp_size; the threshold "
                f"reads only {' / '.join(self.counts.counter.threshold_reads())} (the TP size)",
            }
        return {
            "producer_total": "real: " + self.counts.sources.get(f"producer_total[{self.transport}]", "not asked yet"),
            "requested": "real: " + self.counts.sources.get("consumer_requested", "not asked yet"),
            "resolve": "real: " + self.counts.sources.get(f"clamp[{self.transport}]", "not asked yet"),
            "acknowledge": "real: " + self.counts.sources.get(f"ack_words[{self.transport}]", "not asked yet"),
            "non_owner_release": ("real: " if self.non_owner_release is not None else "unknown: ")
            + self._notes["non_owner_release"],
            "late_acks": "real (values written) + read (recycler): " + self._notes["late_acks"],
            "topology": "attn_dp_size > 1 means enable_dp_attention with dp_size = attn_dp_size; no context parallelism",
        }
