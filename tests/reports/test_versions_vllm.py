"""``deferlab versions --vllm``: the engine axis of the matrix (columns, index listing, claims.toml matching,
the baseline, the grid), on hand-made runs; CI's ``scripts/versions.sh`` runs the real newest release.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from deferlab.reference.system import claims as registry
from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import column, column_key, engine, split_column
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.versions import cli as versions_cli
from deferlab.reports.versions import gate
from deferlab.reports.versions import matrix as versions
from tests.reports.test_versions import fake_runner, loads, record

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _no_strict_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The strict switch off unless a test turns it on (scripts/test.sh exports DEFERLAB_STRICT=1)."""
    monkeypatch.delenv("DEFERLAB_STRICT", raising=False)


def _run(version: str, verdicts: dict[str, str], engine_name: str = "sglang") -> RunRecord:
    return record(engine_name, version, verdicts)


def _expected(version: str) -> dict[str, str]:
    """What claims.toml expects of a vLLM release, per claim with a row covering it."""
    ids = engine("vllm").claims or ()
    return {c: registry.expected_for_engine(c, "vllm", version) for c in ids}


def test_columns_name_the_engine_and_sort_sglang_first() -> None:
    assert column("vllm", "0.33.0") == "vllm-0.33.0" and column("sglang", "0.5.23") == "0.5.23"
    assert split_column("vllm-0.27.1") == ("vllm", "0.27.1")
    cols = ["vllm-0.33.0", "0.5.23", "vllm-0.27.0", "0.5.17", "vllm-0.10.1.1", "0.5.17.post1"]
    assert sorted(cols, key=column_key) == ["0.5.17", "0.5.17.post1", "0.5.23", "vllm-0.10.1.1", "vllm-0.27.0",
                                            "vllm-0.33.0"]  # fmt: skip


def test_vllm_index_listing_starts_at_the_first_release_with_the_kimi_k3_path() -> None:
    listing = "vllm (0.33.0)\nAvailable versions: 0.33.0, 0.32.0, 0.27.0, 0.26.0, 0.22.1\n"
    seen = []

    def fake(cmd: list[str], **kw: object) -> tuple[int, str, str]:
        seen.append(cmd)
        return 0, listing, ""

    assert versions.index_versions(capture=fake, engine="vllm") == ["0.27.0", "0.32.0", "0.33.0"]
    assert seen[0][-3:-1] == ["versions", "vllm"]


def test_matrix_puts_vllm_beside_sglang_and_matches_it_against_claims_toml() -> None:
    """vLLM's served claims are matched against claims.toml's engine rows; its other claims are n/a."""
    sglang = {c: claim.expected["RELEASED"] for c, claim in registry.load_claims().items()}
    good = _expected("0.33.0")
    off = {**good, "C13": "fails"}
    doc = versions.matrix([_run("0.33.0", good, "vllm"), _run("0.5.23", sglang), _run("0.32.0", off, "vllm")], "ci")
    assert doc["versions"] == ["0.5.23", "vllm-0.32.0", "vllm-0.33.0"]
    assert doc["verdicts"]["C1"]["vllm-0.33.0"] == "n/a" and doc["verdicts"]["C14"]["vllm-0.33.0"] == good["C14"]
    assert doc["policy_match"]["vllm-0.33.0"]["matches"] == [versions.ENGINE_MATCH]
    miss = doc["policy_match"]["vllm-0.32.0"]
    assert miss["matches"] == [] and miss["differences"]["C13"] == {"release": "fails", "claims.toml": good["C13"]}
    assert "RELEASED" in doc["policy_match"]["0.5.23"]["matches"]


def test_baseline_keeps_sglang_entries_and_adds_vllm_columns_after_them(tmp_path: Path) -> None:
    previous = gate.Baseline("versions", "ci", {"0.5.23": {"C1": "holds"}, "0.5.17": {"C1": "n/a"}})
    doc = versions.matrix([_run("0.33.0", _expected("0.33.0"), "vllm")], "ci")
    path = tmp_path / "b.json"
    gate.save(path, gate.updated(previous, doc))
    out = json.loads(path.read_text())["cells"]
    assert list(out) == ["0.5.17", "0.5.23", "vllm-0.33.0"] and out["0.5.23"] == {"C1": "holds"}
    changed = gate.Baseline("versions", "ci", {"vllm-0.33.0": {**out["vllm-0.33.0"], "C14": "holds"}})
    assert [r["name"] for r in gate.compare(doc, changed, strict=False)] == ["vllm-0.33.0/C14"]


def _args(**kw) -> argparse.Namespace:
    base = {"versions": [], "vllm": None, "newest": False, "out": None, "profile": "ci", "baseline": "none"}
    return argparse.Namespace(**{**base, "update_baseline": False, **kw})


@pytest.mark.parametrize(
    ("kw", "wanted"),
    [
        ({}, {"sglang": None}),
        ({"vllm": []}, {"sglang": None, "vllm": None}),
        ({"vllm": ["0.33.0"]}, {"vllm": ["0.33.0"]}),
        ({"versions": ["0.5.23"], "vllm": ["0.33.0"]}, {"sglang": ["0.5.23"], "vllm": ["0.33.0"]}),
        ({"newest": True, "vllm": []}, {"sglang": None, "vllm": None}),
    ],
)
def test_which_releases_run(kw: dict, wanted: dict) -> None:
    """Named releases run; an axis with none named runs its default; naming only vLLM's runs only those."""
    assert versions_cli._check(_args(**kw))[0] == wanted


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            {"vllm": ["0.26.0"]},
            r"--vllm: '0.26.0': no Kimi-K3 image path before vLLM 0\.27\.0; accepted: 0\.27\.0 and later",
        ),
        ({"vllm": ["latest"]}, r"VERSION must look like 0\.5\.23"),
        ({"newest": True, "vllm": ["0.33.0"]}, r"--newest takes no VERSION"),
    ],
)
def test_bad_vllm_versions_are_refused_up_front(kw: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        versions_cli._check(_args(**kw))


def test_newest_of_each_engine_runs_and_the_grid_shows_both(tmp_path: Path, monkeypatch) -> None:
    """``versions --newest --vllm``: one newest release per engine, one column each, one PNG with both."""
    listings = {"sglang": ["0.5.22", "0.5.23"], "vllm": ["0.32.0", "0.33.0"]}
    monkeypatch.setattr(versions, "index_versions", lambda engine="sglang", **kw: listings[engine])
    released = {c: claim.expected["RELEASED"] for c, claim in registry.load_claims().items()}
    table = {("sglang", "0.5.23"): _run("0.5.23", released), ("vllm", "0.33.0"): _run("0.33.0", _expected("0.33.0"),
             "vllm")}  # fmt: skip
    ran: list = []
    rc = versions_cli.run(_args(newest=True, vllm=[], out=tmp_path / "m"), io.StringIO(), runner=fake_runner(table, ran),
                          loader=loads)  # fmt: skip
    assert rc == 0 and [r[:2] for r in ran] == [("sglang", "0.5.23"), ("vllm", "0.33.0")]
    doc = json.loads((tmp_path / "m" / "versions.json").read_text())
    assert doc["versions"] == ["0.5.23", "vllm-0.33.0"]
    assert (tmp_path / "m" / "versions.png").read_bytes().startswith(PNG_MAGIC)
    assert "vllm-0.33.0" in (tmp_path / "m" / "versions.md").read_text()
