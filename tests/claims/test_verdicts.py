"""The verdict recorder (`verdicts`): merging parts, filling gaps, atomic output, faithful counterexamples."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest
import torch
from hypothesis import given
from PIL import Image

from deferlab.properties import strategies as s
from deferlab.properties import verdicts
from deferlab.reference.system.policies import POLICIES

CLAIMS = {
    "C1": verdicts.Claim("C1", "one", "src", "prop", {"PR_33921": "holds", "RELEASED": "holds"}),
    "C2": verdicts.Claim("C2", "two", "src", "prop", {"PRE_PR": "fails"}),
}
FIXED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_merge_fills_unrecorded_pairs_with_not_run_and_last_record_wins():
    """Every (claim, expected policy) pair appears once; what no test recorded is "not-run"."""
    part_a = {"claims": [{"id": "C1", "policy": "PR_33921", "verdict": "fails", "evidence": "a"}], "properties": []}
    part_b = {
        "claims": [{"id": "C1", "policy": "PR_33921", "verdict": "holds", "evidence": "b", "counterexample": None}],
        "properties": [{"name": "t", "examples": 3, "outcome": "passed", "seconds": 0.1}],
    }
    doc = verdicts.merge([part_a, part_b], profile="ci", impl="x", claims=CLAIMS, now=lambda: FIXED)
    rows = {(r["id"], r["policy"]): r for r in doc["claims"]}
    assert set(rows) == {("C1", "PR_33921"), ("C1", "RELEASED"), ("C2", "PRE_PR")}
    assert rows[("C1", "PR_33921")]["verdict"] == "holds" and rows[("C1", "PR_33921")]["evidence"] == "b"
    assert rows[("C1", "RELEASED")]["verdict"] == "not-run" and rows[("C2", "PRE_PR")]["verdict"] == "not-run"
    assert doc["schema_version"] == 3 and doc["strict"] is False and doc["generated_at"] == "2026-01-02T03:04:05+00:00"
    assert doc["profile"] == "ci" and doc["impl"] == "x" and doc["properties"][0]["examples"] == 3
    assert rows[("C1", "RELEASED")]["statement"] == "one"


def test_merge_directory_writes_atomically_and_removes_parts(tmp_path):
    """Parts are merged into one valid JSON file and deleted; no temp file is left behind."""
    parts = tmp_path / "parts" / "run"
    for name in ("gw0", "gw1"):
        rec = verdicts.Recorder()
        rec.record_claim("C1", "PR_33921" if name == "gw0" else "RELEASED", "holds", name)
        rec.write_part(parts, name)
    out = verdicts.merge_directory(parts, tmp_path / "verdicts.json", profile="dev", impl="deferlab")
    doc = json.loads(out.read_text())
    got = {r["policy"]: r["evidence"] for r in doc["claims"] if r["id"] == "C1"}
    assert got["PR_33921"] == "gw0" and got["RELEASED"] == "gw1"
    assert not parts.exists(), "merged parts are removed"
    assert not list(tmp_path.rglob("*.tmp")), "no temp file is left behind"


def test_a_run_that_records_no_claim_keeps_the_previous_verdicts(tmp_path):
    """A run with no claim recorded (one unit-test file) leaves the last full run's verdicts.json as it was."""
    out_path = tmp_path / "verdicts.json"
    parts = tmp_path / "parts" / "run"
    rec = verdicts.Recorder()
    rec.record_claim("C1", "PR_33921", "holds", "full run")
    rec.write_part(parts, "controller")
    verdicts.merge_directory(parts, out_path, profile="ci", impl="deferlab")
    before = out_path.read_bytes()
    empty = verdicts.Recorder()
    empty.record_property("test_x", 3, "passed", 0.1)
    empty.write_part(parts, "controller")
    assert verdicts.merge_directory(parts, out_path, profile="dev", impl="deferlab") is None
    assert out_path.read_bytes() == before and not parts.exists()
    fresh = tmp_path / "fresh.json"
    empty.write_part(parts, "controller")
    assert verdicts.merge_directory(parts, fresh, profile="dev", impl="deferlab") == fresh, "first run still writes"


def test_unknown_verdicts_are_rejected():
    """A recorder refuses a verdict outside the schema's vocabulary, naming the accepted ones."""
    with pytest.raises(ValueError, match="holds-with-caveat"):
        verdicts.Recorder().record_claim("C1", "PR_33921", "maybe", "")


def test_claims_toml_is_valid_and_covers_the_required_policies():
    """claims.toml lists C1..C20 (C16-C20: requests as sent, semantics §20), each with an expectation for every
    modelled policy, in the schema's vocabulary."""
    claims = verdicts.load_claims()
    assert [f"C{i}" for i in range(1, 21)] == list(claims)
    for claim in claims.values():
        assert set(claim.expected) == set(POLICIES), (claim.id, sorted(set(POLICIES) ^ set(claim.expected)))


@given(image=s.pil_images(max_side=4, modes=tuple(m for m in s.ALL_MODES if m not in ("1",))))
def test_small_pil_counterexamples_can_be_rebuilt(image):
    """A recorded small PIL counterexample carries mode, size and bytes enough to rebuild it exactly."""
    text = verdicts.describe(image)
    hex_data = text.split("bytes.fromhex('")[1].split("')")[0]
    rebuilt = Image.frombytes(image.mode, image.size, bytes.fromhex(hex_data))
    assert rebuilt.tobytes() == image.tobytes() and f"mode={image.mode!r}" in text


def test_tensors_and_nested_values_are_described():
    """Tensors and arrays keep dtype, shape and (when small) values; nesting survives as lists."""
    doc = verdicts.describe_value({"a": [torch.arange(4, dtype=torch.uint8), np.zeros((2, 2), np.float32)], "b": 1})
    assert doc["b"] == 1 and "torch.uint8" in doc["a"][0] and "[0, 1, 2, 3]" in doc["a"][0]
    assert "float32" in doc["a"][1] and "(2, 2)" in doc["a"][1]


def _raise(exc: BaseException):
    def check(_value):
        raise exc

    return check


def test_a_failure_the_pattern_does_not_name_is_recorded_marked_new(monkeypatch):
    """A claim expected to fail that fails another way still records ``fails`` (never ``not-run``), the new way
    marked ``documented: false``; a pinned value is searched the same way."""
    from hypothesis import strategies as st

    from deferlab.properties import claimcheck

    recorded = []
    monkeypatch.setattr(verdicts, "record_claim", lambda *a, **k: recorded.append((a, k)))
    assert claimcheck.expected_verdict("C7", "PR_33921") == "fails"
    got = claimcheck.verify_claim("C7", "PR_33921", st.just(0), _raise(AttributeError("'NoneType' has no 'items'")))
    assert got == "fails" and got.undocumented == ("AttributeError: 'NoneType' has no 'items'",)
    got = claimcheck.verify_claim("C7", "PR_33921", st.just(0), _raise(AttributeError("x")), pinned=[1])
    assert got.undocumented == ("AttributeError: x",)
    assert [s["documented"] for _, k in recorded for s in k["signatures"]] == [False, False]
    recorded.clear()
    documented = ValueError("Kimi-K3 cannot mix deferred and preprocessed image features")
    got = claimcheck.verify_claim("C7", "PR_33921", st.just(0), _raise(documented))
    assert got == "fails" and got.undocumented == ()
    assert [a[:3] for a, _ in recorded] == [("C7", "PR_33921", "fails")]


def test_every_expected_failure_names_how_it_fails():
    """Each (claim, policy) expected to fail has a failure regex in claims.toml; an unnamed one is rejected."""
    for claim in verdicts.load_claims().values():
        for policy, verdict in claim.expected.items():
            assert verdict != "any", f"{claim.id} {policy}: pin the expected verdict"
            if verdict == "fails":
                assert claim.failures.get(policy), f"{claim.id} {policy} expects fails without a [claim.failure]"


def test_claims_without_a_failure_pattern_are_rejected(tmp_path):
    """load_claims refuses an expected "fails" that does not say how it fails."""
    bad = tmp_path / "claims.toml"
    bad.write_text('[[claim]]\nid="X"\nstatement="s"\nsource="s"\nproperty="p"\n[claim.expected]\nPR_33921="fails"\n')
    with pytest.raises(ValueError, match="names no"):
        verdicts.load_claims(bad)
