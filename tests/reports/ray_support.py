"""Ray's processes of a test's own local instance, for the tests that check none is left (``--cluster local``).

A test marks its environment (`mark`) before it starts Ray: the instance's GCS, raylet, agents and workers
inherit the mark, so `ray_processes` finds that instance's processes only, not those of an instance another
pytest-xdist worker runs at the same time.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

MARK_ENV = "DEFERLAB_TEST_RAY"
RAY_CMD = (b"raylet", b"gcs_server", b"ray::", b"default_worker.py", b"/site-packages/ray/")


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
