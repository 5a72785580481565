"""The typed row of ``verdicts.json`` (`reference.system.rows`): columns, verdicts, counterexamples, rows.

Why: every reader now takes a row through `Row` and a column through `Column`; a column that did not read back
as the same text, or a row that lost a key, would change a baseline, a report or a comparison silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.claims import VERDICTS
from deferlab.reference.system.rows import Column, Counterexample, Row, Verdict
from deferlab.reference.system.systems import split_label

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "reports" / "example"


def shipped_columns() -> set[str]:
    """Every column named in the shipped example documents: the matrices' columns and verdict cells, the rows'
    ``policy`` of any ``verdicts.json``, and the findings' cells."""
    found: set[str] = set()
    for path in EXAMPLES.glob("**/versions.json"):
        doc = json.loads(path.read_text())
        found |= set(doc.get("columns", {}))
        found |= {col for cells in doc.get("verdicts", {}).values() for col in cells}
    for path in EXAMPLES.glob("**/verdicts.json"):
        found |= {str(r["policy"]) for r in json.loads(path.read_text())["claims"]}
    for path in EXAMPLES.glob("**/findings.json"):
        found |= {c["column"] for f in json.loads(path.read_text())["findings"] for c in f["cells"]}
    return found


def test_every_shipped_column_parses_and_prints_back_exactly() -> None:
    """Column.parse and str are inverses on every column the shipped examples name, and agree with split_label."""
    columns = shipped_columns()
    assert len(columns) > 20  # the three matrices name dozens: a glob that found nothing must not pass
    for text in sorted(columns):
        column = Column.parse(text)
        assert str(column) == text
        assert (column.family_name, column.label, column.path) == split_label(text)
        assert Column.from_dict(column.to_dict()) == column
        assert column.engine is not None and column.release is not None  # a matrix column is an engine's release


@pytest.mark.parametrize(
    ("text", "engine", "release", "family", "path"),
    [
        ("0.5.23", "sglang", "0.5.23", None, None),
        ("vllm-0.34.0 host-normalized", "vllm", "0.34.0", None, "host-normalized"),
        ("qwen3-vl:lmdeploy-0.18.0", "lmdeploy", "0.18.0", "qwen3-vl", None),
        ("qwen2.5-vl:VLLM host-normalized", "vllm", None, "qwen2.5-vl", "host-normalized"),
        ("SGLANG", "sglang", None, None, None),
        ("RELEASED", None, None, None, None),
        ("qwen3-vl:RELEASED", None, None, "qwen3-vl", None),
    ],
)
def test_column_structure(text: str, engine: str | None, release: str | None, family: str | None, path: str | None):
    """A run's label names its engine; a matrix column also its release; a policy neither."""
    column = Column.parse(text)
    assert (column.engine, column.release, column.family, column.path) == (engine, release, family, path)
    assert str(column) == text


@pytest.mark.parametrize("text", ["X ", ":Y", "a:b:c d e", "", "fam: odd"])
def test_column_round_trips_odd_text(text: str) -> None:
    """Even text no writer makes reads back as itself (a reader never rewrites a column)."""
    assert str(Column.parse(text)) == text


def test_verdict_values_are_the_recorded_strings() -> None:
    """The enum's values are the vocabulary verdicts.json has always held, and JSON writes them as those strings."""
    assert tuple(v.value for v in Verdict) == VERDICTS
    assert json.dumps([Verdict.FAILS]) == '["fails"]' and f"{Verdict.NA}" == "n/a"
    with pytest.raises(ValueError, match=r"verdict 'broken': accepted holds, fails"):
        Verdict.parse("broken")


SCHEMA_1 = {
    "id": "C12",
    "statement": "s",
    "source": "semantics §12",
    "policy": "RELEASED",
    "verdict": "fails",
    "evidence": "AssertionError: alpha\nmore",
    "counterexample": "width=1 height=1",
}
SCHEMA_2 = {
    "id": "C20",
    "statement": "s",
    "source": "semantics §20.2",
    "policy": "qwen2.5-vl:SGLANG",
    "verdict": "fails",
    "evidence": "AssertionError: [JPEG EXIF 2 17x11; data-uri] differs",
    "counterexample": ["JPEG EXIF 2", 17, 11, 0],
    "provenance": {"TRAINED: decode": "restated"},
    "signatures": [{"signature": "s0", "partition": "JPEG", "counterexample": ["JPEG EXIF 2", 17, 11, 0]}],
    "figure": {"kind": "strip"},
    "impact": {"rate": 0.2},
}
NOT_RUN = {"id": "C1", "policy": "PRE_PR", "verdict": "not-run", "evidence": "no test recorded it in this run"}


@pytest.mark.parametrize("raw", [SCHEMA_1, SCHEMA_2, NOT_RUN, {**SCHEMA_2, "unknown_key": [1]}])
def test_row_reads_and_writes_old_rows_unchanged(raw: dict[str, Any]) -> None:
    """from_dict then to_dict is the row read (no key added, lost or changed), and the typed fields say what the
    keys said; the row still answers the dict reads old readers make."""
    row = Row.from_dict(raw)
    assert row.to_dict() == raw and json.loads(json.dumps(row.to_dict())) == raw
    assert (row.id, row.policy, row.verdict.value) == (raw["id"], raw["policy"], raw["verdict"])
    assert row["id"] == raw["id"] and row.get("signatures") == raw.get("signatures") and dict(row) == raw
    assert ("signatures" in row) == ("signatures" in raw) and row == raw
    if raw.get("counterexample") is not None:
        assert row.counterexample is not None and row.counterexample.kind == "text"
        assert row.counterexample.text == raw["counterexample"]


def test_row_typed_fields_and_schema_3_keys() -> None:
    """A typed row writes its column and counterexample structured beside the old keys, and reads back equal."""
    ce = Counterexample("arguments", {"args": ["JPEG EXIF 2", 17, 11, 0]}, None, ["JPEG EXIF 2", 17, 11, 0])
    row = Row("C20", Column.parse("qwen2.5-vl:SGLANG"), Verdict.FAILS, "AssertionError: x\nmore", counterexample=ce)
    out = row.to_dict()
    assert out["policy"] == "qwen2.5-vl:SGLANG" and out["counterexample"] == ["JPEG EXIF 2", 17, 11, 0]
    assert out["column"] == {"family": "qwen2.5-vl", "label": "SGLANG", "engine": "sglang", "release": None,
                             "path": None}  # fmt: skip
    assert out["counterexample_input"] == {"kind": "arguments", "arguments": {"args": ["JPEG EXIF 2", 17, 11, 0]}}
    back = Row.from_dict(json.loads(json.dumps(out)))
    assert back == row and back.counterexample == ce and back.to_dict() == out
    assert row.failure_line == "AssertionError: x" and row.column.family_name == "qwen2.5-vl"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"policy": "X", "verdict": "holds"}, r"missing \['id'\]"),
        ({"id": "C1", "policy": "X", "verdict": "fine"}, r"verdict 'fine': accepted"),
    ],
)
def test_row_refuses_a_malformed_row(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Row.from_dict(raw)
