"""The simulator's part of the report: run every shipped scenario, and the IPC verdicts for claim C9.

``sim`` is owned elsewhere and may be incomplete; every call here goes through
its public API only (`sim.list_scenarios`, `sim.load_scenario`, `sim.run`,
`SimResult.to_dict`, `sim.ipc.verdicts`), and one failing scenario is recorded
with its error while the others still run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reports.steps import StepFailed

# Exploration budget for sim.ipc.verdicts per hypothesis profile (kept small for dev: the whole report must stay quick).
IPC_BUDGET = {"dev": 50, "ci": 200, "thorough": 1000}


def run_scenarios(progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """``[{scenario, path, status, error, result}]`` for every shipped scenario; StepFailed if any failed."""
    say = progress or (lambda _m: None)
    sim = importlib.import_module("sim")
    out: list[dict[str, Any]] = []
    for path in sim.list_scenarios():
        name = Path(path).stem
        say(f"sim: scenario {name}")
        try:
            result = sim.run(sim.load_scenario(path)).to_dict()
            out.append({"scenario": name, "path": str(path), "status": "ok", "error": None, "result": result})
        except Exception as e:  # noqa: BLE001 - one bad scenario must not hide the others
            out.append({"scenario": name, "path": str(path), "status": "failed", "error": f"{type(e).__name__}: {e}"})
    if not out:
        raise StepFailed("sim.list_scenarios() returned no scenario", out)
    failed = [s["scenario"] for s in out if s["status"] != "ok"]
    if failed:
        raise StepFailed(f"scenarios failed: {', '.join(failed)}", out)
    return out


def ipc_verdicts(profile: str) -> list[dict[str, Any]]:
    """``sim.ipc.verdicts(budget)`` with the profile's budget."""
    ipc = importlib.import_module("sim.ipc")
    return list(ipc.verdicts(IPC_BUDGET.get(profile, IPC_BUDGET["dev"])))


def find_key(data: Any, key: str) -> list[Any]:
    """Every value stored under ``key`` anywhere in nested dicts/lists (sim's result layout may evolve)."""
    found: list[Any] = []
    if isinstance(data, dict):
        for k, v in data.items():
            if k == key:
                found.append(v)
            found.extend(find_key(v, key))
    elif isinstance(data, list):
        for v in data:
            found.extend(find_key(v, key))
    return found
