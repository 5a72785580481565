"""Crash-safe writing: every file and every report directory appears whole or not at all.

A report run can be interrupted at any point (Ctrl-C, a killed CI job, a full
disk). Readers (CI, people, the next run's baseline) must then still find the
last *complete* report, so nothing is ever written in place: files go to a
temporary sibling and are renamed over the target (``os.replace`` is atomic
within one filesystem), and a whole report is built in a hidden sibling
directory that is renamed into place only once every file is in it. The
``latest`` pointer file is replaced the same way, last.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

LATEST_POINTER = "latest"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _replace_from_temp(target: Path, tmp: str, fill: Callable[[], None]) -> Path:
    """Run ``fill`` (it writes ``tmp``), then rename ``tmp`` over ``target``; on any failure ``tmp`` is removed."""
    try:
        fill()
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temp file in the same directory, then rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)

    def fill() -> None:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a report is for everyone to read
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    return _replace_from_temp(target, tmp, fill)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """`write_bytes_atomic` for UTF-8 text."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_with_atomic(path: str | Path, writer: Callable[[Path], None]) -> Path:
    """Let ``writer`` fill a temp path (e.g. ``savefig``), then rename it over ``path``.

    The temp name keeps ``path``'s suffix, because writers such as matplotlib
    pick the format from it.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=f".tmp{target.suffix}", dir=target.parent)
    os.close(fd)

    def fill() -> None:
        writer(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())

    return _replace_from_temp(target, tmp, fill)


@contextlib.contextmanager
def staged_directory(final: str | Path) -> Iterator[Path]:
    """Yield a hidden sibling directory to fill; on success it replaces ``final``.

    On any exception the staging directory is removed and ``final`` (the last
    complete report, if any) is left untouched. When ``final`` already exists it
    is swapped out by two renames; only a crash between those two renames can
    leave it under its ``.old-`` name, still complete.
    """
    target = Path(final).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    from deferlab.reports.core import process

    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    process.own(staging)  # a command killed outright (SIGKILL) leaves no half-built report either
    os.chmod(staging, 0o777 & ~_umask())
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        process.disown(staging)
        raise
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        os.replace(target, old)
    os.replace(staging, target)
    process.disown(staging)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def update_latest(report_dir: str | Path) -> Path:
    """Point ``<parent>/latest`` at ``report_dir`` (its name, one line), atomically."""
    d = Path(report_dir).resolve()
    return write_text_atomic(d.parent / LATEST_POINTER, d.name + "\n")


def read_latest(parent: str | Path) -> Path | None:
    """The report directory the ``latest`` pointer in ``parent`` names, or None."""
    pointer = Path(parent) / LATEST_POINTER
    if not pointer.is_file():
        return None
    name = pointer.read_text().strip()
    return (Path(parent) / name) if name else None


def check_out_dir(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as an output folder, checked before any work: it may exist (a folder) or not yet, and a folder
    can be made beside it (tried with a scratch folder that is removed at once, so nothing is left behind).
    A `UsageError` in one line otherwise: which option, the path, what is wrong, what is accepted."""
    from deferlab.reference.system.errors import UsageError

    target = Path(path).expanduser()
    accepted = "accepted: a folder that exists or can be created, in a place this user can write"
    if target.exists() and not target.is_dir():
        raise UsageError(f"{flag}: {str(path)!r} exists and is not a directory; {accepted}")
    anchor = target if target.is_dir() else target.parent
    while not anchor.exists() and anchor != anchor.parent:
        anchor = anchor.parent
    if not anchor.is_dir():
        raise UsageError(f"{flag}: {str(path)!r}: {str(anchor)!r} is not a directory; {accepted}")
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix=".deferlab-check-", dir=anchor))
    except OSError as e:
        raise UsageError(f"{flag}: {str(path)!r} cannot be written ({e.strerror or e}); {accepted}") from None
    return target


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """A matplotlib figure as a PNG at ``path``, atomically (an interrupted run never leaves a truncated figure),
    then closed (pyplot keeps every open figure otherwise)."""
    import matplotlib.pyplot as plt

    write_with_atomic(path, lambda tmp: fig.savefig(tmp, dpi=dpi, bbox_inches="tight"))
    plt.close(fig)
    return Path(path)
