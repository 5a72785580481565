"""Figures: every PNG the report lists exists, is a real PNG and is referenced from report.md."""

from __future__ import annotations

import json
from pathlib import Path

from deferlab.reports.cli import main
from deferlab.reports.report.plots import sim as plots_sim
from tests.reports.support import write_config, write_results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_figures_are_pngs_referenced_inline(tmp_path: Path) -> None:
    """With plots on, each listed figure is a non-trivial PNG and report.md embeds it."""
    argv = ["report", "--config", str(write_config(tmp_path)), "--from-results", str(write_results(tmp_path / "res"))]
    argv += ["--out", str(tmp_path / "r"), "--baseline", "none", "--sweep-max-side", "16", "--sweep-limits", "4"]
    assert main([*argv, "--skip", "ipc", "served", "sim", "bench"]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    names = [f["name"] for f in report["figures"]]
    assert names == ["decision_maps", "byte_ratio", "tokens", "flip_density", "aggregation"]
    md = (tmp_path / "r" / "report.md").read_text()
    for fig in report["figures"]:
        data = (tmp_path / "r" / fig["file"]).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
        assert f"]({fig['file']})" in md


def _scenario(name: str, result: dict | None, status: str = "ok") -> dict:
    return {"scenario": name, "status": status, "result": result}


def test_sim_figures_skip_scenarios_without_data(tmp_path: Path) -> None:
    """Failed or skipped scenarios, and results without the needed part, draw nothing (None), never crash."""
    sims = [
        _scenario("broken", None, status="failed"),
        _scenario("no-corpus", {"skipped": "corpus missing", "placement": [], "sweep": [], "accounting": None}),
        _scenario("bare", {"skipped": None, "placement": [{"strategy": "lpt-patches", "requests": 0}], "sweep": []}),
    ]
    assert plots_sim.placement_imbalance(sims, tmp_path / "a.png") is None
    assert plots_sim.latency_vs_load(sims, tmp_path / "b.png") is None
    assert plots_sim.payload_alternatives(sims, tmp_path / "c.png") is None
    assert list(tmp_path.iterdir()) == []


def test_sim_figures_draw_available_data(tmp_path: Path) -> None:
    """A scenario with placement rows, a load sweep (incl. unlimited 'inf') and payloads gives three PNGs."""
    point = {"ttft_p50_s": 0.1, "ttft_p90_s": 0.2, "throughput_rps": 3.0}
    result = {
        "skipped": None,
        "placement": [
            {"strategy": s, "requests": 5, "cost_imbalance_mean": 1.2, "cost_imbalance_max": 1.9}
            for s in ("lpt-patches", "optimal")
        ],
        "sweep": [
            {"rate_rps": r, "eager": point, "deferred": {**point, "ttft_p50_s": 0.05}} for r in (1.0, 2.0, "inf")
        ],
        "accounting": {"payload_alternatives_bytes": {"fp32_patches": 4 << 30, "raw_uint8": 1 << 30}},
    }
    sims = [_scenario("s", result)]
    for fn, name in (
        (plots_sim.placement_imbalance, "a.png"),
        (plots_sim.latency_vs_load, "b.png"),
        (plots_sim.payload_alternatives, "c.png"),
    ):
        assert fn(sims, tmp_path / name) == tmp_path / name
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
