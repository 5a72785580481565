"""mutate.json's arithmetic for the reviewed survivors: equivalent ones leave the kill rate, CUDA-only ones are
unmeasured on a CPU (the rate is given without them and, beside it, counting them as survivors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deferlab.reports.mutate import render

PLAN = {
    "reference": {}, "targets": [], "system": {"name": "x"}, "profile": "ci", "seed": 0, "population": 7, "operators": 1,
    "jobs": 1, "timing": {"wall_seconds": 1, "reference_seconds": 1},
}  # fmt: skip


def _m(i: str, outcome: str) -> dict:
    return {"id": i, "file": "f.py", "function": "g", "line": 1, "outcome": outcome, "killed_by": [], "seconds": 1}


def test_cuda_only_survivors_are_counted_apart_and_the_rate_is_given_both_ways() -> None:
    records = [_m("k1", "killed"), _m("k2", "killed"), _m("k3", "killed at load"), _m("s", "survived")]
    records += [_m("eq", "survived"), _m("cu", "survived"), _m("cu_killed", "killed")]
    doc = render.document(PLAN, records, {"eq": "never differs"}, {"cu": "Triton only", "cu_killed": "wrong entry"})
    assert doc["counts"]["needs CUDA"] == 1 and doc["counts"]["equivalent"] == 1 and doc["counts"]["survived"] == 1
    assert doc["kill_rate"] == round(4 / 5, 4)  # k1 k2 k3 cu_killed of the five judged (not eq, not cu)
    assert doc["kill_rate_with_cuda_only"] == round(4 / 6, 4)
    assert doc["survivors"] == ["s"]
    text = render.markdown(doc, [])
    assert "needs CUDA 1" in text and "66.7 % counting the CUDA-only mutants as survivors" in text
    assert "- `cu`: Triton only" in text


def test_the_survivors_file_reads_both_tables_and_refuses_a_bad_entry(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[[equivalent]]\nid = "a"\nreason = "r"\n\n[[cuda_only]]\nid = "b"\nreason = "t"\nversion = "1"\n')
    entries = render.load_equivalent(path)
    assert render.equivalent_for(entries, "1") == {"a": "r"}
    assert render.equivalent_for(entries, "1", "needs CUDA") == {"b": "t"}
    assert render.equivalent_for(entries, "2", "needs CUDA") == {}
    path.write_text('[[cuda_only]]\nid = "b"\n')
    with pytest.raises(ValueError, match=r"\[\[cuda_only\]\] entry 1 needs a non-empty 'id' and 'reason'"):
        render.load_equivalent(path)


def test_kills_only_by_units_the_control_changed_too_are_not_counted() -> None:
    """A control "killed" by C16 (stop 36's vLLM campaigns: C16 changed with nothing mutated) leaves every kill by
    C16 alone unjudged: those say nothing; a kill by another unit, a survivor and a load kill by no unit count."""

    def killed(i: str, *by: str, outcome: str = "killed") -> dict:
        return {**_m(i, outcome), "killed_by": list(by)}

    records = [
        killed("a", "C16"),
        killed("b", "C16"),
        killed("c", "C16", "C17"),
        killed("d", "C17"),
        _m("s", "survived"),
    ]
    plan = {**PLAN, "control": {"outcome": "killed", "seen_by": ["C16"], "reasons": {}, "seconds": 1, "run": "cold"}}
    doc = render.document(plan, records, {})
    assert doc["suspect_kills"] == ["a", "b"]
    assert doc["kill_rate"] == round(2 / 3, 4)  # c and d of c, d, s
    text = render.markdown(doc, [])
    assert "the 2 kills by those units alone are suspect and not counted in the kill rate" in text
    nameless = {**plan, "control": {**plan["control"], "seen_by": []}}  # changed with no unit named: nothing counts
    assert render.document(nameless, records, {})["kill_rate"] is None
    survived = {**plan, "control": {**plan["control"], "outcome": "survived", "seen_by": []}}
    assert render.document(survived, records, {})["kill_rate"] == round(4 / 5, 4)
