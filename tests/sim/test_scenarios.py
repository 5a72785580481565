"""Scenario files, `sim.run`, the CLI and the anchor comparison: shipped scenarios run, bad files are named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from deferlab import sim
from deferlab.sim.cli import main
from deferlab.sim.scenario import ScenarioError, load_scenario

SHIPPED = sim.list_scenarios()


def test_at_least_three_scenarios_are_shipped() -> None:
    """One per workload family and one with attention DP."""
    scenarios = [load_scenario(p) for p in SHIPPED]
    families = {s.workload.family for s in scenarios}
    assert {"chat", "docs", "4k", "mixed"} <= families
    assert any(s.topology.attn_dp_size > 1 for s in scenarios)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_scenario_runs(path: Path) -> None:
    """Runs end to end and serializes to JSON (or is skipped with a reason when the corpus is absent)."""
    result = sim.run(load_scenario(path))
    d = json.loads(json.dumps(result.to_dict()))
    if result.skipped:
        assert "corpus" in result.skipped
        return
    acc = d["accounting"]
    assert acc["requests"] == load_scenario(path).workload.n_requests
    if d["latency"]:
        for mode in ("eager", "deferred"):
            assert d["latency"][mode]["throughput_rps"] > 0
    rates = load_scenario(path).sweep_rates
    assert len(d["sweep"]) >= 13 if rates == "auto" else len(d["sweep"]) == len(rates)
    if rates == "auto":
        # at least 10 offered loads, from light load (a tenth of the slower path's capacity) past saturation
        finite = [row["rate_rps"] for row in d["sweep"] if row["rate_rps"] != "inf"]
        caps = d["sweep"][0]["capacity_rps"]
        assert len(finite) >= 10 and min(finite) <= 0.11 * min(caps.values()) and max(finite) > max(caps.values())
    for row in d["sweep"]:
        if row["rate_rps"] != "inf":
            # no path serves more than is offered (20 %: a finite Poisson run's own arrival rate varies)
            assert all(row[mode]["throughput_rps"] <= 1.2 * row["rate_rps"] for mode in ("eager", "deferred"))
    if rates == "auto":
        # the highest load each path carries is a swept load, and the sweep goes past it
        sat = d["sweep"][0]["saturation_rps"]
        assert all(sat[m] is None or sat[m] < max(finite) for m in ("eager", "deferred"))


def test_run_is_reproducible() -> None:
    """Same scenario, same seed: identical results, whether given as a Scenario, a path or a shipped name."""
    s = load_scenario(SHIPPED[0])
    assert sim.run(s).to_dict() == sim.run(s).to_dict() == sim.run(SHIPPED[0].stem).to_dict()
    with pytest.raises(TypeError, match="takes a Scenario"):
        sim.run(42)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    return p


def test_missing_corpus_skips_with_a_clear_message(tmp_path: Path) -> None:
    """A corpus path with no MANIFEST.tsv gives a skipped result naming the path, not a crash."""
    p = _write(tmp_path, f"[workload]\nfamily = 'corpus'\ncorpus_path = '{tmp_path / 'none'}'\n")
    result = sim.run(load_scenario(p))
    assert result.skipped and "MANIFEST.tsv" in result.skipped and "corpus_path" in result.skipped
    assert result.to_dict()["accounting"] is None


def test_cli_prints_a_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(SHIPPED[0])]) == 0
    out = capsys.readouterr().out
    assert "accounting" in out and "latency (DES)" in out
    assert main([SHIPPED[0].stem, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scenario"]["name"]


def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _write(tmp_path, "[topology]\nnodes = 3\n")
    assert main([str(p)]) == 2
    assert "nodes=3 must divide" in capsys.readouterr().err
    assert main([]) == 2


def test_cli_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(p.stem in out for p in SHIPPED)


def test_scenario_error_is_the_shared_input_error() -> None:
    """sim.scenario.ScenarioError is reference.system.errors.ScenarioError (one family of input errors)."""
    from deferlab.reference.system.errors import DeferlabInputError
    from deferlab.reference.system.errors import ScenarioError as Shared

    assert ScenarioError is Shared and issubclass(ScenarioError, DeferlabInputError)


@pytest.mark.parametrize("gate", ["pr", "per-image"])
def test_scenario_refuses_the_old_call_site_names(gate: str) -> None:
    """The gate is named by the policies' call sites only: the retired spellings are refused, listing the accepted."""
    from deferlab.sim.scenario import scenario_from_dict

    with pytest.raises(ScenarioError) as err:
        scenario_from_dict({"accounting": {"gate": gate}}, source="s.toml")
    assert str(err.value) == (
        f"s.toml: [accounting] gate = {gate!r} is not accepted; accepted: ['request', 'artifact', 'always', 'never']"
    )


@pytest.mark.parametrize("gate", ["request", "artifact", "always", "never"])
def test_scenario_accepts_every_call_site_name(gate: str) -> None:
    from deferlab.sim.scenario import scenario_from_dict

    assert scenario_from_dict({"accounting": {"gate": gate}}).gate == gate


def test_cost_profile_override_and_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario runs on either profile, named or by path; a bad --cost-profile exits 2 naming it."""
    shipped = Path(sim.__file__).parent / "profiles" / "calibrated-here.toml"
    p = _write(tmp_path, f"cost_profile = '{shipped}'\n[workload]\nn_requests = 20\n")
    assert load_scenario(p).cost_profile == str(shipped)
    res = sim.run(load_scenario(p), cost_profile="gb300-class").to_dict()
    assert res["scenario"]["cost_profile"] == "gb300-class" and res["latency"]["eager"]["throughput_rps"] > 0
    assert main([str(p), "--cost-profile", "no-such-profile"]) == 2
    assert "no-such-profile" in capsys.readouterr().err


def test_anchor_comparison_rows() -> None:
    """Model vs the PR's numbers (semantics §9) per profile and topology: every anchor, finite, direction flag consistent."""
    from deferlab.sim.anchors import TOPOLOGIES, compare, compare_profiles

    rows = compare(n_requests=200)
    assert len(rows) == 4 * len(TOPOLOGIES)
    for k in range(len(TOPOLOGIES)):
        chunk = rows[4 * k : 4 * k + 4]
        assert [r.get("reported_pct", r.get("reported_x")) for r in chunk] == [248.3, -78.7, 20.0, 12.76]
        assert chunk[0]["same_direction"] == (chunk[0]["model_pct"] > 0)
        assert chunk[2]["same_direction"] == (chunk[2]["model_pct"] > 0)
    for r in rows:
        model = r.get("model_pct", r.get("model_x"))
        assert math.isfinite(model)
        assert r["assumptions"] and r["needed"] and r["gap"] and r["profile"] == "gb300-class"
    micro = rows[3]
    assert micro["real_impl_x"] > 1 and micro["model_eager_ms"] > micro["model_deferred_ms"]
    both = compare_profiles(n_requests=100)
    assert {r["profile"] for r in both} == {"gb300-class", "calibrated-here"}


def test_cli_anchors_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`deferlab sim --anchors --json --cost-profile NAME` prints the rows of that profile."""
    assert main(["--anchors", "--json", "--cost-profile", "calibrated-here"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["profile"] for r in rows} == {"calibrated-here"}
    assert main(["--anchors", "--cost-profile", "/no/such.toml"]) == 2
