"""``deferlab families``: which model families are checked, on which engines and releases, by which claims.

Why a command: ``--model FAMILY`` takes a name on five commands, and a user choosing one wants to see, without
reading the registry, what each family's trained side is (the checkpoint's processor, semantics §18.1), which
engine paths serve it over which release ranges (the default serving setting marked), and which claims judge
it (full families C4, C13-C15; normalization-only C4 and C15). It reads `reference.system.families` only:
nothing loads, nothing is fetched.

    deferlab families [--format md|json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.families import DEFAULT, FAMILIES, Family
from deferlab.reference.system.systems import ENGINES

FORMATS = ("md", "json")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("families", help="the model families checked, with the engines and releases serving each")
    p.add_argument("--format", default="md", help=f"what goes to stdout: {', '.join(FORMATS)} (default md)")
    return p


def add_model_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--model FAMILY`` as every command that judges model families takes it (None when not given: the
    command's own default); ``help`` says what the families are for on that command."""
    parser.add_argument("--model", metavar="FAMILY", default=None, help=help)


def _range(low: str, high: str) -> str:
    return f"{low}-{high}" if high else f"{low}+"


def describe(family: Family) -> dict[str, Any]:
    """One family as plain data: its names, scope, claims, trained side and, per engine, its served paths."""
    engines: dict[str, list[dict[str, Any]]] = {}
    for s in family.served:
        engines.setdefault(s.engine, []).append(
            {
                "releases": _range(s.low, s.high),
                "path": s.path,
                "default": s.default,
                "code": list(s.code),
                "claims": list(s.claims(family.claims)),
            }  # fmt: skip
        )
    return {
        "name": family.name,
        "display": family.display,
        "scope": family.scope,
        "claims": list(family.claims),
        "checkpoints": list(family.checkpoints),
        "processor_classes": list(family.processor_classes),
        "trained": family.trained,
        "needs": list(family.needs),
        "default": family.name == DEFAULT,
        "engines": {e: engines[e] for e in ENGINES if e in engines},
    }


def _cell(path: dict[str, Any], claims: list[str]) -> str:
    """One path of an engine's cell: releases, name, ``*`` for the default, and the family's claims it is not
    judged on (``n/a C13``: the path declares it does not answer them)."""
    missing = [c for c in claims if c not in path.get("claims", claims)]
    return f"{path['releases']} {path['path']}{' *' if path['default'] else ''}" + (
        f" (n/a {', '.join(missing)})" if missing else ""
    )


def markdown(found: list[dict[str, Any]]) -> str:
    """A row per family: its claims, trained side and each engine's paths (``*`` the default serving setting)."""
    heads = [ENGINES[e].display for e in ENGINES]
    out = [
        "| `--model` | family | scope | claims | trained side | " + " | ".join(heads) + " |",
        "|---|---|---|---|---|" + "---|" * len(heads),
    ]
    for f in found:
        cells = []
        for e in ENGINES:
            paths = f["engines"].get(e, [])
            cells.append("<br>".join(_cell(p, f["claims"]) for p in paths) or "not checked")
        trained = f["trained"] + (f" (extra: {', '.join(f['needs'])})" if f["needs"] else "")
        name = f"`{f['name']}`" + (" (default)" if f["default"] else "")
        out.append(f"| {name} | {f['display']} | {f['scope']} | {', '.join(f['claims'])} | `{trained}` | "
                   + " | ".join(cells) + " |")  # fmt: skip
    out += [
        "",
        "`*`: the engine's default serving setting; `(n/a C13)`: a claim of the family the path does not answer "
        "(semantics §18.9). Release ranges are inclusive; `+`: and every later release. "
        "Families the engines serve that are not checked, and what adding one costs: semantics §18.9.",
    ]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    """Print the table (or the JSON); exit 0, or 2 for a format that is not accepted."""
    if args.format not in FORMATS:
        raise UsageError(f"--format {args.format!r}: accepted: {', '.join(FORMATS)}")
    found = [describe(f) for f in FAMILIES.values()]
    print(
        json.dumps(found, indent=1) if args.format == "json" else markdown(found),
        end="\n" if args.format == "json" else "",
    )
    return 0
