"""A claim's outcome is the set of distinct failure signatures its search finds (`claimcheck.collect_failures`).

Why: a claim that already fails on its first pinned example used to stop there, so
a new way of failing inside it changed nothing visible (a mutation of SGLang's
compositing survived because C12, C14 and C15 already failed). The search now
always runs its whole budget and records every (partition, normalized message);
on real code a failure of the system outside its documented pattern is recorded
as ``fails`` and then fails the test; our own harness's crash still raises.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st

from deferlab.properties import claimcheck, seam, verdicts
from deferlab.reference.system import signatures

# A claim id and a label that claims.toml documents no failure for: every failure counts, nothing is asserted.
FREE = ("C12", "NO_SUCH_POLICY")


def two_kinds(value: int) -> None:
    """Fails two ways: even values over 4 with a ValueError, odd ones over 4 with a TypeError."""
    if value > 4 and value % 2 == 0:
        raise ValueError(f"even {value} rejected")
    if value > 4:
        raise TypeError(f"odd {value} refused")


def size_class(value: int) -> str:
    return "small" if value < 10 else "big"


def _records(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def record(claim_id, policy, verdict, evidence, counterexample=None, provenance=None, signatures=None):
        rows.append({"id": claim_id, "policy": policy, "verdict": verdict, "evidence": evidence,
                     "counterexample": counterexample, "signatures": signatures})  # fmt: skip

    monkeypatch.setattr(verdicts, "record_claim", record)
    return rows


def test_two_kinds_over_two_partitions_give_exactly_four_signatures() -> None:
    found = claimcheck.collect_failures(st.integers(0, 20), two_kinds, max_examples=200, partition=size_class)
    assert set(found.by_signature) == {
        "[small] ValueError: even # rejected",
        "[small] TypeError: odd # refused",
        "[big] ValueError: even # rejected",
        "[big] TypeError: odd # refused",
    }
    # One representative each, the smallest found; the primary is the shrunk minimal failure (5 fails first).
    assert found.by_signature["[small] ValueError: even # rejected"].value == 6
    assert found.by_signature["[big] TypeError: odd # refused"].value == 11
    assert found.primary is not None and found.primary.value == 5 and found.pinned == ()


def test_without_a_partition_the_signature_is_the_normalized_message() -> None:
    found = claimcheck.collect_failures(st.integers(0, 20), two_kinds, max_examples=200)
    assert set(found.by_signature) == {"ValueError: even # rejected", "TypeError: odd # refused"}


def test_a_failing_pinned_example_does_not_stop_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned 6 fails (ValueError) first; the search still runs and finds the TypeError; the primary is 6."""
    rows = _records(monkeypatch)
    verdict = claimcheck.verify_claim(*FREE, st.integers(0, 20), two_kinds, pinned=[6], max_examples=100)
    assert verdict == "fails"
    (row,) = rows
    assert row["counterexample"] == 6 and row["evidence"].startswith("ValueError: even 6 rejected")
    assert [s["signature"] for s in row["signatures"]] == ["TypeError: odd # refused", "ValueError: even # rejected"]
    assert [s["counterexample"] for s in row["signatures"]] == [5, 6]
    assert signatures.signature_set({"verdict": "fails", "signatures": row["signatures"]}) == {
        "TypeError: odd # refused",
        "ValueError: even # rejected",
    }


def test_a_search_that_stops_meeting_new_signatures_ends_after_its_patience() -> None:
    """One failure kind on every input: the search stops `patience` examples after the pinned failure, not at
    the budget; a holding check runs the whole budget."""
    calls: list[int] = []

    def always(value: int) -> None:
        calls.append(value)
        raise ValueError("always")

    claimcheck.collect_failures(st.integers(0, 10**6), always, pinned=[0], max_examples=200)
    assert len(calls) == 1 + claimcheck.patience(200) == 51
    calls.clear()
    claimcheck.collect_failures(st.integers(0, 10**6), lambda v: calls.append(v), max_examples=200)
    assert len(calls) == 200


def test_a_new_signature_restarts_the_patience() -> None:
    """Failures of a new kind every 30 examples (patience 50) keep the search going to its budget."""
    calls: list[int] = []

    def every_thirty(value: int) -> None:
        calls.append(value)
        raise ValueError(f"kind {chr(65 + len(calls) // 30)}")

    found = claimcheck.collect_failures(st.integers(0, 10**6), every_thirty, max_examples=200)
    assert len(calls) >= 200 and len(found.by_signature) >= 7


def test_a_holding_claim_records_an_empty_set(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _records(monkeypatch)
    assert claimcheck.verify_claim(*FREE, st.integers(0, 4), two_kinds, max_examples=50) == "holds"
    assert rows[0]["signatures"] == [] and signatures.signature_set(rows[0]) == frozenset()


def test_the_set_is_the_same_on_two_runs_under_the_ci_profile() -> None:
    """Derandomized (ci): two searches of a space far larger than the budget meet the same signatures."""

    def many(value: int) -> None:
        raise ValueError(f"class {chr(65 + value % 26)}{chr(65 + value // 26 % 26)}")

    previous = settings.get_current_profile_name()
    from deferlab.properties import plugin

    plugin.register_profiles()
    settings.load_profile("ci")
    try:
        runs = [claimcheck.collect_failures(st.integers(0, 10**9), many, max_examples=40) for _ in range(2)]
    finally:
        settings.load_profile(previous)
    assert runs[0].records() == runs[1].records()
    assert 10 < len(runs[0].by_signature) <= 40  # many distinct ones: a random search would not repeat them


def test_an_undocumented_failure_of_the_model_is_recorded_as_new_and_fails_only_under_strict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """For the model, a failure the [claim.failure] pattern does not name is still the verdict: recorded as
    ``fails`` with that signature marked ``documented: false`` (a user's report shows it as new, never as
    ``not-run``); `assert_expected` fails the test on it only under the strict switch."""
    rows = _records(monkeypatch)
    documented = "Kimi-K3 cannot mix deferred and preprocessed image features"

    def check(value: int) -> None:
        if value == 0:
            raise ValueError(documented)
        raise AttributeError("'NoneType' object has no attribute 'items'")

    verdict = claimcheck.verify_claim("C7", "PR_33921", st.integers(0, 3), check, pinned=[0], max_examples=20)
    assert verdict == "fails" and verdict.undocumented == (
        "AttributeError: 'NoneType' object has no attribute 'items'",
    )
    (row,) = rows
    marked = {s["signature"]: s.get("documented", True) for s in row["signatures"]}
    assert marked == {f"ValueError: {documented}": True, verdict.undocumented[0]: False}
    monkeypatch.delenv("DEFERLAB_STRICT", raising=False)
    claimcheck.assert_expected("C7", "PR_33921", verdict)  # a user's run: the verdict is what it is
    monkeypatch.setenv("DEFERLAB_STRICT", "1")
    with pytest.raises(AssertionError, match="not as claims.toml documents: AttributeError"):
        claimcheck.assert_expected("C7", "PR_33921", verdict)


# --- real code: the system's own crash is a verdict; our harness's is an error -----------------------------------


def _as_sglang(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Pretend the session runs real SGLang 0.5.23 from ``root`` (C14 has an [claim.engines] row with a pattern)."""
    source = SimpleNamespace(engine=SimpleNamespace(name="sglang"), version="0.5.23", git_rev=None, root=str(root))
    monkeypatch.setattr(seam, "ACTIVE", seam.Recording(SimpleNamespace(real_code=True, source=source)))
    row = claimcheck.engine_expectation("C14")
    assert row is not None and row.verdict == "fails" and row.key in claimcheck.CLAIMS["C14"].failures


def _system_function(root: Path) -> Any:
    """A function whose code lives under the fake system's ``root``: what it raises is raised inside the system."""
    path = root / "fake_sglang_processor.py"
    path.write_text("def serve(value):\n    raise RuntimeError(f'shape mismatch at {value}')\n")
    spec = importlib.util.spec_from_file_location("fake_sglang_processor", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.serve


def test_a_crash_inside_the_system_is_recorded_as_fails_then_fails_the_test(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _as_sglang(monkeypatch, tmp_path)
    rows = _records(monkeypatch)
    serve = _system_function(tmp_path)
    verdict = claimcheck.verify_claim("C14", "SGLANG", st.integers(0, 3), serve, max_examples=10)
    assert verdict == "fails" and verdict.undocumented == ("RuntimeError: shape mismatch at #",)
    (row,) = rows  # recorded before anything is asserted
    assert row["verdict"] == "fails" and row["evidence"] == "RuntimeError: shape mismatch at 0"
    assert row["signatures"] == [
        {
            "signature": "RuntimeError: shape mismatch at #",
            "partition": "",
            "counterexample": 0,
            "error": "RuntimeError: shape mismatch at 0",
            "documented": False,
        }
    ]
    monkeypatch.setenv("DEFERLAB_STRICT", "1")
    with pytest.raises(
        AssertionError,
        match=r"^C14 on sglang-0\.5\.23 fails, but not as claims\.toml documents: RuntimeError: shape mismatch at #$",
    ):
        claimcheck.assert_expected("C14", "SGLANG", verdict)


def test_the_claims_own_assertion_outside_the_pattern_is_recorded_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An AssertionError of the check that the row's pattern does not explain: recorded, then the test fails."""
    _as_sglang(monkeypatch, tmp_path)
    rows = _records(monkeypatch)

    def check(value: int) -> None:
        assert value < 2, f"[RGB] {value}x1: a new kind of difference"

    verdict = claimcheck.verify_claim("C14", "SGLANG", st.integers(0, 3), check, max_examples=10)
    assert rows[0]["verdict"] == "fails" and verdict.undocumented == (
        "AssertionError: [RGB] #: a new kind of difference",
    )
    monkeypatch.setenv("DEFERLAB_STRICT", "1")
    with pytest.raises(AssertionError, match="fails, but not as claims.toml documents"):
        claimcheck.assert_expected("C14", "SGLANG", verdict)


def test_a_documented_real_code_failure_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _as_sglang(monkeypatch, tmp_path)
    _records(monkeypatch)

    def check(value: int) -> None:
        raise AssertionError(f"[RGB] {value}x2: sglang-eager: 3 of 12 values unexplained (...)")

    verdict = claimcheck.verify_claim("C14", "SGLANG", st.integers(0, 3), check, max_examples=10)
    assert verdict == "fails" and verdict.undocumented == ()
    claimcheck.assert_expected("C14", "SGLANG", verdict)


def test_an_exception_in_our_harness_still_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Raised in deferlab's own code (this file, not under the system's root), not an AssertionError: our bug."""
    _as_sglang(monkeypatch, tmp_path)
    rows = _records(monkeypatch)

    def harness(value: int) -> None:
        raise KeyError("driver lost its state")

    with pytest.raises(claimcheck.UnexpectedFailure, match="KeyError"):
        claimcheck.verify_claim("C14", "SGLANG", st.integers(0, 3), harness, max_examples=10)
    assert rows == []


def test_a_crash_of_the_system_while_building_evidence_is_written_into_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An evidence table runs the system (C15's level table): its crash is the system's, kept as text beside the
    verdict the search found; the same crash in our own harness still raises."""
    _as_sglang(monkeypatch, tmp_path)
    rows = _records(monkeypatch)
    serve = _system_function(tmp_path)
    verdict = claimcheck.verify_claim(
        "C14", "SGLANG", st.integers(0, 3), lambda v: None, max_examples=5, evidence=lambda: serve(7)
    )
    assert verdict == "holds"
    assert (
        "the evidence could not be computed: the system raised RuntimeError: shape mismatch at 7" in rows[0]["evidence"]
    )

    def ours() -> str:
        raise KeyError("table lost")

    with pytest.raises(KeyError):
        claimcheck.verify_claim("C14", "SGLANG", st.integers(0, 3), lambda v: None, max_examples=5, evidence=ours)


def test_signatures_normalize_printed_values_not_names() -> None:
    got = signatures.signature("AssertionError: at call site 'request': in the request [True, False], alone [1, 2]")
    assert got == "AssertionError: at call site 'request': in the request #, alone #"
    assert (
        signatures.signature("AssertionError: RGBa: [[0 255] [1 2]]", "RGBa, alpha band")
        == "[RGBa, alpha band] AssertionError: RGBa: #"
    )
    assert signatures.signature("IndexError: x") != signatures.signature("ValueError: x")
    assert signatures.signature_set({"verdict": "fails", "evidence": "text. IndexError: tuple index 3"}) == {
        "IndexError: tuple index #"
    }
    assert signatures.signature_set({"verdict": "holds", "evidence": "IndexError: x"}) == frozenset()
