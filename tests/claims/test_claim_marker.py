"""The claim of a test is its ``claim`` marker, applied at collection from claims.toml's ``property``.

Why: the claim id used to be read back from test names by regexes while claims.toml's ``property`` was read by
nothing; a renamed test silently lost its claim. Now the suite marks each property's test, the recorder writes the
marker's claim beside the test's outcome, and the name is only the fallback for a test with no entry.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deferlab.properties import suite, verdicts
from deferlab.reference.system.claims import claim_of_node, claims_by_property, load_claims

PLUGIN = """
import json, os

def pytest_collection_finish(session):
    marks = {}
    for item in session.items:
        mark = item.get_closest_marker("claim")
        marks[item.nodeid] = mark.args[0] if mark is not None else None
    with open(os.environ["CLAIM_MARKS_OUT"], "w") as f:
        json.dump(marks, f)
"""


def test_every_claim_maps_to_a_collected_test_through_its_marker(tmp_path: Path) -> None:
    """Collecting the shipped claim tests, each claims.toml ``property`` is a collected test whose marker is that
    claim, and every claim of claims.toml has one."""
    (tmp_path / "claim_marks_plugin.py").write_text(PLUGIN)
    out = tmp_path / "marks.json"
    cmd = [sys.executable, "-m", "pytest", str(suite.SUITE_ROOT / "claims"), "--collect-only", "-q",
           "-p", "no:cacheprovider", "-p", "claim_marks_plugin", "--model", "all"]  # fmt: skip
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path), "CLAIM_MARKS_OUT": str(out)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    marks: dict[str, Any] = json.loads(out.read_text())
    claims = load_claims()
    seen: set[str] = set()
    for prop, cid in claims_by_property().items():
        nodes = [n for n, _ in marks.items() if n.split("[", 1)[0].endswith(prop)]
        assert nodes, f"{cid}: its property {prop!r} is no collected test"
        assert {marks[n] for n in nodes} == {cid}, (cid, prop, {marks[n] for n in nodes})
        seen.add(cid)
    assert seen == set(claims)
    assert all(claim_of_node(n) == m for n, m in marks.items() if m is not None and "test_claim_" in n)


class FakeItem(SimpleNamespace):
    """What `suite._mark_claims` reads of a pytest item: its markers, path and function name."""

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, mark: Any) -> None:
        self.marks.append(getattr(mark, "mark", mark))


def test_a_property_without_a_marker_gets_its_claim_and_an_explicit_marker_wins() -> None:
    root = suite.SUITE_ROOT
    bare = FakeItem(marks=[], path=root / "claims" / "test_gate.py", originalname="test_claim_c1_byte_rule", name="x")
    named = FakeItem(marks=[pytest.mark.claim("C13").mark], path=root / "claims" / "test_families.py",
                     originalname="test_claim_c13_other", name="x")  # fmt: skip
    elsewhere = FakeItem(marks=[], path=Path(__file__), originalname="test_claim_c1_byte_rule", name="x")
    suite._mark_claims([bare, named, elsewhere])  # type: ignore[list-item]
    assert [m.args for m in bare.marks] == [("C1",)] and [m.args for m in named.marks] == [("C13",)]
    assert elsewhere.marks == []  # not a shipped check: no claims.toml entry applies


def test_the_recorder_writes_the_claim_beside_the_outcome() -> None:
    rec = verdicts.Recorder()
    rec.record_property("claims/test_gate.py::test_claim_c1_byte_rule[X]", 3, "failed", 0.5, "boom", claim="C1")
    rec.record_property("test_units.py::test_x", None, "passed", 0.1)
    assert rec.properties[0]["claim"] == "C1" and "claim" not in rec.properties[1]


@pytest.mark.parametrize(
    ("node", "claim"),
    [
        ("properties/claims/test_gate.py::test_claim_c1_byte_rule[PR_33921]", "C1"),
        ("/abs/deferlab/properties/claims/test_served.py::test_claim_c13_served_geometry_equals_checkpoint", "C13"),
        ("claims/test_families.py::test_claim_c14_family_pixels[qwen3-vl:VLLM]", "C14"),  # no entry: the name
        ("claims/test_units.py::test_helper", None),
    ],
)
def test_claim_of_node_reads_claims_toml_first_and_the_name_last(node: str, claim: str | None) -> None:
    assert claim_of_node(node) == claim
