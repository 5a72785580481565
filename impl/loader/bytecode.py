"""Compiled engine files and their import-line tables, kept on disk by the hash of their exact source.

Why: deferlab imports an engine with bytecode writing off (a wheel in the
cache is shared; a mutant's copy is edited within the second its original was
read, so a pyc keyed by mtime could be stale), so each load compiled SGLang's
~1,600 files again: 3.6 s of a 10 s load, and the importer's AST scan of the
import lines another 1 s. Keyed by the source bytes (with the interpreter's
magic number and optimization level), an entry can never be stale and a
mutant gets its own; ``co_filename`` is set to the file being loaded, so one
entry serves every copy of a tree (mutation slots, checkouts). Writes are
atomic (a temporary sibling renamed into place); an unreadable entry is
compiled again. ``DEFERLAB_BYTECODE=off`` turns the cache off.

Entries are never stale, but they pile up (one per version of every file ever
loaded, mutants included: 75 MB after a session). A read touches an entry (its
mtime, at most once an hour), so ``deferlab cache prune --bytecode
--older-than DAYS`` (`prune`) removes exactly those no load has read for DAYS.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import marshal
import os
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

from deferlab.impl.loader.release_files import write_atomic
from deferlab.impl.loader.wheels import deferlab_cache

ENV = "DEFERLAB_BYTECODE"
_TAG = f"{importlib.util.MAGIC_NUMBER.hex()}-O{sys.flags.optimize}"
_TOUCH_S = 3600  # a read older than this refreshes the entry's mtime (its "last read")
_SUFFIXES = (".pyc", ".lines.json")


def enabled() -> bool:
    """Whether the cache is on (``DEFERLAB_BYTECODE`` unset, or anything but ``off``/``0``/``no``)."""
    return os.environ.get(ENV, "").strip().lower() not in ("off", "0", "no", "false")


def root() -> Path:
    """``<deferlab cache>/bytecode``: the folders of every interpreter kind."""
    return deferlab_cache() / "bytecode"


def folder() -> Path:
    """``<deferlab cache>/bytecode/<magic>-O<level>``: one folder per interpreter kind."""
    return root() / _TAG


def _read(entry: Path) -> bytes:
    """An entry's bytes; the entry is touched (mtime now) when its last touch is over an hour old."""
    with entry.open("rb") as fh:
        data = fh.read()
        if time.time() - os.fstat(fh.fileno()).st_mtime > _TOUCH_S:
            with contextlib.suppress(OSError):  # a read-only cache still serves its entries
                os.utime(fh.fileno())
    return data


def entries() -> list[tuple[Path, os.stat_result]]:
    """Every entry of every interpreter kind, with its stat (leftover ``.tmp-`` files too: they are waste)."""
    found = []
    for path in root().glob("*/*/*"):
        with contextlib.suppress(OSError):
            if path.name.endswith(_SUFFIXES) or path.name.startswith(".tmp-"):
                found.append((path, path.stat()))
    return found


def usage() -> tuple[int, int]:
    """(entries, bytes on disk) of the bytecode cache."""
    found = entries()
    return len(found), sum(_on_disk(st) for _, st in found)


def prune(older_than_days: float | None = None) -> tuple[int, int]:
    """Remove the entries no load read for ``older_than_days`` (all when None); (entries, bytes) removed.

    Each entry goes alone (a concurrent load either reads it whole or compiles again); folders left empty go."""
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else float("inf")
    removed = freed = 0
    for path, st in entries():
        if st.st_mtime < cutoff:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed, freed = removed + 1, freed + _on_disk(st)
    for shard in sorted(root().glob("*/*"), reverse=True) + sorted(root().glob("*")):
        with contextlib.suppress(OSError):
            shard.rmdir()  # only an empty folder
    return removed, freed


def _on_disk(st: os.stat_result) -> int:
    return getattr(st, "st_blocks", 0) * 512 or st.st_size


def _entry(data: bytes, suffix: str) -> Path:
    digest = hashlib.blake2b(data, digest_size=20).hexdigest()
    return folder() / digest[:2] / f"{digest}{suffix}"


def _write(path: Path, payload: bytes) -> None:
    """Atomic: a reader sees the whole entry or none (two processes writing one entry both write the same); a
    cache that cannot be written only costs the next load its compile."""
    with contextlib.suppress(OSError):
        write_atomic(path, payload, mode=None)


def _with_filename(code: types.CodeType, path: str) -> types.CodeType:
    """``code`` and every code object inside it naming ``path`` as their file (tracebacks, the importer's
    "is this frame the engine's?" test)."""
    if code.co_filename == path:
        return code
    consts = tuple(_with_filename(c, path) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=path, co_consts=consts)


def code_for(path: str, data: bytes, compile_source: Callable[[], types.CodeType]) -> types.CodeType:
    """The code object of ``data`` (the file ``path``'s bytes): from the cache, else ``compile_source()``, stored."""
    if not enabled():
        return compile_source()
    entry = _entry(data, ".pyc")
    try:
        code = marshal.loads(_read(entry))
        if isinstance(code, types.CodeType):
            return _with_filename(code, path)
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = compile_source()
    _write(entry, marshal.dumps(code))
    return code


def lines_for(data: bytes, scan: Callable[[], dict[int, bool]]) -> dict[int, bool]:
    """The import-line table (line -> guarded?) of a file's bytes ``data``: cached, else ``scan()``, stored."""
    if not enabled():
        return scan()
    entry = _entry(data, ".lines.json")
    try:
        return {int(k): bool(v) for k, v in json.loads(_read(entry)).items()}
    except (OSError, ValueError, AttributeError):
        pass
    table = scan()
    _write(entry, json.dumps({str(k): v for k, v in table.items()}).encode())
    return table
