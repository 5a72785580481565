"""`run(scenario) -> SimResult`: accounting, placement comparison and latency for one scenario."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from deferlab.reference.system.policies import get_policy
from deferlab.reference.system.profiles import profile
from deferlab.sim.accounting import account
from deferlab.sim.corpus import CorpusMissing
from deferlab.sim.costmodel import load_cost_model
from deferlab.sim.gate import GATE_SOURCE
from deferlab.sim.latency import compare_modes, load_sweep
from deferlab.sim.placement.compare import compare_placements
from deferlab.sim.scenario import Scenario, load_scenario
from deferlab.sim.workload import generate


@dataclass
class SimResult:
    """What a scenario costs; JSON-serializable through `to_dict`."""

    scenario: dict[str, Any]
    gate_source: str
    accounting: dict[str, Any] | None = None
    placement: list[dict] = field(default_factory=list)
    latency: dict[str, Any] | None = None
    sweep: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None  # why nothing ran (e.g. the corpus is missing)

    def to_dict(self) -> dict[str, Any]:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            return x

        return clean(asdict(self))


def run(scenario: Scenario | str | Path, *, cost_profile: str | Path | None = None) -> SimResult:
    """Run every part the scenario asks for; a missing corpus gives a skipped result, not a crash.

    ``scenario`` may also be a scenario file or a shipped scenario's name;
    ``cost_profile`` (a shipped name or a TOML path) overrides the scenario's.
    """
    if isinstance(scenario, (str, Path)):
        scenario = load_scenario(scenario)
    if not isinstance(scenario, Scenario):
        raise TypeError(f"run() takes a Scenario, a scenario file or a shipped name, got {type(scenario).__name__}")
    result = SimResult(scenario=scenario.to_dict(), gate_source=GATE_SOURCE)
    if cost_profile is not None:
        result.scenario["cost_profile"] = str(cost_profile)
    try:
        workload = generate(scenario.workload)
    except CorpusMissing as e:
        result.skipped = str(e)
        return result
    policy = get_policy(scenario.policy)
    config = profile(scenario.profile)
    cm = load_cost_model(cost_profile or scenario.cost_profile)
    topo = scenario.topology
    ledger = account(
        workload,
        topo,
        policy,
        config,
        cm,
        gate_mode=scenario.gate,
        whitelist=scenario.whitelist,
        strategy=scenario.placement,
    )
    result.accounting = ledger.summary()
    result.notes.extend(ledger.notes)
    result.placement = compare_placements(
        workload.offsets, ledger.patches, ledger.tokens, ledger.owner_costs, topo.vision_world
    )
    if topo.vision_world <= 1:
        result.notes.append("vision DP off (or one vision rank): no owner placement to compare")
    if topo.epd_encoders:
        result.notes.append("EPD: the gate does not apply (encoders always receive raw pixels); eager = deferred")
    elif topo.transport != "cpu":
        result.notes.append(f"transport {topo.transport!r} never defers (semantics §4): eager = deferred")
    if topo.transport == "cpu" and not topo.epd_encoders:
        result.notes.append(
            "CPU features travel through "
            + (
                "POSIX shared memory (one node): messages and the broadcast carry only segment names"
                if topo.nodes == 1
                else f"the messages themselves ({topo.nodes} nodes): pickled by the tokenizer, again by broadcast_pyobj"
            )
        )
    kw = {"strategy": scenario.placement, "decode_on_gpu": scenario.decode == "gpu", "overlap": scenario.overlap}
    if scenario.latency:
        result.latency = compare_modes(workload, topo, policy, config, cm, **kw)
    if scenario.sweep_rates:
        spec = replace(scenario.workload, n_requests=scenario.sweep_requests)
        rates = scenario.sweep_rates if isinstance(scenario.sweep_rates, str) else list(scenario.sweep_rates)
        result.sweep = load_sweep(spec, rates, topo, policy, config, cm, **kw)
    return result
