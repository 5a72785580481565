"""What the engine cache holds, and removing parts of it: the loader's half of ``deferlab cache``.

Why here and not in the command: the folder layout (a release folder per version, its kept wheel, its
RECORD copy and stamp, the bytecode entries) is the loader's (`wheels`, `integrity`, `bytecode`); the
command (`reports.core.cache`) only parses, checks and prints. Nothing here names an engine: callers pass
the `Engine` descriptions.

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


@dataclass(frozen=True)
class Release:
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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_on_disk(path: Path) -> int:
    """Bytes ``path`` takes on disk (blocks allocated; every file under a folder)."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))
                total += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return total


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
    """Remove what interrupted runs left in each engine's folder: ``.tmp-`` folders over an hour old (a younger
    one may be a fetch under way, `wheels.sweep`)."""
    cache = cache or wheels.deferlab_cache()
    for engine in engines:
        if (cache / engine.name).is_dir():
            wheels.sweep(cache / engine.name)
