"""A real process boundary for the impl benchmarks: R scheduler-rank worker processes fed through pipes.

The producer serializes a request's items once (`impl.transport.serialize_items`)
and writes the bytes into each rank's pipe; each rank deserializes its own
copy and materializes only the images it owns (BF16), then acknowledges.
This is the microbenchmark of PR #33921 (semantics §9) on CPU processes: eager
ships FP32 patches, deferred ships uint8 pixels and preprocesses on owners.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

import torch

from deferlab.reference.system.config import PreprocessConfig


def bench_device() -> str:
    """Where ranks and the producer compute: ``DEFERLAB_BENCH_DEVICE`` (``scripts/gpu_check.sh`` sets cuda), else cpu."""
    return os.environ.get("DEFERLAB_BENCH_DEVICE", "cpu")


def rank_worker(conn: Connection, config: PreprocessConfig) -> None:
    """One scheduler rank: receive (owned indices, item bytes), deserialize, materialize owned images, ack."""
    torch.set_num_threads(1)
    device = bench_device()
    from deferlab.impl.model import materialize
    from deferlab.impl.transport import deserialize_items

    while True:
        header = conn.recv()
        if header is None:
            return
        owned = pickle.loads(header)
        data = conn.recv_bytes()
        items = deserialize_items(data)
        rows = 0
        if owned:
            out = materialize(items, owned, config, device=device)
            if out.is_cuda:
                torch.cuda.synchronize()
            rows = int(out.shape[0])
        conn.send(rows)


class RankPool:
    """R persistent rank processes (spawned once; start-up is not part of any measurement)."""

    def __init__(self, ranks: int, config: PreprocessConfig) -> None:
        ctx = mp.get_context("spawn")
        self.conns: list[Connection] = []
        self.procs = []
        for _ in range(ranks):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=rank_worker, args=(child, config), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def round_trip(self, data: bytes, owners: Sequence[Sequence[int]]) -> int:
        """Ship ``data`` to every rank, each with its owned indices; wait for all; total rows materialized."""
        for conn, owned in zip(self.conns, owners, strict=True):
            conn.send(pickle.dumps(list(owned)))
            conn.send_bytes(data)
        return sum(conn.recv() for conn in self.conns)

    def close(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(timeout=10)


def timed(fn, rounds: int) -> float:
    """Best-of-``rounds`` wall time of ``fn()`` in seconds (the least disturbed run on a shared machine)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def best_alternating(fa, fb, rounds: int = 4) -> tuple[float, float]:
    """Best-of-``rounds`` times of ``fa`` and ``fb`` run in turn, so a burst of load hits both alike."""
    a_s, b_s = float("inf"), float("inf")
    for _ in range(rounds):
        a_s = min(a_s, timed(fa, 1))
        b_s = min(b_s, timed(fb, 1))
    return a_s, b_s
