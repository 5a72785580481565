"""What the engine cache holds, checking and removing parts of it: the loader's half of ``deferlab cache``.

Why here and not in the command: the folder layout (a release folder per version, its kept wheel, its
RECORD copy and stamp, the bytecode entries) is the loader's (`wheels`, `integrity`, `bytecode`); the
command (`reports.core.cache`) only parses, checks and prints. Nothing here names an engine: callers pass
the `Engine` descriptions. Beside the engines' releases and the bytecode, every other folder deferlab keeps
under its cache root is a `Folder` (`kept_folders`): each ``PATH@REV`` tree in ``checkouts/``
(`reports.core.sides`), the companions' releases (`companions`), the mutation references and strategy scans,
and anything else found there, so that nothing it keeps is out of the user's sight.

A release is removed whole (`wheels.remove_release`: renamed aside, then deleted), so a concurrent load finds
the whole tree or none, and an interrupted removal leaves only a ``.tmp-`` folder no run reads.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deferlab.impl.loader import integrity, wheels
from deferlab.impl.loader.engine import Engine
from deferlab.reference.system.systems import release_key


class _Plain:
    """A record the cache command prints as JSON: its fields as a dict."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Release(_Plain):
    """One cached release: where it is, its size, where its wheel came from, and whether it verifies."""

    engine: str
    version: str
    path: str
    bytes: int
    wheel: str
    sha256: str
    fetched_at: str
    origin: str
    wheel_kept: bool
    last_used: str
    idle_days: float
    status: str  # "verified" | "damaged" | "unverifiable" | "unchecked"
    detail: str


@dataclass(frozen=True)
class Checked(_Plain):
    """One release hashed in full (`verify`): "verified", "mended" (from its kept wheel), "damaged" (and stays
    so: ``action`` says why) or "unverifiable"; ``detail``: what differed from the RECORD."""

    engine: str
    version: str
    path: str
    status: str
    detail: str
    action: str


@dataclass(frozen=True)
class Folder(_Plain):
    """A folder (or file) deferlab keeps under its cache root that is no engine release and not the bytecode:
    ``name`` relative to the root (``checkouts/<sha>`` for each ``PATH@REV`` tree), what it is, its size, and
    the newest mtime in it (a reused checkout is touched: `reports.core.sides.extract_revision`)."""

    name: str
    kind: str
    path: str
    bytes: int
    last_used: str
    idle_days: float


CHECKOUTS = "checkouts"
KINDS = {  # what writes each known folder under the cache root (the engines' and ``bytecode`` are listed apart)
    CHECKOUTS: "checkout",
    "mutate": "mutation references (deferlab mutate)",
    "strategies": "strategy scans (the test suite)",
}


def size_on_disk(path: Path) -> int:
    """Bytes ``path`` takes on disk (blocks allocated; every file under a folder)."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))
                total += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return total


def usage(path: Path) -> tuple[int, float]:
    """(bytes on disk, newest mtime) of everything under ``path``; a symbolic link is itself only."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0, 0.0
    if not os.path.isdir(path) or os.path.islink(path):
        return getattr(st, "st_blocks", 0) * 512 or st.st_size, st.st_mtime
    total, newest = 0, st.st_mtime
    for folder, dirs, names in os.walk(path):
        for name in dirs + names:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))
                newest = max(newest, st.st_mtime)
                if name in names:
                    total += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return total, newest


def kept_folders(engines: Iterable[Engine], cache: Path | None = None, companions: Iterable[str] = ()) -> list[Folder]:
    """Every folder (and loose file) under the cache root but the engines' release folders and ``bytecode``:
    each checkout tree, each ``companions`` library's folder, and whatever else is there (names starting with
    "." are work under way, left out)."""
    cache = cache or wheels.deferlab_cache()
    skip = {e.name for e in engines} | {"bytecode"}
    kinds = {**KINDS, **{name: "companion releases" for name in companions}}
    found: list[Folder] = []
    for entry in _entries(cache):
        if entry.name in skip:
            continue
        if entry.name == CHECKOUTS and entry.is_dir() and not entry.is_symlink():
            found += [_folder(cache, tree, "checkout") for tree in _entries(entry)]
        else:
            kind = kinds.get(entry.name, "other") if entry.is_dir() else "file"
            found.append(_folder(cache, entry, kind))
    return found


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return []


def _folder(cache: Path, path: Path, kind: str) -> Folder:
    size, newest = usage(path)
    return Folder(
        name=path.relative_to(cache).as_posix(),
        kind=kind,
        path=str(path),
        bytes=size,
        last_used=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(newest)),
        idle_days=round((time.time() - newest) / 86400, 2),
    )


def remove_folder(name: str, cache: Path | None = None) -> int:
    """Remove one `Folder` (by its name) whole: renamed aside, then deleted (`wheels.remove_release`); a link
    is removed, never what it points to. The bytes it took (0 when it was not there)."""
    path = (cache or wheels.deferlab_cache()) / name
    if path.is_symlink() or path.is_file():
        size = usage(path)[0]
        path.unlink(missing_ok=True)
        return size
    size = usage(path)[0] if path.is_dir() else 0
    return size if wheels.remove_release(path) else 0


def verify(engine: Engine, tree: Path) -> Checked:
    """Hash every file of a release folder whatever its stamp says (`integrity.status` ``full``), and mend a
    damaged one from its kept wheel, fetching nothing (`integrity.mend`)."""
    state, detail = integrity.status(engine, tree, full=True)
    if not wheels.source_meta(tree):
        state, detail = "damaged", f"no {wheels.META}" + (f"; {detail}" if detail else "")
    action = ""
    if state == "damaged":
        action = integrity.mend(engine, tree)
        if action:
            state = "mended"
        else:
            wheel = wheels.kept_wheel(tree)
            gone = "its kept wheel is gone" if wheel is None else f"its kept wheel {wheel.name} cannot mend it"
            action = f"{gone}: its next load fetches it again (or remove it: deferlab cache prune {tree.name})"
    return Checked(engine.name, tree.name, str(tree), state, detail, action)


def folders(engine: Engine, cache: Path) -> list[Path]:
    """The release folders of ``engine`` under the deferlab cache ``cache`` (complete or not), in release order."""
    root = cache / engine.name
    try:
        found = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return []
    return sorted(found, key=lambda p: release_key(p.name))


def describe(engine: Engine, tree: Path, *, check: bool = True) -> Release:
    """The `Release` of one folder; whether it verifies is `integrity.status` (read-only: nothing is mended),
    or "unchecked" without ``check`` (what a prune needs is the rest)."""
    meta = wheels.source_meta(tree)
    state, detail = integrity.status(engine, tree) if check else ("unchecked", "")
    if not meta:
        state, detail = "damaged", f"no {wheels.META}" + (f"; {detail}" if detail else "")
    used = integrity.last_used(tree)
    return Release(
        engine=engine.name,
        version=tree.name,
        path=str(tree),
        bytes=size_on_disk(tree),
        wheel=meta.get("wheel", ""),
        sha256=meta.get("sha256", ""),
        fetched_at=meta.get("fetched_at", ""),
        origin=meta.get("url") or meta.get("index", ""),
        wheel_kept=wheels.kept_wheel(tree) is not None,
        last_used=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(used)),
        idle_days=round((time.time() - used) / 86400, 2),
        status=state,
        detail=detail,
    )


def releases(engines: Iterable[Engine], cache: Path | None = None, *, check: bool = True) -> list[Release]:
    """Every cached release of ``engines``, engine by engine, in release order (``check``: see `describe`)."""
    cache = cache or wheels.deferlab_cache()
    return [describe(e, tree, check=check) for e in engines for tree in folders(e, cache)]


def remove(engine: Engine, version: str, cache: Path | None = None) -> int:
    """Remove one release whole; the bytes it took (0 when it was not there)."""
    tree = (cache or wheels.deferlab_cache()) / engine.name / version
    size = size_on_disk(tree) if tree.is_dir() else 0
    return size if wheels.remove_release(tree) else 0


def sweep(engines: Iterable[Engine], cache: Path | None = None) -> None:
    """Remove what interrupted runs left in each engine's folder, the root and ``checkouts/``: ``.tmp-`` folders
    over an hour old (a younger one may be a fetch or a removal under way, `wheels.sweep`)."""
    cache = cache or wheels.deferlab_cache()
    for folder in [cache, cache / CHECKOUTS, *(cache / engine.name for engine in engines)]:
        if folder.is_dir():
            wheels.sweep(folder)
