"""What the runner reads of a results file: typed rows, and each test's claim from the recorder's marker.

Why: every command reads a run through `RunRecord`; its rows must be the typed `Row` (the same JSON for a reader
of the old keys) and its tests' claims must come from what the suite recorded, not from the tests' names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deferlab.reference.system.rows import Row, Verdict
from deferlab.reference.system.systems import System
from deferlab.reports.core import runner
from deferlab.reports.core.sides import run_error

ROW = {
    "id": "C13",
    "statement": "s",
    "source": "semantics §13",
    "policy": "qwen3-vl:VLLM host-normalized",
    "verdict": "fails",
    "evidence": "AssertionError: 3 sizes differ",
    "counterexample": [17, 11],
    "provenance": {},
}


def _record(tmp_path: Path, version: int, properties: list[dict[str, Any]], rows: list[dict[str, Any]]) -> Any:
    doc = {"schema_version": version, "profile": "ci", "impl": "vllm:0.34.0", "system": None, "claims": rows,
           "properties": properties}  # fmt: skip
    (tmp_path / "verdicts.json").write_text(json.dumps(doc))
    return runner.read_results(runner.RunRecord(System("vllm", "0.34.0", family="qwen3-vl"), "ci"), tmp_path)


def test_a_tests_claim_is_the_recorded_marker_else_claims_toml_else_its_name(tmp_path: Path) -> None:
    props = [
        {"name": "claims/test_renamed.py::test_anything[X]", "outcome": "failed", "seconds": 1, "claim": "C7"},
        {"name": "claims/test_gate.py::test_claim_c1_byte_rule[X]", "outcome": "passed", "seconds": 1},
        {"name": "claims/test_families.py::test_claim_c14_family[X]", "outcome": "passed", "seconds": 1},
        {"name": "test_units.py::test_helper", "outcome": "passed", "seconds": 1},
    ]
    record = _record(tmp_path, 3, props, [ROW])
    assert record.claim_of("claims/test_renamed.py::test_anything[X]") == "C7"  # the marker, whatever the name
    assert record.claim_of("claims/test_gate.py::test_claim_c1_byte_rule[X]") == "C1"  # claims.toml's property
    assert record.claim_of("claims/test_families.py::test_claim_c14_family[X]") == "C14"  # the name, last
    assert record.claim_of("test_units.py::test_helper") is None
    assert set(vars(record.tests["test_units.py::test_helper"])) == {"outcome", "seconds", "message", "examples"}


def test_rows_are_typed_and_read_as_the_old_dicts_did(tmp_path: Path) -> None:
    """A schema-2 file's rows come back as `Row`s: the record's views by column and claim, and each row's JSON
    unchanged; a dict given later is typed too, and what is no row is left out."""
    other = {**ROW, "id": "C14", "policy": "qwen3-vl:VLLM", "verdict": "holds", "counterexample": None}
    record = _record(tmp_path, 2, [], [ROW, other, {"id": "C15", "policy": "qwen3-vl:VLLM", "verdict": None}, 3])
    assert all(isinstance(r, Row) for r in record.rows) and [r.id for r in record.rows] == ["C13", "C14"]
    assert record.columns() == ["qwen3-vl:VLLM host-normalized", "qwen3-vl:VLLM"]
    assert record.verdicts("qwen3-vl:VLLM") == {"C14": "holds"} and record.recorded()
    assert [r.to_dict() for r in record.mine()] == [ROW, other] and record.to_dict()["rows"] == [ROW, other]
    assert record.rows[0].column.path == "host-normalized" and record.rows[0].verdict is Verdict.FAILS
    record.rows = [other]
    assert isinstance(record.rows[0], Row) and record.rows[0]["policy"] == "qwen3-vl:VLLM"
    assert not runner.RunRecord(System("vllm", "0.34.0"), "ci", rows=[{**other, "verdict": "not-run"}]).recorded()


def test_a_failed_tests_claim_in_the_one_line_is_the_marker_s() -> None:
    """A claim test that failed only on a signature claims.toml does not document is no run error: which claim it
    checks is its marker's (a test whose name carries no claim too), else its name's."""
    row = {**ROW, "id": "C7", "signatures": [{"signature": "s", "partition": "", "documented": False}]}
    failed = {"claims/test_renamed.py::test_anything[X]": "AssertionError: new way"}
    assert run_error(None, failed, [Row.from_dict(row)], {"claims/test_renamed.py::test_anything[X]": "C7"}) is None
    line = run_error(None, failed, [Row.from_dict(row)])
    assert line == "a claim test failed or errored: test_anything[X]: AssertionError: new way"
