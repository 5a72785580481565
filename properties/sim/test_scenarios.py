"""Scenario files, `sim.run`, the CLI and the anchor comparison: shipped scenarios run, bad files are named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import sim
from sim.cli import main
from sim.costmodel import load_cost_model
from sim.scenario import ScenarioError, load_scenario

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
    assert len(d["sweep"]) == len(rates)
    if rates and math.isinf(max(rates)):
        # unlimited concurrency measures capacity: no finite offered load gets more through (5 %: finite runs)
        unlimited = next(row for row in d["sweep"] if row["rate_rps"] == "inf")
        for mode in ("eager", "deferred"):
            cap = unlimited[mode]["throughput_rps"]
            assert all(row[mode]["throughput_rps"] <= cap * 1.05 for row in d["sweep"])


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


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[topology]\ntp_size = 8\nattn_dp_size = 3\n", r"\[topology\].*attn_dp_size=3 must divide tp_size=8"),
        ("[topology]\ntransport = 'tcp'\n", r"\[topology\].*transport must be one of"),
        ("[topology]\ngpus = 8\n", r"\[topology\]: unknown key\(s\) \['gpus'\]; accepted"),
        ("[workload]\nfamily = 'video'\n", r"\[workload\].*family must be one of"),
        ("[workload]\nrate = -1.0\n", r"\[workload\].*rate must be a number > 0"),
        ("[workload]\nimages_per_request = [3, 1]\n", r"images_per_request"),
        ("policy = 'nope'\n", r"policy = 'nope' is not accepted; accepted: \['PR_33921'"),
        ("profile = 'kimi-k9'\n", r"profile = 'kimi-k9' is not accepted"),
        ("[accounting]\nplacement = 'random'\n", r"\[accounting\] placement = 'random' is not accepted"),
        ("[accounting]\ngate = 'maybe'\n", r"\[accounting\] gate = 'maybe' is not accepted"),
        ("[latency]\ndecode = 'fpga'\n", r"\[latency\] decode = 'fpga' is not accepted; accepted: \['cpu', 'gpu'\]"),
        ("[latency]\nsweep_rates = [0.0]\n", r"sweep_rates"),
        ("colour = 'blue'\n", r"unknown key\(s\) \['colour'\]"),
        ("[topology\n", r"not valid TOML"),
    ],
)
def test_bad_scenario_files_name_file_key_and_accepted_values(tmp_path: Path, text: str, match: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(ScenarioError, match=match) as err:
        load_scenario(p)
    assert str(p) in str(err.value)


def test_missing_scenario_lists_the_shipped_ones(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="shipped scenarios"):
        load_scenario(tmp_path / "nope.toml")


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


def test_cost_profile_errors_name_the_key(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text("[host]\nmemcpy_bytes_per_s = 1.0\nwarp_speed = 9\n")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['warp_speed'\]"):
        load_cost_model(p)
    with pytest.raises(FileNotFoundError, match="shipped profiles"):
        load_cost_model("no-such-profile")


def test_shipped_cost_profile_states_a_source_for_every_constant() -> None:
    """Every constant line in the profile carries '# measured here', '# published' or '# assumption' nearby."""
    for path in (Path(sim.__file__).parent / "profiles").glob("*.toml"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "=" in line and not line.lstrip().startswith("#") and not line.startswith(("name", "description")):
                context = " ".join(lines[max(0, i - 3) : i + 1])
                assert any(w in context for w in ("measured here", "published", "assumption")), (path, line)


def test_anchor_comparison_rows() -> None:
    """Model vs the PR's numbers (semantics §9): every anchor is present, finite, and its direction flag is consistent."""
    from sim.anchors import compare

    rows = compare(n_requests=200)
    assert [r.get("reported_pct", r.get("reported_x")) for r in rows] == [248.3, -78.7, 20.0, 12.76]
    for r in rows:
        model = r.get("model_pct", r.get("model_x"))
        assert math.isfinite(model)
        assert r["assumptions"] and r["needed"]
    assert rows[0]["same_direction"] == (rows[0]["model_pct"] > 0)
    assert rows[2]["same_direction"] == (rows[2]["model_pct"] > 0)
