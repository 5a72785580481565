"""A discrete-event simulation of requests flowing through FIFO stages (the tokenizer, EPD encoders).

Each stage has one or more servers; a request visits the stages in order and
is served by the server its `StageTimes` row names. Two engines give the same
timeline (a property test checks it):

* ``heap``: a heapq event loop keyed ``(time, EventKind, seq)``: at equal
  times a completion is handled before an arrival (a server frees before the
  next request looks for one), and ``seq`` keeps creation order otherwise.
* ``lindley``: when every stage has a single server, FIFO keeps the arrival
  order through the whole tandem, and each stage is Lindley's recursion
  ``D_j = max(A_j, D_{j-1}) + S_j``, solved in closed form as a running
  maximum (``D = C + cummax(A - C + S)``, C the cumulative service), in
  NumPy: this is what lets 10^7 requests through in a second, so the engine
  can be checked against M/M/1 and M/D/1 theory at loads up to 0.9.

The scheduler's event loop (batching, broadcast, prefill) is `sim.eventloop`.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from deferlab.sim.service import StageTimes


class EventKind(IntEnum):
    """Same-time order: completions first, then arrivals."""

    DONE = 0
    ARRIVE = 1


@dataclass(frozen=True)
class Timeline:
    """Per-request timestamps; every latency metric derives from these."""

    arrival: np.ndarray
    finish: np.ndarray  # first token (end of the last stage)
    stage_start: np.ndarray  # [n, stages]
    stage_end: np.ndarray
    order: list[tuple[float, int, int]]  # (time, kind, request) in handling order, for tests

    @property
    def ttft(self) -> np.ndarray:
        return self.finish - self.arrival


ENGINES = ("auto", "heap", "lindley")


def simulate(arrival: np.ndarray, st: StageTimes, *, keep_order: bool = False, engine: str = "auto") -> Timeline:
    """Serve every request through every stage.

    ``auto`` takes the ``lindley`` engine when every stage has one server and no
    event order is asked for, else ``heap`` (O(events log events)).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    single = not st.server.any()
    if engine == "lindley" and (keep_order or not single):
        raise ValueError("the lindley engine needs one server per stage and no keep_order")
    if engine == "lindley" or (engine == "auto" and single and not keep_order):
        return _lindley(np.asarray(arrival, dtype=np.float64), st)
    return _heap(arrival, st, keep_order)


def _lindley(arrival: np.ndarray, st: StageTimes) -> Timeline:
    """Single-server FIFO stages in tandem: the arrival order (time, then index) holds at every stage."""
    n, k = st.times.shape
    order = np.argsort(arrival, kind="stable")
    t = arrival[order]
    start = np.zeros((n, k))
    end = np.zeros((n, k))
    for s in range(k):
        service = st.times[order, s]
        cum = np.cumsum(service)
        done = cum + np.maximum.accumulate(t - cum + service)
        start[order, s] = done - service
        end[order, s] = done
        t = done
    return Timeline(arrival, end[:, -1].copy() if k else arrival.copy(), start, end, [])


def _heap(arrival: np.ndarray, st: StageTimes, keep_order: bool) -> Timeline:
    n, k = st.times.shape
    times = st.times.tolist()
    server = st.server.tolist()
    start = np.zeros((n, k))
    end = np.zeros((n, k))
    busy: dict[tuple[int, int], bool] = {}
    queues: dict[tuple[int, int], deque[int]] = {}
    heap: list[tuple[float, int, int, int, int]] = []
    seq = 0
    for r, t in enumerate(arrival.tolist()):
        heap.append((t, EventKind.ARRIVE, seq, r, 0))
        seq += 1
    heapq.heapify(heap)
    order: list[tuple[float, int, int]] = []

    def begin(now: float, r: int, s: int) -> None:
        nonlocal seq
        start[r, s] = now
        heapq.heappush(heap, (now + times[r][s], EventKind.DONE, seq, r, s))
        seq += 1

    while heap:
        now, kind, _, r, s = heapq.heappop(heap)
        if keep_order:
            order.append((now, int(kind), r))
        key = (s, server[r][s])
        if kind == EventKind.ARRIVE:
            if busy.get(key):
                queues.setdefault(key, deque()).append(r)
            else:
                busy[key] = True
                begin(now, r, s)
            continue
        end[r, s] = now
        if s + 1 < k:
            heapq.heappush(heap, (now, EventKind.ARRIVE, seq, r, s + 1))
            seq += 1
        q = queues.get(key)
        if q:
            begin(now, q.popleft(), s)
        else:
            busy[key] = False
    return Timeline(np.asarray(arrival, dtype=np.float64), end[:, -1].copy(), start, end, order)


def littles_law(tl: Timeline, window: tuple[float, float] = (0.25, 0.75)) -> dict[str, float]:
    """L (time-average requests in system) against lambda * W over the middle of the run.

    L integrates the in-system count from the timestamps; lambda counts
    arrivals in the window; W is the mean TTFT of requests in the window.
    """
    t0 = float(tl.arrival.min()) + window[0] * float(tl.finish.max() - tl.arrival.min())
    t1 = float(tl.arrival.min()) + window[1] * float(tl.finish.max() - tl.arrival.min())
    span = t1 - t0
    overlap = np.clip(np.minimum(tl.finish, t1) - np.maximum(tl.arrival, t0), 0, None)
    big_l = float(overlap.sum()) / span
    inside = (tl.arrival >= t0) & (tl.arrival < t1)
    lam = float(inside.sum()) / span
    w = float(tl.ttft[inside].mean()) if inside.any() else 0.0
    return {"L": big_l, "lambda": lam, "W": w, "lambda_W": lam * w, "window_s": span}
