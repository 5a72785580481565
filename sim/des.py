"""A discrete-event simulation (heapq) of requests flowing through FIFO stages.

Each stage has one or more servers (the producer has one; the ``group`` stage
one per attention-DP group); a request visits the stages in order and is
served by the server its `StageTimes` row names. The heap key is
``(time, EventKind, seq)``: at equal times a completion is handled before an
arrival (a server frees before the next request looks for one), and ``seq``
keeps creation order otherwise; a test pins this order.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from sim.service import StageTimes


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


def simulate(arrival: np.ndarray, st: StageTimes, *, keep_order: bool = False) -> Timeline:
    """Serve every request through every stage; O(events log events)."""
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
