"""``deferlab report``'s engine options, made from the engine registry as ``versions`` makes its own.

Why generated: an engine is a plugin (`reference.system.engines`, the ``deferlab.engines`` entry points), so the
report names every engine the registry has, ``--NAME SPEC`` each, in its order, with no option written for one
engine by name; the refusals that name the engines list the registry's.
"""

from __future__ import annotations

import argparse
from typing import Any

from deferlab.reference.system.engines import ENGINES
from deferlab.reference.system.errors import UsageError

__all__ = ["ENGINES", "add_engine_options", "engine_specs", "engines_or", "with_spec"]


def add_engine_options(rep: argparse.ArgumentParser, impl_group: Any) -> None:
    """``--NAME SPEC`` for every engine plugin, in the registry's order (as ``versions`` makes its options): an
    engine with a seam implementation (SGLang's, the deferral claims) replaces the seam, so its option excludes
    ``--impl`` in argparse's own words; every other engine's claims are its own code's, refused with ``--impl``
    in `engine_specs`."""
    for facts in ENGINES.values():
        claims = ", ".join(facts.claims or ()) or "every claim"
        seam = (
            f"check real {facts.display}: 'installed', a checkout path, or a released version such as "
            f"{facts.example_release} (fetched into ~/.cache/deferlab; never installed); the claims run on its own code"
        )
        own = (
            f"also check real {facts.display}: 'installed', a checkout path, or a release such as "
            f"{facts.example_release} ({facts.first_release} and later; fetched into ~/.cache/deferlab, never "
            f"installed): the claims it answers ({claims}) and the skew table run on its own code"
        )
        group = impl_group if facts.seam else rep
        group.add_argument(facts.option, dest=facts.name, metavar="SPEC", help=seam if facts.seam else own)


def engines_or() -> str:
    """``--sglang or --vllm or ...``: the engine options, for a help text."""
    return " or ".join(f.option for f in ENGINES.values())


def with_spec() -> str:
    """``--sglang SPEC or --vllm SPEC or ...``: what a refusal accepts instead."""
    return " or ".join(f"{f.option} SPEC" for f in ENGINES.values())


def engine_specs(args: argparse.Namespace) -> dict[str, str]:
    """engine -> spec of every ``--NAME SPEC`` given, in the registry's order; an engine without a seam named with
    ``--impl`` is refused in one line (its claims run on its code, not the seam's)."""
    specs = {name: str(spec) for name in ENGINES if (spec := getattr(args, name, None)) is not None}
    for name in specs:
        facts = ENGINES[name]
        if not facts.seam and args.impl is not None:
            raise UsageError(f"{facts.option}: not allowed with --impl (with {facts.option} the claims run on "
                             f"{facts.display}'s code, not the seam's)")  # fmt: skip
    return specs
