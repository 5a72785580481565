"""Crash-safe writing: a write that dies half-way never replaces what was there."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deferlab.reports.core.atomic import (
    read_latest,
    staged_directory,
    update_latest,
    write_bytes_atomic,
    write_with_atomic,
)


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


@given(old=st.binary(max_size=64), new=st.binary(max_size=64))
def test_write_bytes_atomic_replaces_whole(tmp_path_factory: pytest.TempPathFactory, old: bytes, new: bytes) -> None:
    """After a completed atomic write the file holds exactly the new bytes and no temp file remains."""
    d = tmp_path_factory.mktemp("w")
    target = d / "f.bin"
    write_bytes_atomic(target, old)
    write_bytes_atomic(target, new)
    assert target.read_bytes() == new and _leftovers(d) == []


def test_writer_dying_half_way_keeps_the_old_file(tmp_path: Path) -> None:
    """A writer that wrote part of its output and then crashed leaves the previous file intact and no temp file."""
    target = tmp_path / "fig.png"
    target.write_bytes(b"complete old figure")

    def half(tmp: Path) -> None:
        tmp.write_bytes(b"trunc")
        raise OSError("killed mid-write")

    with pytest.raises(OSError, match="mid-write"):
        write_with_atomic(target, half)
    assert target.read_bytes() == b"complete old figure"
    assert _leftovers(tmp_path) == []


def test_temp_file_keeps_the_suffix(tmp_path: Path) -> None:
    """Writers that choose a format from the name (matplotlib) see the target's suffix on the temp path."""
    seen = []
    write_with_atomic(tmp_path / "a.png", lambda p: (seen.append(p.suffix), p.write_bytes(b"x")))
    assert seen == [".png"] and (tmp_path / "a.png").read_bytes() == b"x"


def test_staged_directory_failure_keeps_previous_and_cleans_up(tmp_path: Path) -> None:
    """A report directory whose build fails is never renamed into place; the old one and the pointer survive."""
    final = tmp_path / "report"
    with staged_directory(final) as stage:
        (stage / "report.json").write_text("old")
    update_latest(final)
    with pytest.raises(ValueError), staged_directory(final) as stage:
        (stage / "report.json").write_text("new, half")
        raise ValueError("crash")
    assert (final / "report.json").read_text() == "old"
    assert read_latest(tmp_path) == final
    assert _leftovers(tmp_path) == []


def test_staged_directory_success_replaces_previous(tmp_path: Path) -> None:
    """A completed build replaces the old directory wholesale (no stale file from the old one survives)."""
    final = tmp_path / "report"
    with staged_directory(final) as stage:
        (stage / "old-only.png").write_text("x")
    with staged_directory(final) as stage:
        (stage / "report.json").write_text("new")
    assert sorted(p.name for p in final.iterdir()) == ["report.json"]
    assert _leftovers(tmp_path) == []


def test_read_latest_without_pointer(tmp_path: Path) -> None:
    """No pointer file: no latest report."""
    assert read_latest(tmp_path) is None
