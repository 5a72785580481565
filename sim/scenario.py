"""Scenario files (TOML): one topology, one workload, one policy, and what to report.

A bad file fails at load time with the file, the key and the accepted values
(`ScenarioError`, a ValueError), before any simulation work. Layout::

    name = "docs-tp8"            # optional; defaults to the file stem
    description = "..."
    policy = "PR_33921"          # reference.system.policies policy name
    profile = "kimi-k3"          # reference.system.profiles name (the preprocessing config)
    cost_profile = "gb300-class" # sim/profiles/<name>.toml
    [topology]   # sim.topology.Topology fields
    [workload]   # sim.workload.WorkloadSpec fields
    [accounting] # gate = request|artifact|always|never (sim.gate), whitelist = bool, placement = lpt-patches|...
    [latency]    # enabled, decode = "cpu"|"gpu", overlap = bool, sweep_rates = [0.5, 2.0, inf] | "auto", sweep_requests
                 # "auto": 12 offered loads around each path's capacity, plus unlimited concurrency (sim.latency.auto_rates)

``cost_profile`` is a shipped profile's name or a path to a profile TOML (e.g. the one `deferlab calibrate` writes).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import ScenarioError
from deferlab.reference.system.policies import POLICIES, get_policy
from deferlab.reference.system.profiles import profile_names
from deferlab.sim.costmodel import DEFAULT_COST_PROFILE, shipped_profiles
from deferlab.sim.gate import GATE_MODES
from deferlab.sim.placement.strategies import STRATEGIES
from deferlab.sim.topology import Topology
from deferlab.sim.workload import WorkloadSpec

SCENARIOS_DIR = Path(__file__).parent / "scenarios"
_TOP_KEYS = ("name", "description", "policy", "profile", "cost_profile")
_SECTIONS = ("topology", "workload", "accounting", "latency")
_ACCOUNTING_KEYS = ("gate", "whitelist", "placement")
_LATENCY_KEYS = ("enabled", "decode", "overlap", "sweep_rates", "sweep_requests")
__all__ = ["SCENARIOS_DIR", "Scenario", "ScenarioError", "list_scenarios", "load_scenario", "scenario_from_dict"]


@dataclass(frozen=True)
class Scenario:
    """Everything `sim.run` needs; validated."""

    name: str
    topology: Topology
    workload: WorkloadSpec
    policy: str = "PR_33921"
    profile: str = "kimi-k3"
    cost_profile: str = DEFAULT_COST_PROFILE
    description: str = ""
    gate: str | None = None  # None: the policy's
    whitelist: bool | None = None  # None: the policy's
    placement: str = "lpt-patches"
    latency: bool = True
    decode: str = "cpu"
    overlap: bool = True  # SGLang's default event_loop_overlap
    sweep_rates: tuple[float, ...] | str = ()  # or "auto"
    sweep_requests: int = 500
    path: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        latency = {key: getattr(self, "latency" if key == "enabled" else key) for key in _LATENCY_KEYS}
        if not isinstance(self.sweep_rates, str):
            latency["sweep_rates"] = [r if math.isfinite(r) else "inf" for r in self.sweep_rates]
        return {key: getattr(self, key) for key in ("name", "description", "policy", "profile", "cost_profile")} | {
            "topology": self.topology.to_dict(),
            "workload": self.workload.to_dict(),
            "accounting": {key: getattr(self, key) for key in _ACCOUNTING_KEYS},
            "latency": latency,
            "path": self.path,
        }


def _check_keys(where: str, table: Any, accepted: tuple[str, ...]) -> dict:
    if not isinstance(table, dict):
        raise ScenarioError(f"{where} must be a table, got {table!r}")
    unknown = sorted(set(table) - set(accepted))
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {unknown}; accepted: {list(accepted)}")
    return table


def _choice(where: str, value: Any, accepted: tuple[str, ...] | list[str]) -> str:
    if value not in accepted:
        raise ScenarioError(f"{where} = {value!r} is not accepted; accepted: {list(accepted)}")
    return value


def _bool(where: str, value: Any) -> bool:
    """TOML's true / false only: 0, 1 or "yes" are refused rather than read as truthy."""
    if not isinstance(value, bool):
        raise ScenarioError(f"{where} = {value!r} is not accepted; accepted: true, false")
    return value


def scenario_from_dict(data: dict[str, Any], *, source: str = "<dict>", default_name: str = "scenario") -> Scenario:
    """Validate a parsed scenario; every message starts with ``source``."""
    _check_keys(source, data, _TOP_KEYS + _SECTIONS)
    pol = data.get("policy", "PR_33921")
    try:
        pol = get_policy(pol).name
    except ValueError:
        raise ScenarioError(f"{source}: policy = {pol!r} is not accepted; accepted: {list(POLICIES)}") from None
    prof = _choice(f"{source}: profile", data.get("profile", "kimi-k3"), profile_names())
    cost = data.get("cost_profile", DEFAULT_COST_PROFILE)
    if not (isinstance(cost, str) and cost.endswith(".toml") and Path(cost).is_file()):
        cost = _choice(f"{source}: cost_profile", cost, [*sorted(shipped_profiles()), "<path to an existing .toml>"])
    try:
        topo = Topology.from_dict(dict(data.get("topology", {})), where=f"{source}: [topology]")
    except (TypeError, ValueError) as e:
        msg = str(e) if str(e).startswith(source) else f"{source}: [topology] {e}"
        raise ScenarioError(msg) from None
    wl = dict(_check_keys(f"{source}: [workload]", data.get("workload", {}), tuple(WorkloadSpec.__dataclass_fields__)))
    for key in ("images_per_request", "image_size"):
        if isinstance(wl.get(key), list):
            wl[key] = tuple(wl[key])
    try:
        spec = WorkloadSpec.from_dict(wl)
    except (TypeError, ValueError) as e:
        raise ScenarioError(f"{source}: [workload] {e}") from None
    acc = _check_keys(f"{source}: [accounting]", data.get("accounting", {}), _ACCOUNTING_KEYS)
    gate = acc.get("gate")
    if gate is not None:
        _choice(f"{source}: [accounting] gate", gate, GATE_MODES)
    whitelist = acc.get("whitelist")
    if whitelist is not None:
        _bool(f"{source}: [accounting] whitelist", whitelist)
    placement = _choice(f"{source}: [accounting] placement", acc.get("placement", "lpt-patches"), STRATEGIES)
    lat = _check_keys(f"{source}: [latency]", data.get("latency", {}), _LATENCY_KEYS)
    enabled = _bool(f"{source}: [latency] enabled", lat.get("enabled", True))
    decode = _choice(f"{source}: [latency] decode", lat.get("decode", "cpu"), ("cpu", "gpu"))
    overlap = _bool(f"{source}: [latency] overlap", lat.get("overlap", True))
    rates = lat.get("sweep_rates", [])
    if rates != "auto" and (
        not isinstance(rates, list)
        or any(isinstance(r, bool) or not isinstance(r, (int, float)) or not r > 0 for r in rates)
    ):
        raise ScenarioError(
            f'{source}: [latency] sweep_rates = {rates!r}; accepted: a list of rates > 0 (inf allowed), or "auto"'
        )
    sweep_n = lat.get("sweep_requests", 500)
    if isinstance(sweep_n, bool) or not isinstance(sweep_n, int) or sweep_n < 1:
        raise ScenarioError(f"{source}: [latency] sweep_requests = {sweep_n!r}; accepted: an int >= 1")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{source}: name = {name!r}; accepted: a non-empty string")
    return Scenario(
        name=name,
        description=str(data.get("description", "")),
        policy=pol,
        profile=prof,
        cost_profile=cost,
        topology=topo,
        workload=spec,
        gate=gate,
        whitelist=whitelist,
        placement=placement,
        latency=enabled,
        decode=decode,
        overlap=overlap,
        sweep_rates=rates if isinstance(rates, str) else tuple(float(r) for r in rates),
        sweep_requests=sweep_n,
        path=source,
    )


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; a shipped scenario may be named without its path."""
    p = Path(path)
    if not p.is_file() and (SCENARIOS_DIR / f"{path}.toml").is_file():
        p = SCENARIOS_DIR / f"{path}.toml"
    if not p.is_file():
        shipped = [s.stem for s in list_scenarios()]
        raise ScenarioError(f"scenario file {str(p)!r} does not exist; shipped scenarios: {shipped}")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: not valid TOML: {e}") from None
    return scenario_from_dict(data, source=str(p), default_name=p.stem)


def list_scenarios() -> list[Path]:
    """The shipped scenario files, sorted by name."""
    return sorted(SCENARIOS_DIR.glob("*.toml"))
