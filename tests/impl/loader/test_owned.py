"""Owned temporary folders (`impl.loader.owned`): a folder left by a process that is gone (killed, or a pytest-xdist
worker ended without its exit handlers) is swept by the next process that makes one; a live process's is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deferlab.impl.loader import owned


def _gone_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_a_folder_whose_owner_is_gone_is_swept(tmp_path: Path) -> None:
    stale = tmp_path / f"deferlab-patched-fakeeng-1.0.0-3b27f9d8-pid{_gone_pid()}-ab12cd_9"
    live = tmp_path / f"deferlab-vllm-config-pid{os.getpid()}-ef34gh56"
    unowned = tmp_path / "deferlab-patched-fakeeng-1.0.0-12345678-uzfkqkg5"  # no owner in its name: kept
    for folder in (stale, live, unowned):
        (folder / "tree").mkdir(parents=True)
    assert owned.sweep(tmp_path) == [stale]
    assert not stale.exists() and live.is_dir() and unowned.is_dir()


def test_a_folder_is_named_for_its_owner_and_written_once_per_key() -> None:
    made = owned.make("deferlab-test-owned-")
    assert made.is_dir() and made.name.startswith(f"deferlab-test-owned-pid{os.getpid()}-")
    first = owned.written("deferlab-test-owned-", "k", {"a.json": "{}"})
    assert owned.written("deferlab-test-owned-", "k", {"a.json": "other"}) == first
    assert (Path(first) / "a.json").read_text() == "{}" and owned.sweep(made.parent) == []
    with pytest.raises(ValueError, match="starts with 'deferlab-'"):
        owned.make("elsewhere-")
