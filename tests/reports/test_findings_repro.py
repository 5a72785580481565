"""Each defect finding's standalone reproducer (`reports.findings.repro`, semantics §21.4), on the recorded
newest-release matrix: scripts that import nothing of deferlab, for findings of every engine, and a reason for
each finding none fits."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from deferlab.reports.findings import render, repro
from deferlab.reports.findings.group import group

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json"


def test_each_defect_finding_has_a_standalone_script_or_says_why(tmp_path: Path) -> None:
    doc = json.loads(EXAMPLE.read_text())
    result = render.document(group(doc), "versions.json")
    written = repro.write(doc, result, tmp_path, "versions.json")
    defects = [d for d in result["findings"] if d["severity"] not in ("float32-only", "cost")]
    assert {p.name for p in written} == {d["reproducer"] for d in defects if d["reproducer"]}
    assert all(bool(d["reproducer"]) != bool(d["no_reproducer"]) for d in result["findings"])
    assert {d["engine"] for d in defects if d["reproducer"]} == {"sglang", "vllm", "lmdeploy"}
    # every defect of the newest releases has one (the Qwen C14s, the families added in stop 39's recording and the
    # Nemotrons' normalization since stop 40): no finding says why it has none
    without = {
        (d["engine"], d["function"].rsplit(".", 1)[-1], tuple(d["claims"])) for d in defects if not d["reproducer"]
    }
    assert without == set()
    assert len(written) == len(defects) == 61
    for path in written:
        text = path.read_text()
        tree = ast.parse(text)  # a script Python reads
        imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m.split(".")[0] == "deferlab"], path.name
        finding = next(d for d in defects if d["reproducer"] == path.name)
        assert f"finding {finding['id']} (" in text and text.startswith("# deferlab reproducer")


def test_a_defect_no_template_fits_says_why(tmp_path: Path) -> None:
    """SGLang's Qwen C14 finding with its counterexamples unrecorded (its cells' and its own): no cell's failure can be rebuilt, so no file,
    and the finding says why instead of leaving the field blank."""
    doc = json.loads(EXAMPLE.read_text())
    for column in ("qwen2.5-vl:0.5.23", "qwen3-vl:0.5.23"):
        doc["counterexamples"][column]["C14"] = None
    result = render.document(group(doc), "versions.json")
    for d in result["findings"]:  # nor the finding's own minimal input (it would be tried first)
        if d["minimal_cell"]["claim"] == "C14" and d["minimal_cell"]["column"].endswith(":0.5.23"):
            d["minimal_input"] = None
    written = repro.write(doc, result, tmp_path, "versions.json")
    (found,) = [d for d in result["findings"] if d["minimal_cell"] == {"claim": "C14", "column": "qwen2.5-vl:0.5.23"}]
    assert found["reproducer"] is None and f"{found['id']}-repro.py" not in {p.name for p in written}
    assert found["no_reproducer"] == "no reproducer template of deferlab fits any of its cells' failures"


def test_informational_findings_get_no_script(tmp_path: Path) -> None:
    doc = json.loads(EXAMPLE.read_text())
    result = render.document(group(doc), "versions.json")
    repro.write(doc, result, tmp_path, "versions.json")
    folded = [d for d in result["findings"] if d["severity"] in ("float32-only", "cost")]
    assert folded and all(d["reproducer"] is None and "informational" in d["no_reproducer"] for d in folded)
    md = render.markdown(result)
    assert md.count("**Standalone reproducer.**") == len(result["findings"]) - len(folded)


def test_a_finding_beside_another_in_its_cell_is_reproduced_on_its_own_input(tmp_path: Path) -> None:
    """A cell records one counterexample; a second finding of it (here vLLM GLM-4.1V's C18: the loader's refusal of
    `[1@5]`, and the 13 times against 150 of `[300@24; fps=30]`) is reproduced on its own minimal input and failure,
    not on its sibling's."""
    doc = json.loads(EXAMPLE.read_text())
    result = render.document(group(doc), "versions.json")
    repro.write(doc, result, tmp_path, "versions.json")
    cell = {"claim": "C18", "column": "glm-4.1v:vllm-0.34.0"}
    found = {d["severity"]: d for d in result["findings"] if d["minimal_cell"] == cell}
    assert set(found) == {"crash", "sequence"}
    clip = {severity: (tmp_path / d["reproducer"]).read_text() for severity, d in found.items()}
    assert "\nFRAMES = 300\nFPS = 24.0\n" in clip["sequence"] and "OPTIONS = {'fps': 30.0}" in clip["sequence"]
    assert "\nFRAMES = 1\nFPS = 5.0\n" in clip["crash"] and "OPTIONS = {}" in clip["crash"]
    assert "Counterexample: deferlab's minimal counterexample" in clip["sequence"]
