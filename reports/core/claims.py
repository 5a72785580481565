"""What every command says about claims the same way: their statements, the profiles their searches run
under, a verdict's Markdown cell, what a verdict's evidence ran on, and where a command writes by default.

Why here: the report, the versions matrix, a comparison and a campaign all print verdicts; each took
these from the report's own modules before, so the commands depended on each other. They live once, in
the shared room of the commands.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deferlab.reference.system import claims as registry
from deferlab.reports.core import videoopts

PROFILES = ("ci", "dev", "thorough")  # ci first: derandomized, the default of every command
VERDICT_CELL = {
    "holds": "holds",
    "fails": "**FAILS**",
    "holds-with-caveat": "holds (caveat)",
    "n/a": "n/a",
    "not-run": "not run",
}
_HERE = Path(__file__).resolve().parents[1]
# A source checkout keeps outputs in reports/out; an installed package never writes into site-packages.
DEFAULT_OUT_PARENT = _HERE / "out" if (_HERE.parent / "pyproject.toml").is_file() else Path.cwd() / "deferlab-reports"


def add_run_options(p: argparse.ArgumentParser, patch_help: str) -> None:
    """``--profile``, the video options and ``--patch FILE``, in that order, as ``compare`` and ``versions`` take
    them: one wording of what both run the claims with; ``patch_help`` says which trees the diff goes to."""
    p.add_argument("--profile", default="ci", help=f"hypothesis profile of the claim searches: {', '.join(PROFILES)}")
    videoopts.add(p)
    p.add_argument("--patch", metavar="FILE", help=patch_help)


def default_out_dir(now: datetime | None = None, prefix: str = "") -> Path:
    """``reports/out/<prefix><UTC timestamp>`` (``versions-``, ``compare-``, ``mutate-`` for the other commands);
    ``-2``, ``-3``... after it when a run of the same second already has that folder (or holds its lock)."""
    base = DEFAULT_OUT_PARENT / f"{prefix}{(now or datetime.now(UTC)).strftime('%Y%m%dT%H%M%SZ')}"
    taken = lambda p: p.exists() or (p.parent / f".{p.name}.deferlab-lock").exists()  # noqa: E731
    return next(p for n in range(1, 10_000) if not taken(p := base if n == 1 else base.with_name(f"{base.name}-{n}")))


def load_claim_statements(path: Path = registry.CLAIMS_PATH) -> dict[str, dict[str, str]]:
    """id -> {statement, source} for every claim of claims.toml (its one parser, strict), in file order."""
    return {cid: {"statement": c.statement, "source": c.source} for cid, c in registry.load_claims(path).items()}


def ran_on(provenance: dict[str, str]) -> str:
    """One phrase for what a verdict's evidence ran on: the model, real code, or real code except named parts."""
    if not provenance:
        return "not recorded"
    if all(v == "model" for v in provenance.values()):
        return "deferlab's model"
    modelled = sorted(m for m, v in provenance.items() if v != "model" and not v.startswith("real"))
    partly = sorted(m for m, v in provenance.items() if v.startswith("real") and "modelled" in v)
    if not modelled and not partly:
        return "real code"
    parts = [f"{m} (modelled)" for m in modelled] + [f"{m} (partly modelled)" for m in partly]
    return "real code, except " + ", ".join(parts)


def stand_ins_by_kind(system: dict[str, Any]) -> dict[str, int]:
    """How many imports a real engine needed were stood in for, per kind (a results file's ``system.stand_ins``)."""
    kinds: dict[str, int] = {}
    for s in system.get("stand_ins", []):
        kinds[s.get("kind", "?")] = kinds.get(s.get("kind", "?"), 0) + 1
    return kinds


def new_signatures(row: dict[str, Any]) -> list[str]:
    """The signatures of a failing row that its claim's pattern does not name (``documented: false``): a new way
    of failing, shown as such in every report (semantics §17.1)."""
    found = row.get("signatures") if isinstance(row.get("signatures"), list) else []
    return sorted(str(s["signature"]) for s in found if isinstance(s, dict) and s.get("documented") is False)
