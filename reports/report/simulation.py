"""The simulator's part of the report: every shipped scenario, the anchors, the TP x size grid, IPC verdicts (C9).

Every call goes through sim's public API (`sim.list_scenarios`,
`sim.load_scenario`, `sim.run`, `SimResult.to_dict`, `sim.anchors.compare_profiles`,
`sim.grid.grid`, `sim.ipc.verdicts`), and one failing part is recorded with its
error while the others still run. The PR's A/B setting (``pr-ab-*``) comes
first. The anchors (model vs the PR's numbers, every cost profile) and the
TP x image-size grid ride along as two extra entries, ``anchors`` and
``tp-size-grid``, whose results carry ``anchors`` / ``grid`` instead of a
scenario's parts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deferlab.reports.report.steps import StepFailed

# Exploration budget for sim.ipc.verdicts per hypothesis profile (kept small for dev: the whole report must stay quick).
IPC_BUDGET = {"dev": 50, "ci": 200, "thorough": 1000}


def scenario_order(name: str) -> tuple[bool, str]:
    """Sort key of scenario names: the PR's A/B setting (``pr-ab-*``) first, then by name."""
    return (not name.startswith("pr-ab"), name)


def run_scenarios(progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """``[{scenario, path, status, error, result}]`` per shipped scenario, then anchors and grid; StepFailed if any failed."""
    say = progress or (lambda _m: None)
    sim = importlib.import_module("deferlab.sim")
    out: list[dict[str, Any]] = []
    for path in sorted(sim.list_scenarios(), key=lambda p: scenario_order(Path(p).stem)):
        name = Path(path).stem
        say(f"sim: scenario {name}")
        try:
            result = sim.run(sim.load_scenario(path)).to_dict()
            out.append({"scenario": name, "path": str(path), "status": "ok", "error": None, "result": result})
        except Exception as e:  # noqa: BLE001 - one bad scenario must not hide the others
            out.append({"scenario": name, "path": str(path), "status": "failed", "error": f"{type(e).__name__}: {e}"})
    if not out:
        raise StepFailed("sim.list_scenarios() returned no scenario", out)
    extras = (  # entry name, the key its result is stored under, what it is, module and function
        (
            "anchors",
            "anchors",
            "anchors (model vs the PR, every cost profile)",
            "deferlab.sim.anchors",
            "compare_profiles",
        ),
        ("tp-size-grid", "grid", "TP x image-size grid", "deferlab.sim.grid", "grid"),
    )
    for name, key, what, module, fn in extras:
        say(f"sim: {what}")
        try:
            value = getattr(importlib.import_module(module), fn)()
            result = {"skipped": None, key: value}
            out.append({"scenario": name, "path": None, "status": "ok", "error": None, "result": result})
        except Exception as e:  # noqa: BLE001 - one bad part must not hide the others
            out.append({"scenario": name, "path": None, "status": "failed", "error": f"{type(e).__name__}: {e}"})
    failed = [s["scenario"] for s in out if s["status"] != "ok"]
    if failed:
        raise StepFailed(f"scenarios failed: {', '.join(failed)}", out)
    return out


def ipc_verdicts(profile: str) -> list[dict[str, Any]]:
    """``sim.ipc.verdicts(budget)`` with the profile's budget."""
    ipc = importlib.import_module("deferlab.sim.ipc")
    return list(ipc.verdicts(IPC_BUDGET.get(profile, IPC_BUDGET["dev"])))
