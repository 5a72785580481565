"""Reproducers of the families' claims (`reports.repro.families`), written from the recorded real run of every
family on the newest releases (reports/example/versions-newest/versions.json): each failing cell a template fits
becomes a standalone file headed with its family, served path and companions; it imports the engine and its
companions only, and fails on the release it came from while the flaw is there."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from deferlab.reference.system.systems import family_column, path_label
from deferlab.reports.repro import cli as repro
from deferlab.reports.versions import columns as cols
from tests.reports.test_repro import outcomes

RECORDED = json.loads(
    (Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json").read_text()
)


def rows(column: str) -> list[dict]:
    """The failing rows of one recorded column, as a run records them (id, verdict column, evidence,
    counterexample, provenance)."""
    c = cols.parse(column)
    label = path_label(c.engine, c.path, c.family)
    return [
        {"id": cid, "policy": label, "verdict": "fails", "evidence": RECORDED["evidence"][column][cid],
         "counterexample": RECORDED["counterexamples"].get(column, {}).get(cid),
         "provenance": RECORDED["provenance"].get(column, {}).get(cid) or {}}
        for cid, per in RECORDED["verdicts"].items() if per.get(column) == "fails"
    ]  # fmt: skip


def write(tmp: Path, column: str) -> tuple[list[Path], list[str]]:
    c = cols.parse(column)
    name = f"{c.engine}-{c.version}"
    system = {"name": name, "engine": c.engine, "kind": "wheel", "version": c.version, "commit": None}
    return repro.write_reproducers(rows(column), system, c.version, tmp, source="the recorded run", engine=c.engine)


@pytest.mark.parametrize(
    ("column", "files"),
    [
        ("internvl:0.5.23", ["C13-internvl-sglang-0.5.23.py"]),
        ("qwen3-vl:vllm-0.34.0", ["C4-qwen3-vl-vllm-0.34.0.py", "C15-qwen3-vl-vllm-0.34.0.py"]),
        ("gemma3:vllm-0.34.0", ["C15-gemma3-vllm-0.34.0.py"]),
    ],
)
def test_a_familys_failing_cells_become_headed_standalone_files(tmp_path: Path, column: str, files: list[str]) -> None:
    written, _ = write(tmp_path, column)
    names = [p.name for p in written]
    assert set(files) <= set(names), names
    c = cols.parse(column)
    for path in written:
        info = repro.read_header(path)
        assert info["family"] == c.family and info["engine"] == c.engine and info["spec"] == c.version
        text = path.read_text()
        assert f"# Model family: {c.family} (" in text
        tree = ast.parse(text)
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any("deferlab" in m for m in imported), imported
        assert any(m.split(".")[0] == c.engine for m in imported), imported
    assert family_column("SGLANG", "internvl") == "internvl:SGLANG"


@pytest.mark.slow
@pytest.mark.extra("vllm")
def test_each_family_reproducer_fails_on_the_release_it_came_from(tmp_path: Path) -> None:
    """SGLang 0.5.23's InternVL C13 (448x448: 10 tiles where the card gives 1) and vLLM 0.34.0's Gemma 3 C15
    (the device normalization's 3 BF16 values at level 127) fail where they were recorded."""
    (sgl, *_), _ = write(tmp_path / "s", "internvl:0.5.23")
    got = outcomes([sgl], "0.5.23", tmp_path)
    assert got[sgl.name] != "passed", got
    gemma = [p for p in write(tmp_path / "v", "gemma3:vllm-0.34.0")[0] if p.name.startswith("C15-")]
    got = outcomes(gemma, "0.34.0", tmp_path, engine="vllm")
    assert got[gemma[0].name] != "passed", got
