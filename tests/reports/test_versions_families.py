"""``deferlab versions --model``: a column per (release, model family, served path), each matched against
claims.toml's rows for its family and path, a family a release does not serve ``n/a`` with its reason, and the
families x engines table (families.md, ``--format families``) the README embeds.

``reports/example/versions-newest/versions.json`` is what ``bash scripts/versions.sh --newest`` (SGLang 0.5.23,
vLLM 0.34.0, ``--model all``, profile ci) wrote; the runs here are fake (`test_versions.fake_runner`): records
rebuilt from it.
"""

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import System, path_label
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.versions import cli as versions_cli
from deferlab.reports.versions import columns as cols
from deferlab.reports.versions import families, gate, matrix
from tests.reports.test_versions import fake_runner, loads

# the real run of `bash scripts/versions.sh --newest` (SGLang 0.5.23, vLLM 0.34.0, LMDeploy 0.18.0, every family)
RECORDED = Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json"
FIXTURE = json.loads(RECORDED.read_text())
README = Path(__file__).resolve().parents[2] / "README.md"
# semantics §18.7's and §20's expectations, as the run gave them, each failure with its severity class (semantics §21)
TABLE = [
    "| model family | SGLang 0.5.23 | vLLM 0.34.0 | LMDeploy 0.18.0 |",
    "|---|---|---|---|",
    "| Kimi-K2.5/K3 | C4 holds, C13 holds, C14 FAILS (crash), C15 FAILS (float32-only) | C4 FAILS (tower-input), C13 holds, C14 FAILS (crash), C15 FAILS (tower-input) | n/a: no LMDeploy path for Kimi-K2.5/K3 is checked (semantics §18) |",
    "| Qwen2.5-VL | C13 holds, C14 FAILS (tower-input), C15 FAILS (float32-only), C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (crash), C20 FAILS (sequence) | C4 holds, C13 holds, C14 FAILS (tower-input), C15 FAILS (float32-only), C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (crash), C20 FAILS (tower-input) | n/a: no LMDeploy path for Qwen2.5-VL is checked (semantics §18) |",
    "| Qwen3-VL | C13 holds, C14 FAILS (tower-input), C15 FAILS (float32-only), C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (crash), C20 FAILS (sequence) | C4 FAILS (tower-input), C13 holds, C14 FAILS (tower-input), C15 FAILS (tower-input), C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (crash), C20 FAILS (tower-input) | C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (sequence), C20 FAILS (crash) |",
    "| InternVL 2.5/3 | C13 FAILS (sequence), C14 FAILS (sequence), C15 holds, C20 FAILS (sequence) | C13 holds, C14 FAILS (tower-input), C15 holds, C20 FAILS (tower-input) | C13 holds, C14 holds, C15 holds, C20 FAILS (crash) |",
    "| GLM-4.1V | C13 holds, C14 FAILS (tower-input), C15 FAILS (float32-only), C16 FAILS (sequence), C17 FAILS (sequence), C18 FAILS (sequence), C19 FAILS (crash), C20 FAILS (tower-input) | C15 FAILS (float32-only), C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (crash), C20 FAILS (tower-input) | n/a: no LMDeploy path for GLM-4.1V is checked (semantics §18) |",
    "| Mistral 3 | n/a: no SGLang path for Mistral 3 is checked (semantics §18) | C15 FAILS (float32-only), C20 FAILS (tower-input) | n/a: no LMDeploy path for Mistral 3 is checked (semantics §18) |",
    "| Gemma 3 | n/a: no SGLang path for Gemma 3 is checked (semantics §18) | C15 FAILS (tower-input), C20 FAILS (tower-input) | n/a: no LMDeploy path for Gemma 3 is checked (semantics §18) |",
    "| Gemma 4 | C15 FAILS (float32-only), C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (crash), C20 FAILS (sequence) | C15 FAILS (float32-only), C16 FAILS (crash), C17 FAILS (crash), C18 FAILS (crash), C19 FAILS (crash), C20 FAILS (tower-input) | n/a: no LMDeploy path for Gemma 4 is checked (semantics §18) |",
    "| Nemotron VL | n/a: no SGLang path for Nemotron VL is checked (semantics §18) | C15 FAILS (tower-input), C20 FAILS (tower-input) | n/a: no LMDeploy path for Nemotron VL is checked (semantics §18) |",
    "| Nemotron Parse | n/a: no SGLang path for Nemotron Parse is checked (semantics §18) | C15 FAILS (float32-only), C20 FAILS (tower-input) | n/a: no LMDeploy path for Nemotron Parse is checked (semantics §18) |",
    "| Nano Nemotron VL | n/a: no SGLang path for Nano Nemotron VL is checked (semantics §18) | C15 FAILS (float32-only), C20 FAILS (tower-input) | n/a: no LMDeploy path for Nano Nemotron VL is checked (semantics §18) |",
    "| PaddleOCR-VL | C13 holds, C14 FAILS (tower-input), C15 FAILS (float32-only), C20 FAILS (sequence) | n/a: no vLLM path for PaddleOCR-VL is checked (semantics §18) | n/a: no LMDeploy path for PaddleOCR-VL is checked (semantics §18) |",
    "| MiniCPM-V 4.6 | C13 holds, C15 FAILS (tower-input), C20 FAILS (sequence) | n/a: no vLLM path for MiniCPM-V 4.6 is checked (semantics §18) | n/a: no LMDeploy path for MiniCPM-V 4.6 is checked (semantics §18) |",
    "| ERNIE-4.5-VL | C13 FAILS (sequence), C14 FAILS (tower-input), C15 FAILS (float32-only), C20 FAILS (sequence) | n/a: no vLLM path for ERNIE-4.5-VL is checked (semantics §18) | n/a: no LMDeploy path for ERNIE-4.5-VL is checked (semantics §18) |",
    "| MiMo-V2.5 | C13 FAILS (sequence), C14 FAILS (sequence), C15 FAILS (float32-only), C20 FAILS (sequence) | n/a: no vLLM path for MiMo-V2.5 is checked (semantics §18) | n/a: no LMDeploy path for MiMo-V2.5 is checked (semantics §18) |",
    "| Step3-VL | C15 holds, C20 FAILS (sequence) | n/a: no vLLM path for Step3-VL is checked (semantics §18) | n/a: no LMDeploy path for Step3-VL is checked (semantics §18) |",
]
# families an engine serves since the recorded run: their columns and n/a lines are not the fixture's, and a fake run
# of today's registry has no rows for them ("not run"); none since the stop-42 recording (Gemma 4 on SGLang is in it)
NEWLY_SERVED: set[tuple[str, str]] = set()
SEVERITY = re.compile(r" \((?:crash|sequence|tower-input|float32-only|cost)\)")
PLAIN = [SEVERITY.sub("", line) for line in TABLE]  # the verdicts alone (a fake run's evidence classes otherwise)
NOW = PLAIN


@pytest.fixture(autouse=True)
def _no_strict_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEFERLAB_STRICT", raising=False)


def record(engine: str, version: str, family: str = "all", doc: dict[str, Any] = FIXTURE) -> RunRecord:
    """The run of one release as the runner reads it back: a row per (claim, verdict column) of the fixture."""
    rows = []
    for name in doc["versions"]:
        c = cols.parse(name)
        if (c.engine, c.version) == (engine, version):
            label = path_label(engine, c.path, c.family)
            answered = System(engine, version).answers
            rows += [{"id": cid, "policy": label, "verdict": per[name], "evidence": f"e {cid}"}
                     for cid, per in doc["verdicts"].items() if answered(cid, c.family)]  # fmt: skip
    return RunRecord(System(engine, version, family=family), "ci", rows=rows, rc=0, wrote=True, seconds=1.0)


def _args(**kw: Any) -> argparse.Namespace:
    base = {"versions": ["0.5.23"], "vllm": ["0.34.0"], "lmdeploy": ["0.18.0"], "newest": False, "out": None, "profile": "ci",
            "baseline": "none", "update_baseline": False, "format": None, "junit": None, "model": "all"}  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def test_the_families_table_of_the_recorded_run() -> None:
    assert families.table(FIXTURE) == TABLE
    md = families.markdown(FIXTURE)
    assert md.startswith("# Model families x engines") and "\n".join(TABLE) in md


def test_columns_keep_kimi_k3s_names_and_name_the_others_after_their_verdict_columns() -> None:
    assert cols.Column("sglang", "0.5.23").name == "0.5.23" and cols.Column("vllm", "0.34.0").name == "vllm-0.34.0"
    host = cols.Column("vllm", "0.34.0", "kimi-k3", "host-normalized")
    assert host.name == "vllm-0.34.0 host-normalized"
    assert cols.Column("vllm", "0.34.0", "qwen3-vl").name == "qwen3-vl:vllm-0.34.0"
    for name in FIXTURE["versions"]:
        c = cols.parse(name)
        assert c.name == name and cols.of_label(c.engine, c.version, path_label(c.engine, c.path, c.family)) == c
    assert sorted(FIXTURE["versions"], key=cols.key) == FIXTURE["versions"]


@pytest.mark.extra("transformers")  # --model all asks for the Qwen families, whose trained side it is
def test_one_run_per_release_judges_every_family_and_writes_families_md(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """One run per release (its System names every family); the matrix has the fixture's columns, each matching
    claims.toml; ``--format families`` prints families.md."""
    monkeypatch.setattr(versions_cli, "refuse_unlisted", lambda wanted: None)
    table = {(e, v): record(e, v) for e, v in (("sglang", "0.5.23"), ("vllm", "0.34.0"), ("lmdeploy", "0.18.0"))}
    ran: list = []
    systems: list[System] = []

    def runner(request: Any, **kw: Any) -> RunRecord:
        systems.append(request.system)
        return fake_runner(table, ran)(request, **kw)

    out = tmp_path / "m"
    assert versions_cli.run(_args(out=out, format="families"), io.StringIO(), runner=runner, loader=loads) == 0
    served_by_sglang = "kimi-k3,qwen2.5-vl,qwen3-vl,internvl,glm-4.1v,gemma4," + (
        "paddleocr-vl,minicpm-v-4.6,ernie-4.5-vl,mimo-v2.5,step3-vl"
    )
    systems_run = [(s.engine, s.family) for s in systems]
    served_by_vllm = "kimi-k3,qwen2.5-vl,qwen3-vl,internvl,glm-4.1v,mistral3,gemma3,gemma4," + (
        "nemotron-vl,nemotron-parse,nano-nemotron-vl"  # every family but SGLang's alone
    )
    assert systems_run == [("sglang", served_by_sglang), ("vllm", served_by_vllm), ("lmdeploy", "qwen3-vl,internvl")]
    doc = json.loads((out / "versions.json").read_text())
    # families registered after the recorded run (semantics §18.9's Nemotron rows) are columns it has no rows for
    recorded = set(FIXTURE["families"])
    old = [c for c in doc["versions"] if (cols.parse(c).engine, cols.parse(c).family) not in NEWLY_SERVED]
    assert [c for c in old if cols.parse(c).family in recorded] == FIXTURE["versions"]
    kept = {e: {f: why for f, why in per.items() if f in recorded} for e, per in doc["not_served"].items()}
    unserved = {e: {f: why for f, why in per.items() if ("sglang", f) not in NEWLY_SERVED or e != "0.5.23"}
                for e, per in FIXTURE["not_served"].items()}  # fmt: skip
    assert {e: per for e, per in kept.items() if per} == unserved
    assert all(m["matches"] for m in doc["policy_match"].values()), doc["policy_match"]
    assert "RELEASED" in doc["policy_match"]["0.5.23"]["matches"]
    printed = capsys.readouterr().out
    assert printed == (out / "families.md").read_text() and "\n".join(NOW) in SEVERITY.sub("", printed)
    # the fake evidence ("e C13") names no failure: each cell gets its claim's class (semantics §21.2)
    assert "C13 FAILS (sequence), C14 FAILS (tower-input)" in printed and "C15 FAILS (float32-only)" in printed
    md = (out / "versions.md").read_text()
    assert "### Qwen3-VL" in md and "## Model families a release does not serve" in md


def test_a_column_is_matched_against_its_familys_and_paths_rows() -> None:
    off = json.loads(json.dumps(FIXTURE))
    off["verdicts"]["C13"]["internvl:vllm-0.34.0"] = "fails"  # claims.toml: InternVL on vLLM holds C13
    off["verdicts"]["C4"]["qwen3-vl:vllm-0.34.0 host-normalized"] = "fails"  # claims.toml: the host column's is n/a
    doc = matrix.matrix([record("vllm", "0.34.0", doc=off)], "ci")
    assert doc["policy_match"]["internvl:vllm-0.34.0"]["differences"] == {
        "C13": {"release": "fails", "claims.toml": "holds"}
    }
    host = doc["policy_match"]["qwen3-vl:vllm-0.34.0 host-normalized"]
    assert host["matches"] == [] and host["differences"] == {"C4": {"release": "fails", "claims.toml": "n/a"}}
    assert doc["verdicts"]["C13"]["glm-4.1v:vllm-0.34.0"] == "n/a"  # a normalization-only family has no C13
    assert doc["policy_match"]["glm-4.1v:vllm-0.34.0"]["matches"] == ["claims.toml"]


def test_a_release_serving_none_of_the_families_is_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(versions_cli, "refuse_unlisted", lambda wanted: None)
    loaded: list = []
    args = _args(vllm=None, model="gemma3,mistral3", out=tmp_path / "m")
    rc = versions_cli.run(args, io.StringIO(), runner=fake_runner({}), loader=lambda s: loaded.append(s) or "x")
    doc = json.loads((tmp_path / "m" / "versions.json").read_text())
    assert rc == 0 and loaded == [] and doc["versions"] == [] and doc["errors"] == {}
    assert set(doc["not_served"]["0.5.23"]) == {"gemma3", "mistral3"}  # SGLang serves Gemma 4 from stop 42
    assert "n/a: no SGLang path for Gemma 3" in (tmp_path / "m" / "families.md").read_text()


def test_an_unknown_family_is_refused_in_one_line_before_anything_loads(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--model: unknown model family 'qwen9'; accepted: kimi-k3, qwen2\.5-vl, .*"
                       r"a comma-separated list of them, or all$"):  # fmt: skip
        versions_cli._check(_args(model="kimi-k3,qwen9", out=tmp_path / "m"))


def test_a_baseline_keys_cells_by_column_and_one_written_before_still_reads(tmp_path: Path) -> None:
    """Kimi-K3's columns keep their names: a schema-1 baseline of ``0.5.23`` compares with today's matrix."""
    doc = matrix.matrix([record("sglang", "0.5.23"), record("vllm", "0.34.0")], "ci")
    old = gate.Baseline("versions", "ci", {"0.5.23": {"C13": "holds"}, "vllm-0.34.0": {"C13": "fails"}})
    assert [r["name"] for r in gate.compare(doc, old, strict=False)] == ["vllm-0.34.0/C13"]
    new = gate.updated(old, doc)
    assert {"qwen3-vl:vllm-0.34.0", "vllm-0.34.0 host-normalized"} <= set(new.cells)
    assert gate.compare(doc, new, strict=False) == []


def test_the_readme_embeds_the_recorded_table() -> None:
    """The README's families table is `families.table` of the recorded run, between `families.BEGIN` and `END`."""
    text = README.read_text()
    if families.BEGIN not in text:
        pytest.skip(f"the README does not embed the families table yet ({families.BEGIN!r} ... {families.END!r})")
    block = re.search(re.escape(families.BEGIN) + r"\n(.*?)\n" + re.escape(families.END), text, re.S)
    assert block is not None and block.group(1).strip().splitlines() == TABLE
