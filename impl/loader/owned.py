"""Temporary folders owned by the process that made them: deferlab's own (``deferlab-*``) patched engine copies and
the checkpoint folders it writes for an engine to read.

Why not `tempfile.TemporaryDirectory` alone: its removal runs at interpreter exit, which a killed process, or a
pytest-xdist worker whose controller went away, never reaches; such runs left their folders in the temporary place.
Each folder's name carries its owner's pid, so the next process that makes one removes those whose owner is gone.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

PREFIX = "deferlab-"
_OWNED = re.compile(rf"^{PREFIX}.*-pid(\d+)-[^-]+$")  # <prefix>...-pid<owner>-<mkdtemp's suffix>
_WRITTEN: dict[tuple[str, str], Path] = {}


def make(prefix: str) -> Path:
    """A new folder ``<prefix>pid<pid>-<random>`` in the temporary place, removed when this process ends (not by a
    fork of it); the folders of owners that are gone are swept first."""
    if not prefix.startswith(PREFIX):
        raise ValueError(f"an owned folder's prefix starts with {PREFIX!r}, got {prefix!r}")
    owner = os.getpid()
    sweep()
    top = Path(tempfile.mkdtemp(prefix=f"{prefix}pid{owner}-"))
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(top, ignore_errors=True))
    return top


def written(prefix: str, key: str, files: Mapping[str, str]) -> str:
    """A folder of this process holding ``files`` (name -> text), written once per (``prefix``, ``key``)."""
    if (prefix, key) not in _WRITTEN:
        top = make(prefix)
        for name, text in files.items():
            (top / name).write_text(text)
        _WRITTEN[(prefix, key)] = top
    return str(_WRITTEN[(prefix, key)])


def sweep(where: Path | None = None) -> list[Path]:
    """Remove the owned folders whose process is gone; the folders removed. A live process's are kept, and so is a
    folder whose name carries no owner."""
    removed = []
    for folder in Path(where or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        owner = _OWNED.match(folder.name)
        if owner is None or not folder.is_dir() or _alive(int(owner[1])):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
