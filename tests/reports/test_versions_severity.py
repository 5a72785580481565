"""Severity everywhere a versions verdict is shown (semantics §21, issue 32): versions.json, versions.md,
families.md, the JUnit XML, versions.png, the findings leading versions.md, and ``--fail-on``.

``reports/example/versions-newest/versions.json`` is the recorded run of SGLang 0.5.23, vLLM 0.34.0 and LMDeploy
0.18.0 (every family, profile ci); it is re-rendered here as ``deferlab versions`` writes it. Its InternVL C13 on
SGLang (448x448 served as 3x3+1 tiles, 2560 tokens for 256) is the sequence cell; its vLLM Qwen2.5-VL C15
(``537 FP32 / 0 BF16 of 768``) is float32-only; SGLang's C11 (``IndexError``) is a crash.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.impact import LABELS, Severity, classify, parse_fail_on, row_from_versions
from deferlab.reports.core.claims import load_claim_statements
from deferlab.reports.versions import cli as versions_cli
from deferlab.reports.versions import gate, matrix
from deferlab.reports.versions import render as versions_report
from deferlab.reports.versions.grid import SEVERITY_COLOURS
from tests.reports.test_versions import fake_runner, loads, record

RECORDED = Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json"
SEQUENCE_CELL = ("internvl:0.5.23", "C13")
FLOAT32_CELL = ("qwen2.5-vl:0.5.23", "C15")
CRASH_CELL = ("0.5.23", "C11")


def _recorded() -> dict[str, Any]:
    """The recorded document as the matrix hands it to the writer (what the writer adds, taken off)."""
    doc = json.loads(RECORDED.read_text())
    for key in ("failure_groups", "baseline", "regressions", "severity"):
        doc.pop(key, None)
    return doc


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("severity") / "v"
    versions_report.write(out, _recorded(), load_claim_statements(), [], baseline=None)
    return out


def test_each_failing_cell_has_its_class_in_versions_json(written: Path) -> None:
    doc = json.loads((written / "versions.json").read_text())
    severity = doc["severity"]
    assert severity[SEQUENCE_CELL[0]][SEQUENCE_CELL[1]] == "sequence"
    assert "537 FP32 / 0 BF16 of 768" in doc["evidence"][FLOAT32_CELL[0]][FLOAT32_CELL[1]]
    assert severity[FLOAT32_CELL[0]][FLOAT32_CELL[1]] == "float32-only"
    assert severity[CRASH_CELL[0]][CRASH_CELL[1]] == "crash"
    failing = {(col, cid) for cid, per in doc["verdicts"].items() for col, v in per.items() if v == "fails"}
    assert {(col, cid) for col, per in severity.items() for cid in per} == failing  # every failure, nothing else
    for col, cid in failing:  # the class `deferlab findings` reads off the written document: the same
        assert severity[col][cid] == classify(row_from_versions(doc, cid, col)).label, (col, cid)


def test_versions_md_cells_and_families_md_name_the_class(written: Path) -> None:
    md = (written / "versions.md").read_text()
    internvl = md.split("### InternVL 2.5/3", 1)[1].split("\n### ", 1)[0]
    head = next(line for line in internvl.splitlines() if line.startswith("| claim |"))
    c13 = next(line for line in internvl.splitlines() if line.startswith("| C13 |"))
    cells = dict(zip(head.split(" | ")[2:], c13.rstrip(" |").split(" | ")[2:], strict=True))
    assert cells["internvl:0.5.23"] == "**FAILS** (sequence)" and cells["internvl:vllm-0.34.0"] == "holds"
    qwen = md.split("### Qwen2.5-VL", 1)[1].split("\n### ", 1)[0]
    assert "| **FAILS** (float32-only) |" in next(x for x in qwen.splitlines() if x.startswith("| C15 |"))
    # the summary's line for C13: InternVL's tie-break on SGLang, with ERNIE-4.5-VL's and MiMo-V2.5's geometry
    assert re.search(
        r"fails on 3 of \d+ \(sequence 3\): internvl:0\.5\.23, ernie-4\.5-vl:0\.5\.23, mimo-v2\.5:0\.5\.23", md
    )
    families = (written / "families.md").read_text()
    row = next(line for line in families.splitlines() if line.startswith("| InternVL 2.5/3 |"))
    assert row.split(" | ")[1].startswith("C13 FAILS (sequence), C14 FAILS (sequence), C15 holds")
    gemma = next(line for line in families.splitlines() if line.startswith("| Gemma 3 |"))
    assert "C15 FAILS (tower-input)" in gemma  # 0.5/0.5 on vLLM: a BF16 count above 0


def test_findings_lead_versions_md_and_findings_md_is_written_beside_it(written: Path) -> None:
    md = (written / "versions.md").read_text()
    summary, findings, first_table = (md.index(s) for s in ("## Summary", "## Findings", "### Kimi-K2.5/K3"))
    assert summary < findings < first_table
    section = md[findings:first_table]
    assert "[findings.md](findings.md)" in section
    lines = [x for x in section.splitlines() if x.startswith("- F")]
    classes = [x.split("[", 1)[1].split("]", 1)[0] for x in lines]
    assert classes == sorted(classes, key=lambda c: -LABELS[c]) and classes[0] == "crash"  # worst first
    assert "informational" not in classes and "float32-only" not in classes and "cost" not in classes
    folded = [x for x in section.splitlines() if x.startswith("- informational (")]
    assert len(folded) == 1  # float32-only and cost findings, one line
    assert any("[sequence]" in x and "InternVLProcessor.dynamic_preprocess" in x for x in lines)
    found = json.loads((written / "findings.json").read_text())
    assert (written / "findings.md").read_text().startswith("# Findings")
    assert len(lines) + int(folded[0].split("(")[1].split(")")[0]) == len(found["findings"])


def test_junit_failures_carry_the_class(written: Path) -> None:
    root = ET.parse(written / "versions.xml").getroot()
    cases = {(c.get("classname"), c.get("name").split()[0]): c for c in root.iter("testcase")}
    c13 = cases[(f"deferlab.{SEQUENCE_CELL[0]}", SEQUENCE_CELL[1])]
    failure = c13.find("failure")
    assert failure.get("type") == "ClaimFails.sequence" and failure.get("message").startswith("severity sequence: ")
    assert {p.get("name"): p.get("value") for p in c13.iter("property")}["severity"] == "sequence"
    c15 = cases[(f"deferlab.{FLOAT32_CELL[0]}", FLOAT32_CELL[1])].find("failure")
    assert c15.get("type") == "ClaimFails.float32-only"
    held = cases[("deferlab.internvl:vllm-0.34.0", "C13")]
    assert held.find("failure") is None and "severity" not in {p.get("name") for p in held.iter("property")}


def test_the_png_colours_failing_cells_by_class_with_a_legend(written: Path) -> None:
    from PIL import Image

    image = Image.open(written / "versions.png").convert("RGB")
    present = {rgb for _, rgb in image.getcolors(maxcolors=1 << 20)}
    for severity, colour in SEVERITY_COLOURS.items():  # each in the legend; crash .. float32-only in cells too
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in present, (severity.label, colour)
    assert len(set(SEVERITY_COLOURS.values())) == len(Severity)
    assert versions_report.COLOURS["fails"] not in {c for s, c in SEVERITY_COLOURS.items() if s != Severity.SEQUENCE}


def _without_crash(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every cell that shows a crash (its class or a cause's) turned to holds."""
    crashed = [h.rsplit(" (", 1)[0].rsplit("/", 1) for h in gate.fail_on(doc, {Severity.CRASH})]
    for column, cid in crashed:
        doc["verdicts"][cid][column] = "holds"
    doc["severity"] = matrix.severities(doc)
    return doc


def test_fail_on_reads_the_cells_classes() -> None:
    doc = _recorded()
    assert "internvl:0.5.23/C13 (sequence)" in gate.fail_on(doc, parse_fail_on("sequence"))
    assert "0.5.23/C11 (crash)" in gate.fail_on(doc, parse_fail_on("crash"))
    # SGLang's C11 crashes and, besides, stages with other dimensions: findings.md's sequence cause fails too
    assert "0.5.23/C11 (sequence)" in gate.fail_on(doc, parse_fail_on("sequence"))
    hits = gate.fail_on(doc, parse_fail_on("crash,sequence"))
    assert hits.index("0.5.23/C11 (crash)") < hits.index("internvl:0.5.23/C13 (sequence)")  # worst first
    clean = _without_crash(_recorded())
    assert gate.fail_on(clean, parse_fail_on("crash")) == [] and gate.fail_on(clean, parse_fail_on("sequence"))


def _args(out: Path, fail_on: str | None) -> argparse.Namespace:
    return argparse.Namespace(versions=["0.5.23"], vllm=None, newest=False, out=out, profile="ci", baseline="none",
                              update_baseline=False, format=None, junit=None, fail_on=fail_on)  # fmt: skip


@pytest.mark.parametrize(
    ("fail_on", "evidence", "status"),
    [
        ("sequence", {}, 1),  # C13 fails: sequence by its claim
        ("crash", {}, 0),  # no crash cell
        ("tower-input,crash", {}, 1),  # C14 fails: tower-input by its claim
        ("crash", {"C14": "ValueError: image mode 'L' is not accepted"}, 1),  # an exception heads the failure
        (None, {}, 0),  # no --fail-on: failures alone never exit 1
    ],
)
def test_fail_on_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_on: str | None, evidence: dict[str, str], status: int
) -> None:
    monkeypatch.setattr(versions_cli, "refuse_unlisted", lambda wanted: None)
    table = {("sglang", "0.5.23"): record("sglang", "0.5.23", {"C1": "holds", "C13": "fails", "C14": "fails"},
                                          evidence=evidence)}  # fmt: skip
    log = io.StringIO()
    assert versions_cli.run(_args(tmp_path / "m", fail_on), log, runner=fake_runner(table), loader=loads) == status
    assert ("FAIL-ON " in log.getvalue()) is bool(status)


def test_an_unknown_class_is_refused_before_any_release_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list = []
    monkeypatch.setattr(versions_cli, "refuse_unlisted", lambda wanted: ran.append(wanted))
    with pytest.raises(UsageError, match=r"^--fail-on 'sequence,severe': unknown class 'severe'; accepted: "):
        versions_cli.run(_args(tmp_path / "m", "sequence,severe"), io.StringIO(), runner=fake_runner({}), loader=loads)
    assert ran == [] and not (tmp_path / "m").exists()
