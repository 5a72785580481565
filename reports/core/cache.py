"""``deferlab cache``: what deferlab keeps in its cache (releases, their source and integrity, the bytecode, the
checkouts and every other folder), verifying the releases in full, and pruning.

Why a command: the cache is the user's disk (``~/.cache/deferlab``, ``DEFERLAB_CACHE`` moves it). Each release
folder is a wheel fetched once and unpacked (`impl.loader.wheels`), checked against the wheel's RECORD on every
load and mended where it differs (`impl.loader.integrity`: a stamp keyed on each file's size, mtime, ctime and
inode spares a load the hashing); the bytecode cache grows with every file version ever loaded
(`impl.loader.bytecode`); each ``PATH@REV`` is a tree in ``checkouts/`` (`reports.core.sides`), and companions,
mutation references and strategy scans keep folders too (`impl.loader.cache.kept_folders`). The user should
see what is there and where it came from, check it, and remove what is not used, without knowing the layout.

    deferlab cache [list] [--format table|json]
    deferlab cache verify [RELEASE ...] [--engine E] [--format table|json]
    deferlab cache prune [--engine E] [RELEASE ...] [--older-than DAYS] [--bytecode] [--checkouts] [--folder NAME]
                         [--format table|json]

``verify`` hashes every file of each selected release (those named, or every release of ``--engine``, or of
every engine) whatever its stamp says, and mends a damaged one from its kept wheel (fetching nothing); exit 0
when each is verified or was mended, 1 when one stays damaged or cannot be verified (no RECORD). ``prune``
removes releases (those named, or every release of ``--engine``, or of every engine), each whole or not at
all, limited to those no load used for DAYS with ``--older-than``; with ``--bytecode`` it also removes
bytecode entries (those no load read for DAYS, or all), with ``--checkouts`` the ``PATH@REV`` trees, and
with ``--folder NAME`` (repeated) any folder ``list`` shows under "other folders" (``transformers``,
``checkouts/<sha>``...), each limited by ``--older-than`` too; any of those three without RELEASE or
``--engine`` touches no release. Every argument is checked before anything is read in full or removed: an
unknown engine, a release that is not cached, a folder the cache does not hold, a negative number of days is
one line, exit 2. ``list`` only reads (a damaged release is shown as such and mended by its next load).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import ENGINES
from deferlab.reports.core import cache_render as render

FORMATS = ("table", "json")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``cache`` with its three actions, ``list`` (the default), ``verify`` and ``prune``."""
    p = sub.add_parser(
        "cache", help="list the deferlab cache (releases, integrity, bytecode, checkouts), verify or prune it"
    )
    p.add_argument("--format", default="table", help=f"what goes to stdout: {', '.join(FORMATS)} (default table)")
    actions = p.add_subparsers(dest="action", metavar="{list,verify,prune}")
    listing = actions.add_parser("list", help="what is cached (the default)")
    verify = actions.add_parser("verify", help="hash every file of the releases against their RECORD, and mend")
    prune = actions.add_parser("prune", help="remove releases, bytecode entries, checkouts and/or other folders")
    for action in (listing, verify, prune):  # --format after the action too; SUPPRESS keeps the one given before it
        action.add_argument("--format", default=argparse.SUPPRESS, help=f"{', '.join(FORMATS)}")
    for action, what in ((verify, "verify"), (prune, "remove")):
        action.add_argument(
            "releases", nargs="*", metavar="RELEASE", help=f"releases to {what} (default: all selected)"
        )
        action.add_argument("--engine", help=f"only this engine's releases: {', '.join(ENGINES)}")
    prune.add_argument("--older-than", metavar="DAYS", help="only what no load used (read) for DAYS days")
    prune.add_argument("--bytecode", action="store_true", help="also the bytecode cache (alone: only it)")
    prune.add_argument("--checkouts", action="store_true", help="also the PATH@REV trees (alone: only them)")
    prune.add_argument("--folder", action="append", default=[], metavar="NAME",
                       help="also this folder of 'other folders' in the listing (repeatable; alone: only them)")  # fmt: skip
    return p


@dataclass(frozen=True)
class Plan:
    """What a prune removes, decided (and checked) before anything is."""

    releases: list[Any]  # impl.loader.cache.Release
    bytecode: bool
    days: float | None
    folders: list[Any]  # impl.loader.cache.Folder


def _engines() -> dict[str, Any]:
    """Engine name -> the loader's `Engine` description (the registry's ``sources`` module)."""
    return {name: importlib.import_module(facts.sources).ENGINE for name, facts in ENGINES.items()}


def _kept_folders(engines: dict[str, Any]) -> list[Any]:
    """Every other folder under the cache root (`impl.loader.cache.kept_folders`, companions named as such)."""
    from deferlab.impl.loader import cache as store
    from deferlab.impl.loader.companions import KNOWN

    return store.kept_folders(engines.values(), companions=KNOWN)


def _days(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if not math.isfinite(days) or days < 0:
        raise UsageError(
            f"--older-than {text!r}: not a number of days >= 0; accepted: a number of days >= 0, e.g. 30 or 0.5 (0: any age)"
        )
    return days


def selected(args: argparse.Namespace, engines: dict[str, Any], cached: list[Any]) -> list[Any]:
    """The cached releases RELEASE ... and ``--engine`` name (all when neither); UsageError (one line) for an
    unknown engine or a release that is not cached."""
    if args.engine is not None and args.engine.lower() not in engines:
        raise UsageError(f"--engine {args.engine!r}: unknown engine; accepted: {', '.join(engines)}")
    engine = args.engine.lower() if args.engine else None
    pool = [r for r in cached if engine in (None, r.engine)]
    for name in args.releases:
        if not any(r.version == name for r in pool):
            have = "; ".join(
                f"{e} {', '.join(r.version for r in pool if r.engine == e)}"
                for e in dict.fromkeys(r.engine for r in pool)
            )
            raise UsageError(
                f"RELEASE {name!r}: no {engine or ' or '.join(engines)} release {name} is cached; "
                f"cached: {have or 'none'}"
            )
    return [r for r in pool if not args.releases or r.version in args.releases]


def plan(args: argparse.Namespace, engines: dict[str, Any], cached: list[Any], kept: Sequence[Any] = ()) -> Plan:
    """The releases, bytecode and folders (of ``kept``) ``prune`` removes; UsageError (one line) for any bad
    argument."""
    days = _days(args.older_than)
    checkouts, names = getattr(args, "checkouts", False), list(getattr(args, "folder", None) or [])
    chosen = selected(args, engines, cached)
    for name in names:
        if not any(f.name == name.strip("/") for f in kept):
            have = ", ".join(f.name for f in kept) or "none"
            raise UsageError(
                f"--folder {name!r}: the cache holds no such folder; accepted: one listed under 'other folders' "
                f"by deferlab cache: {have}"
            )
    others = args.bytecode or checkouts or names
    if not (args.releases or args.engine or days is not None or others):
        raise UsageError(
            "prune: nothing selected; accepted: RELEASE ..., --engine E, --older-than DAYS, --bytecode, --checkouts "
            "and/or --folder NAME (see deferlab cache prune --help)"
        )
    if not (args.releases or args.engine) and others:
        chosen = []  # --bytecode, --checkouts or --folder alone: only those
    folders = [f for f in kept if f.name in {n.strip("/") for n in names} or (checkouts and f.kind == "checkout")]
    chosen = [r for r in chosen if days is None or r.idle_days >= days]
    return Plan(chosen, args.bytecode, days, [f for f in folders if days is None or f.idle_days >= days])


def run(args: argparse.Namespace) -> int:
    """List, verify or prune; every argument checked first (exit 2); verify: 1 when a release stays damaged."""
    from deferlab.impl.loader import bytecode
    from deferlab.impl.loader import cache as store
    from deferlab.impl.loader.wheels import deferlab_cache

    fmt = getattr(args, "format", "table")
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: unknown format; accepted: {', '.join(FORMATS)}")
    engines = _engines()
    if args.action == "verify":
        chosen = selected(args, engines, store.releases(engines.values(), check=False))
        found = [store.verify(engines[r.engine], Path(r.path)).as_dict() for r in chosen]
        bad = [r for r in found if r["status"] not in ("verified", "mended")]
        out = {"releases": found, "ok": not bad, "summary": _summary(found, bad)}
        print(json.dumps(out, indent=2) if fmt == "json" else "\n".join(render.verified(out)))
        return 1 if bad else 0
    if args.action == "prune":
        todo = plan(args, engines, store.releases(engines.values(), check=False), _kept_folders(engines))
        removed = [(r, store.remove(engines[r.engine], r.version)) for r in todo.releases]
        gone = [(f, store.remove_folder(f.name)) for f in todo.folders]
        store.sweep(engines.values())
        entries, freed = bytecode.prune(todo.days) if todo.bytecode else (0, 0)
        out = {
            "removed": [{"engine": r.engine, "version": r.version, "bytes": size} for r, size in removed],
            "folders": [{"name": f.name, "kind": f.kind, "bytes": size} for f, size in gone],
            "bytecode": {"entries": entries, "bytes": freed} if todo.bytecode else None,
        }
        print(json.dumps(out, indent=2) if fmt == "json" else "\n".join(render.pruned(out)))
        return 0
    entries, size = bytecode.usage()
    listing = {
        "cache": str(deferlab_cache()),
        "releases": [r.as_dict() for r in store.releases(engines.values())],
        "bytecode": {"path": str(bytecode.root()), "entries": entries, "bytes": size},
        "folders": [f.as_dict() for f in _kept_folders(engines)],
    }
    print(json.dumps(listing, indent=2) if fmt == "json" else "\n".join(render.listed(listing)))
    return 0


def _summary(found: list[dict[str, Any]], bad: list[dict[str, Any]]) -> str:
    """One line: how many releases verified, were mended, stay damaged or cannot be verified."""
    counts = {s: sum(r["status"] == s for r in found) for s in ("verified", "mended", "damaged", "unverifiable")}
    said = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no release"
    if not bad:
        return f"{said}: every release is what its wheel shipped"
    return f"{said}: {', '.join(r['engine'] + ' ' + r['version'] for r in bad)} cannot be trusted as cached"
