"""The cross-process measurements of ``deferlab calibrate``: a local socket and torch.distributed gloo broadcasts.

These start processes (a socket peer; 2, 4 and 8 gloo ranks on the local
host, as ``broadcast_pyobj`` runs inside a TP group), so each can fail on its
own (no free port, a worker dies): a failure is one line, and the rest of the
profile is still written.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from deferlab.sim.calibrate.core import SMALL, MiB, Recorder, timed


def _sock_child(conn: socket.socket) -> None:
    """Receive length-prefixed messages and acknowledge each with one byte, until a zero length."""
    while True:
        n = int.from_bytes(_recv_exact(conn, 8), "little")
        if n == 0:
            return
        _recv_exact(conn, n)
        conn.sendall(b"k")


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = conn.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed")
        got += k
    return bytes(buf)


def measure_socket(rec: Recorder) -> None:
    """A message over a local (AF_UNIX) stream socket to another process, as ZMQ's ipc:// transport carries it."""
    import multiprocessing as mp

    rec.say("calibrate: local socket to another process")
    a, b = socket.socketpair()
    proc = mp.get_context("fork").Process(target=_sock_child, args=(b,), daemon=True)
    proc.start()
    b.close()

    def send(data: bytes) -> None:
        a.sendall(len(data).to_bytes(8, "little") + data)
        _recv_exact(a, 1)

    big, small = bytes(32 * MiB), bytes(16)
    try:
        tb, ts = timed(lambda: send(big), rec.repeats), timed(lambda: send(small), rec.repeats * SMALL)
    finally:
        a.sendall((0).to_bytes(8, "little"))
        proc.join(10)
        a.close()
    how = "socketpair(AF_UNIX) to a forked process, length-prefixed, 1-byte acknowledgement"
    rec.rate("socket_bytes_per_s", len(big), tb, f"{how}: 32 MiB minus a 16-byte message's time", statistics.median(ts))
    rec.put("socket_latency_s", ts, "s", f"{how}: a 16-byte message")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bcast_worker(rank: int, world: int, port: int, sizes: Sequence[int], repeats: int, queue: Any) -> None:
    """One rank: gloo broadcasts of each size from rank 0 as broadcast_pyobj does (size, then bytes), timed on rank 0.

    Any failure goes back as one line (``("error", rank, text)``), so the parent can report it in one line.
    """
    import datetime

    import torch
    import torch.distributed as dist

    try:
        torch.set_num_threads(1)
        timeout = datetime.timedelta(seconds=60)
        url = f"tcp://127.0.0.1:{port}"
        dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world, timeout=timeout)
        res: dict[int, list[float]] = {}
        for n in sizes:
            buf, size = torch.zeros(n, dtype=torch.uint8), torch.tensor([n], dtype=torch.long)
            ts = []
            for _ in range((repeats * SMALL if n <= 64 * 1024 else repeats) + 1):
                dist.barrier()
                t = time.perf_counter()
                dist.broadcast(size, src=0)
                dist.broadcast(buf, src=0)
                dist.barrier()
                ts.append(time.perf_counter() - t)
            res[n] = ts[1:]
        if rank == 0:
            queue.put(("ok", rank, res))
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - reported by the parent in one line
        queue.put(("error", rank, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]))


def run_bcast(
    world: int, sizes: Sequence[int], repeats: int, port: int | None = None, timeout: float = 120.0
) -> dict[int, list[float]]:
    """Start ``world`` local processes (forkserver, torch preloaded), time the broadcasts; RuntimeError in one line."""
    import multiprocessing as mp

    ctx = mp.get_context("forkserver")
    queue = ctx.SimpleQueue()
    port = _free_port() if port is None else port
    args = (world, port, list(sizes), repeats, queue)
    procs = [ctx.Process(target=_bcast_worker, args=(r, *args), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if not queue.empty():
                kind, rank, value = queue.get()
                if kind == "ok":
                    return value
                raise RuntimeError(f"rank {rank} of {world} failed on port {port}: {value}")
            dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"rank {dead[0][0]} of {world} died with exit code {dead[0][1]} (port {port})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no result within {timeout:.0f} s (port {port})")
            time.sleep(0.02)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()  # our own workers, by object: never a broad kill
            p.join(5)


def measure_bcast(rec: Recorder, port: int | None = None) -> list[str]:
    """gloo broadcast among 2, 4 and 8 local processes; a failure is one line and those constants are left out."""
    import multiprocessing as mp

    with contextlib.suppress(ValueError):
        mp.set_forkserver_preload(["torch", "torch.distributed"])
    failures = []
    cores = os.cpu_count() or 1
    for world in (2, 4, 8):
        rec.say(f"calibrate: gloo broadcast among {world} local processes")
        try:
            res = run_bcast(world, (1024, 32 * MiB), rec.repeats, port)
        except Exception as e:  # noqa: BLE001 - any failure of the process group is reported, not raised
            line = f"calibrate: gloo group of {world} did not run ({type(e).__name__}: {e}); bcast_*_w{world} left out"
            print(line, file=sys.stderr)
            failures.append(line)
            continue
        small, big = res[1024], res[32 * MiB]
        over = f"; {world} processes on {cores} cores: oversubscribed" if world > cores else ""
        how = f"torch.distributed gloo over tcp://127.0.0.1, world {world}: broadcast of the size, then the bytes, barrier after{over}"
        rec.rate(
            f"bcast_bytes_per_s_w{world}",
            32 * MiB,
            big,
            f"{how}; 32 MiB minus a 1 KiB broadcast's time",
            statistics.median(small),
        )
        rec.put(f"bcast_latency_s_w{world}", small, "s", f"{how}; 1 KiB")
    return failures
