"""What the runner reads of a results file: typed rows, and each test's claim from the recorder's marker.

Why: every command reads a run through `RunRecord`; its rows must be the typed `Row` (the same JSON for a reader
of the old keys) and its tests' claims must come from what the suite recorded, not from the tests' names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deferlab.reference.system.systems import System
from deferlab.reports.core import runner

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
