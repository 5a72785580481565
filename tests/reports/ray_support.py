"""What the Ray tests share: the processes of a test's own Ray instance, the TCP sockets they listen on, and the
matrix of two fake systems both executors run.

A test marks its environment (`mark`) before it starts Ray: the instance's GCS, raylet, agents, client server and
workers inherit the mark, so `ray_processes` and `listeners` find that instance's processes only, not those of an
instance another pytest-xdist worker runs at the same time; `stop` ends them (``ray stop`` would end every Ray of
this machine's user, other tests' included).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from deferlab.reference.system.systems import System
from deferlab.reports.core import executor, runner
from tests.reports.mutate_fake import claims as fake_claims
from tests.reports.mutate_fake import claims_vllm as fake_vllm
from tests.reports.mutate_fake.fakes import FAKE, HERE, VLLM_FAKE, FakeHarness, FakeVLLMHarness

MARK_ENV = "DEFERLAB_TEST_RAY"
RAY_CMD = (b"raylet", b"gcs_server", b"ray::", b"default_worker.py", b"/site-packages/ray/", b"ray.util.client.server")


def mark(monkeypatch: pytest.MonkeyPatch) -> str:
    """A new mark in this test's environment, inherited by every process of the Ray instance it starts."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARK_ENV, value)
    return value


def ray_processes(marked: str | None = None, wait: float = 0.0) -> list[int]:
    """Ray's own processes still running (its raylet, GCS, agents, workers), those carrying ``marked`` when given;
    polled up to ``wait`` seconds for them to end."""
    deadline = time.monotonic() + wait
    while True:
        found = _scan(marked)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def stop(marked: str) -> list[int]:
    """End the instance carrying ``marked``: SIGTERM, then SIGKILL for what is left after 10 s; what remains."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        for pid in _scan(marked):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        if not ray_processes(marked, wait=grace):
            break
    return ray_processes(marked)


def _scan(marked: str | None) -> list[int]:
    found = []
    needle = None if marked is None else f"{MARK_ENV}={marked}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            if not any(word in cmd for word in RAY_CMD):
                continue
            if needle is not None and needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        found.append(int(entry.name))
    return found


def listeners(marked: str) -> list[tuple[int, str, str, int]]:
    """The TCP sockets in LISTEN state held by the processes of the instance carrying ``marked``: (pid, program,
    address, port), an IPv4-mapped IPv6 address written as its IPv4 one (``0.0.0.0`` and ``::`` are every
    interface). Read from /proc/net/tcp and /proc/net/tcp6, each socket's inode mapped to its process through
    /proc/PID/fd."""
    listening = {}
    for table, width in (("tcp", 4), ("tcp6", 16)):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] != "0A":  # TCP_LISTEN
                    continue
                hexaddr, hexport = fields[1].split(":")
                raw = bytes.fromhex(hexaddr)  # 32-bit words, each in this (little-endian) host's order
                address = ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, width, 4)))
                if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                    address = address.ipv4_mapped
                listening[fields[9]] = (str(address), int(hexport, 16))
    found = []
    for pid in _scan(marked):
        try:
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:[") and link[8:-1] in listening:
                found.append((pid, Path(program).name, *listening[link[8:-1]]))
    return sorted(found)


def matrix() -> list[executor.Task]:
    """One task per fake system: every claim test and property of the fake SGLang, every claim of the fake vLLM."""
    sglang = [f"{HERE}/{n}" for n in [*fake_claims.NODES.values(), *fake_claims.PROPERTIES]]
    vllm = [f"{HERE}/{n}" for n in fake_vllm.NODES.values()]
    return [
        executor.Task("sglang", runner.Request(System("sglang", str(FAKE)), nodes=tuple(sglang), timeout=60),
                      launcher=FakeHarness().launch),
        executor.Task("vllm", runner.Request(System("vllm", str(VLLM_FAKE)), nodes=tuple(vllm), timeout=60),
                      launcher=FakeVLLMHarness().launch),
    ]  # fmt: skip


def seen(record: runner.RunRecord) -> dict:
    """What a run found, to compare two executors' records: each test's outcome and message, each verdict row."""
    tests = {n: (t.outcome, t.message) for n, t in record.tests.items()}
    rows = sorted((r["id"], r["policy"], r["verdict"], r["evidence"]) for r in record.rows)
    return {"tests": tests, "rows": rows, "error": record.error}
