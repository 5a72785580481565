"""Topology simulator: what each rank does and pays, IPC safety, and deferral's latency effect.

Public API: `run(scenario, cost_profile=None) -> SimResult`, `load_scenario(path)`,
`list_scenarios()`, `sim.ipc.verdicts(budget)`, `sim.anchors.compare_profiles()`
(model vs the PR per cost profile and topology), `sim.grid.grid()` (TP x image
size), `sim.costmodel.load_cost_model(name_or_path)`, and `sim.cli.main(argv)`
for ``deferlab sim SCENARIO [--json]``. Pure Python and NumPy: importing sim
never imports torch (the costs it runs on are measured by sim/calibrate/run.py).
"""

from deferlab.sim.runner import SimResult, run
from deferlab.sim.scenario import Scenario, ScenarioError, list_scenarios, load_scenario
from deferlab.sim.topology import Topology
from deferlab.sim.workload import Workload, WorkloadSpec, generate

__all__ = [
    "Scenario",
    "ScenarioError",
    "SimResult",
    "Topology",
    "Workload",
    "WorkloadSpec",
    "generate",
    "list_scenarios",
    "load_scenario",
    "run",
]
