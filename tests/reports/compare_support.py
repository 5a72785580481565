"""What the ``deferlab compare`` test files share: fake run records per side, the load check and runner that
serve them, and the command's arguments.

Why a module: `test_compare` (the verdict diff, exit statuses, the written files) and `test_compare_sides` (what
a side is and how it loads: PATH@REV, the engine, real releases) run the command on the same fake sides.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from deferlab.reference.system.systems import System
from deferlab.reports.core.runner import Request, RunRecord

FAILS = "checked. AssertionError: 205 of 256 levels differ in FP32 (mean (0.5, 0.5, 0.5), std (0.5, 0.5, 0.5))"

BASE = {"C1": "holds", "C3": "fails", "C4": "holds", "C9": "fails", "C10": "n/a", "C11": "holds"}


def fake_rows(
    verdicts: dict[str, str], evidence: dict[str, str] | None = None, policy: str = "SGLANG"
) -> list[dict[str, Any]]:
    """A side's claim rows: each claim's verdict, a failing one with `FAILS` (or its ``evidence``) and a
    counterexample."""
    ev = evidence or {}
    return [
        {
            "id": c,
            "policy": policy,
            "statement": f"statement {c}",
            "verdict": v,
            "evidence": ev.get(c, FAILS if v == "fails" else "ok"),
            "counterexample": [[0.5] * 3, [0.5] * 3] if v == "fails" else None,
        }  # fmt: skip
        for c, v in verdicts.items()
    ]


def fake_runner(sides: dict[str, list[dict[str, Any]] | None], error: str | None = None, default: Any = None) -> Any:
    """`reports.core.runner.run`'s stand-in: a record of fixed rows per side's SPEC (None: the side could not
    run, with ``error``), the claims the request asked kept."""

    def run(request: Request, work: Path | None = None, **kw: Any) -> RunRecord:
        spec = str(request.system.spec)
        rows = sides.get(spec, default)
        kept = [r for r in rows or [] if not request.claims or r["id"] in request.claims]
        system = {"name": f"{request.system.engine}-{spec}", "kind": "wheel"}
        return RunRecord(request.system, request.profile, rows=kept, described=system, rc=0, wrote=rows is not None,
                         seconds=0.1, error=error if rows is None else None)  # fmt: skip

    return run


def fake_loader(system: System) -> str:
    """The load check's stand-in: the name a side would load as."""
    return f"{system.engine}-{system.spec}"


def compare_args(tmp: Path, base: str = "0.5.21", head: str = "0.5.22", **kw: Any) -> argparse.Namespace:
    """``deferlab compare BASE HEAD`` as its parser gives it, writing into ``tmp/out``."""
    kw = {"claims": None, "strict": False, **kw}
    return argparse.Namespace(base=base, head=head, out=tmp / "out", profile="ci", format="md", junit=None, **kw)
