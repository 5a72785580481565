"""The scheduler's event loop, one per attention-DP group: receive, broadcast, batch, prefill.

SGLang 0.5.23's ``Scheduler.event_loop_overlap`` (the default) and
``event_loop_normal`` run one iteration after another on the group's ranks in
lockstep. Per iteration, as modelled here:

1. CPU phase (``ingest_requests`` -> ``recv_requests``): rank 0 pulls *every*
   message that reached its socket since the last poll (no per-poll limit by
   default), unpickles them, ``broadcast_pyobj`` pickles the list, gloo sends
   it to the group, every rank copies and unpickles it, and
   ``_finalize_shm_features`` brackets the shared-memory attach with a barrier
   and an all-reduce. An empty broadcast still costs its latency. Then the
   scheduler's own work (``sched_s_per_iteration``).
2. The prefill batch: waiting requests first come first served, up to the
   token budget (``chunked_prefill_size``); a request that does not fit is
   chunked and continues next iteration. Every image whose first token falls
   in this chunk is encoded in *one* ViT call over the whole batch
   (``_batch_encode_per_image_misses``), its owners placed over the batch's
   images together. The owner's page reads, H2D copy (pageable memory: the host
   waits) and deferred preprocessing (its grid check syncs) block the host
   (``H``); the ViT, the padded all-gather and prefill run on the device.
3. With overlap the next CPU phase runs while the device works, and the next
   H2D starts only once the device is free (a pageable copy waits for the
   stream). Without overlap the host waits for the device every iteration.

Requests leave at their first token (decode is not modelled). Pure Python over
precomputed NumPy columns; a batch's vision cost is cached by its image types.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deferlab.sim.costmodel import CostModel
from deferlab.sim.placement.strategies import OPTIMAL_MAX_IMAGES, assign
from deferlab.sim.service import RequestPath


@dataclass
class LoopResult:
    """First-token times per request and what the loops spent (summed over groups)."""

    finish: np.ndarray
    batches: int = 0  # loop iterations: every iteration runs one (possibly empty) prefill batch
    cpu_phase_s: float = 0.0  # receive + broadcast + scheduler work
    host_vision_s: float = 0.0  # host-blocking part of vision (reads, H2D, deferred preprocessing)
    device_s: float = 0.0  # device busy: vision + all-gather + prefill

    def summary(self, span: float, groups: int) -> dict[str, float]:
        """Per-group utilizations over ``span`` seconds and the mean batch size (requests completed per batch:
        every request completes in exactly one batch)."""
        scale = 1.0 / max(span * groups, 1e-12)
        return {
            "loop_iterations": float(self.batches),
            "loop_batches": float(self.batches),
            "mean_batch_requests": len(self.finish) / self.batches if self.batches else 0.0,
            "util_cpu_phase": self.cpu_phase_s * scale,
            "util_host_vision": self.host_vision_s * scale,
            "util_device": self.device_s * scale,
        }


class _Vision:
    """Cost of one ViT call over a set of images: (host-blocking seconds, total seconds to the gathered output)."""

    def __init__(self, path: RequestPath, cm: CostModel, strategy: str) -> None:
        self.p, self.cm, self.strategy = path, cm, strategy
        cols = np.stack(
            [
                path.own_host_s,
                path.own_dev_s,
                path.all_host_s,
                path.all_dev_s,
                path.patches.astype(np.float64),
                path.out_tokens.astype(np.float64),
                path.load,
                path.deferred.astype(np.float64),
            ],
            axis=1,
        )
        _, self.kind = np.unique(cols, axis=0, return_inverse=True) if len(cols) else (None, np.zeros(0, np.int64))
        self.kind = self.kind.reshape(-1).tolist()
        self.cols = cols.tolist()
        self.cache: dict[tuple[int, ...], tuple[float, float]] = {}

    def cost(self, images: list[int]) -> tuple[float, float]:
        if not images:
            return 0.0, 0.0
        key = tuple(self.kind[i] for i in images)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = self._compute([self.cols[i] for i in images])
        return hit

    def _compute(self, rows: list[list[float]]) -> tuple[float, float]:
        cm, vw = self.cm, self.p.vision_world
        all_h = sum(r[2] for r in rows)
        all_d = sum(r[3] for r in rows)
        if vw <= 1:
            fixed = cm.preprocess_fixed_s if any(r[7] for r in rows) else 0.0
            return all_h + fixed, all_h + fixed + all_d
        strategy = self.strategy
        if strategy == "optimal" and len(rows) > OPTIMAL_MAX_IMAGES:
            strategy = "lpt-cost"  # brute force is for small n; a batch can hold more images
        owners = assign(strategy, [int(r[4]) for r in rows], [r[6] for r in rows], vw)
        host, total, toks = [], [], []
        for owned in owners:
            fixed = cm.preprocess_fixed_s if any(rows[i][7] for i in owned) else 0.0
            h = sum(rows[i][0] for i in owned) + fixed
            host.append(h)
            total.append(h + sum(rows[i][1] for i in owned))
            toks.append(sum(rows[i][5] for i in owned))
        gather = float(self.cm.allgather(float(max(toks)), vw))
        return max(host) + all_h, max(total) + all_h + all_d + gather


def run_loops(
    path: RequestPath,
    ready: np.ndarray,
    group: np.ndarray,
    cm: CostModel,
    *,
    overlap: bool = True,
    strategy: str = "lpt-patches",
) -> LoopResult:
    """Serve every request (ready at the scheduler at ``ready[r]``) through its group's event loop."""
    n = len(ready)
    result = LoopResult(finish=np.zeros(n))
    vision = _Vision(path, cm, strategy)
    cpu = (path.recv_s + path.bcast_pickle_s + path.bcast_unpickle_s).tolist()
    nbytes = path.bcast_bytes.tolist()
    shm = (path.shm_items > 0).tolist()
    tokens = path.tokens.tolist()
    offsets = path.offsets.tolist()
    starts = path.img_start.tolist()
    ready_at = ready.tolist()
    for g in np.unique(group).tolist():
        idx = np.flatnonzero(group == g)
        idx = idx[np.lexsort((idx, ready[idx]))].tolist()
        _group_loop(idx, ready_at, cpu, nbytes, shm, tokens, offsets, starts, path, cm, vision, overlap, result)
    return result


def _group_loop(
    idx: list[int],
    ready: list[float],
    cpu: list[float],
    nbytes: list[float],
    shm: list[bool],
    tokens: list[int],
    offsets: list[int],
    starts: list[int],
    path: RequestPath,
    cm: CostModel,
    vision: _Vision,
    overlap: bool,
    out: LoopResult,
) -> None:
    world, budget_max = path.world, int(cm.prefill_token_budget)
    per_token = path.prefill_s_per_token
    empty_bcast = cm.bcast(0.0, world)
    sched = cm.sched_s_per_iteration
    finish = out.finish
    t_host = gpu_free = 0.0
    p, m = 0, len(idx)
    waiting: list[int] = []
    head = 0
    progress: dict[int, int] = {}
    img_next: dict[int, int] = {}
    while p < m or head < len(waiting):
        if head == len(waiting) and ready[idx[p]] > t_host:
            t_host = ready[idx[p]]  # idle: the next poll finds the request on arrival
        q = p
        c, b, any_shm = sched, 0.0, False
        while q < m and ready[idx[q]] <= t_host:
            r = idx[q]
            c += cpu[r]
            b += nbytes[r]
            any_shm = any_shm or shm[r]
            waiting.append(r)
            progress[r] = 0
            img_next[r] = offsets[r]
            q += 1
        if world > 1:
            c += cm.bcast(b, world) if q > p else empty_bcast
            if any_shm:
                c += 2 * empty_bcast  # _finalize_shm_features: barrier, then the all-reduce of failures
        p = q
        t_host += c
        out.cpu_phase_s += c
        budget, run, done, images = budget_max, 0, [], []
        while head < len(waiting) and budget > 0:
            r = waiting[head]
            at = progress[r]
            take = min(tokens[r] - at, budget)
            i, end = img_next[r], offsets[r + 1]
            while i < end and starts[i] < at + take:
                images.append(i)
                i += 1
            img_next[r] = i
            progress[r] = at + take
            budget -= take
            run += take
            if at + take >= tokens[r]:
                done.append(r)
                head += 1
            else:
                break
        if head > 4096:  # keep the waiting list short without shifting it every iteration
            waiting, head = waiting[head:], 0
        h, v = vision.cost(images)
        start = max(t_host, gpu_free) if overlap else t_host
        gpu_free = start + v + run * per_token
        if not overlap:
            t_host = gpu_free
        elif h > 0:
            t_host = start + h  # a pageable H2D waits for the stream, then holds the host
        for r in done:
            finish[r] = gpu_free
        out.batches += 1
        out.host_vision_s += h
        out.device_s += v + run * per_token
