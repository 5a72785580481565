"""``deferlab cache``: what the engine cache holds (releases, their source and integrity, the bytecode), and pruning it.

Why a command: the cache is the user's disk (``~/.cache/deferlab``, ``DEFERLAB_CACHE`` moves it). Each release
folder is a wheel fetched once and unpacked (`impl.loader.wheels`), checked against the wheel's RECORD on every
load and mended where it differs (`impl.loader.integrity`); the bytecode cache grows with every file version
ever loaded (`impl.loader.bytecode`). The user should see what is there and where it came from, and remove what
is not used, without knowing the layout.

    deferlab cache [list] [--format table|json]
    deferlab cache prune [--engine E] [RELEASE ...] [--older-than DAYS] [--bytecode] [--format table|json]

``prune`` removes releases (those named, or every release of ``--engine``, or of every engine), each whole or
not at all, limited to those no load used for DAYS with ``--older-than``; with ``--bytecode`` it also removes
bytecode entries (those no load read for DAYS, or all), and ``--bytecode`` without RELEASE or ``--engine``
touches the bytecode only. Every argument is checked before anything is removed: an unknown engine, a release
that is not cached, a negative number of days is one line, exit 2. ``list`` only reads (a damaged release is
shown as such and mended by its next load).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import ENGINES

FORMATS = ("table", "json")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``cache`` with its two actions, ``list`` (the default) and ``prune``."""
    p = sub.add_parser("cache", help="list the engine cache (releases, source, integrity, bytecode) or prune it")
    p.add_argument("--format", default="table", help=f"what goes to stdout: {', '.join(FORMATS)} (default table)")
    actions = p.add_subparsers(dest="action", metavar="{list,prune}")
    listing = actions.add_parser("list", help="what is cached (the default)")
    prune = actions.add_parser("prune", help="remove releases and/or bytecode entries")
    for action in (listing, prune):  # --format after the action too; SUPPRESS keeps the one given before it
        action.add_argument("--format", default=argparse.SUPPRESS, help=f"{', '.join(FORMATS)}")
    prune.add_argument("releases", nargs="*", metavar="RELEASE", help="releases to remove (default: all selected)")
    prune.add_argument("--engine", help=f"only this engine's releases: {', '.join(ENGINES)}")
    prune.add_argument("--older-than", metavar="DAYS", help="only what no load used (read) for DAYS days")
    prune.add_argument("--bytecode", action="store_true", help="also the bytecode cache (alone: only it)")
    return p


@dataclass(frozen=True)
class Plan:
    """What a prune removes, decided (and checked) before anything is."""

    releases: list[Any]  # impl.loader.cache.Release
    bytecode: bool
    days: float | None


def _engines() -> dict[str, Any]:
    """Engine name -> the loader's `Engine` description (the registry's ``sources`` module)."""
    return {name: importlib.import_module(facts.sources).ENGINE for name, facts in ENGINES.items()}


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


def plan(args: argparse.Namespace, engines: dict[str, Any], cached: list[Any]) -> Plan:
    """The releases and bytecode ``prune`` removes; UsageError (one line) for any bad argument."""
    days = _days(args.older_than)
    if args.engine is not None and args.engine.lower() not in engines:
        raise UsageError(f"--engine {args.engine!r}: unknown engine; accepted: {', '.join(engines)}")
    engine = args.engine.lower() if args.engine else None
    if not (args.releases or engine or days is not None or args.bytecode):
        raise UsageError(
            "prune: nothing selected; accepted: RELEASE ..., --engine E, --older-than DAYS and/or --bytecode "
            "(see deferlab cache prune --help)"
        )
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
    chosen = [r for r in pool if not args.releases or r.version in args.releases]
    if not (args.releases or engine) and args.bytecode:
        chosen = []  # --bytecode alone: only the bytecode
    chosen = [r for r in chosen if days is None or r.idle_days >= days]
    return Plan(chosen, args.bytecode, days)


def run(args: argparse.Namespace) -> int:
    """List or prune; every argument checked first (exit 2), then 0."""
    from deferlab.impl.loader import bytecode
    from deferlab.impl.loader import cache as store
    from deferlab.impl.loader.wheels import deferlab_cache

    fmt = getattr(args, "format", "table")
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: unknown format; accepted: {', '.join(FORMATS)}")
    engines = _engines()
    if args.action == "prune":
        todo = plan(args, engines, store.releases(engines.values(), check=False))
        removed = [(r, store.remove(engines[r.engine], r.version)) for r in todo.releases]
        store.sweep(engines.values())
        entries, freed = bytecode.prune(todo.days) if todo.bytecode else (0, 0)
        out = {
            "removed": [{"engine": r.engine, "version": r.version, "bytes": size} for r, size in removed],
            "bytecode": {"entries": entries, "bytes": freed} if todo.bytecode else None,
        }
        print(json.dumps(out, indent=2) if fmt == "json" else "\n".join(_pruned(out)))
        return 0
    entries, size = bytecode.usage()
    listing = {
        "cache": str(deferlab_cache()),
        "releases": [r.as_dict() for r in store.releases(engines.values())],
        "bytecode": {"path": str(bytecode.root()), "entries": entries, "bytes": size},
    }
    print(json.dumps(listing, indent=2) if fmt == "json" else "\n".join(_listed(listing)))
    return 0


# --- rendering ------------------------------------------------------------------------------------------------------
def human(n: int) -> str:
    """``381 MB``: a size in the largest unit that keeps it at 1 or more (decimal units, as ``du -h --si``)."""
    value, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            break
        value /= 1000
    return f"{value:.0f} {unit}" if unit == "B" or value >= 10 else f"{value:.1f} {unit}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell (the last one left ragged)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in [header, *rows]]


def _listed(listing: dict[str, Any]) -> list[str]:
    out = [f"deferlab cache: {listing['cache']} (DEFERLAB_CACHE moves it)"]
    rows = [
        [
            r["engine"],
            r["version"],
            human(r["bytes"]),
            r["last_used"][:10],
            r["fetched_at"][:10] or "-",
            (r["wheel"] or "-") + ("" if r["wheel_kept"] else " (gone)"),
            r["sha256"][:12] or "-",
            r["origin"] or "-",
            r["status"] + (f": {r['detail']}" if r["detail"] else ""),
        ]
        for r in listing["releases"]
    ]
    header = ["ENGINE", "RELEASE", "SIZE", "LAST USED", "FETCHED", "WHEEL", "SHA256", "ORIGIN", "INTEGRITY"]
    out += table(header, rows) if rows else ["no release is cached"]
    b = listing["bytecode"]
    out.append(f"bytecode: {human(b['bytes'])} in {b['entries']} entries ({b['path']})")
    if any(r["status"] == "damaged" for r in listing["releases"]):
        out.append("a damaged release is mended from its kept wheel by its next load (or fetched again)")
    return out


def _pruned(out: dict[str, Any]) -> list[str]:
    rows = [[r["engine"], r["version"], human(r["bytes"])] for r in out["removed"]]
    lines = table(["ENGINE", "RELEASE", "FREED"], rows) if rows else ["no release removed"]
    if out["bytecode"] is not None:
        b = out["bytecode"]
        lines.append(f"bytecode: removed {b['entries']} entries ({human(b['bytes'])})")
    return lines
