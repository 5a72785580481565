"""``deferlab findings --patched``: whether a patch fixes each finding, by root cause (issue 32 item 4).

The shipped pair: the newest-release matrix and SGLang 0.5.23 + the InternVL tie-break patch on C13-C15
(`reports/example/patched-internvl`, whose README states what was expected before it ran)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reports.findings import patched, render
from deferlab.reports.findings.group import group

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example"
BASE = json.loads((EXAMPLE / "versions-newest" / "versions.json").read_text())
PATCHED = json.loads((EXAMPLE / "patched-internvl" / "versions.json").read_text())
TIE = "sglang.srt.multimodal.processors.internvl.InternVLProcessor.dynamic_preprocess"


def _judged(other: dict) -> dict:
    findings = group(BASE)
    result = render.document(findings, "base.json")
    patched.judge(findings, result, other, "patched.json")
    return result


def test_the_tie_break_finding_is_fixed_and_the_hidden_pixel_cause_is_new() -> None:
    result = _judged(PATCHED)
    tie = next(d for d in result["findings"] if d["function"] == TIE)
    assert tie["patch"]["status"] == "fixed"
    assert {(c["claim"], c["cause"]) for c in tie["patch"]["cells"]} == {
        ("C13", "holds"),
        ("C14", "fails, not here any more"),  # C14 still fails, for its pixels, in another function
    }
    assert result["patched"]["patches"] == ["sglang-0.5.23+patch.5c8f6af9"]
    assert [n["function"].rsplit(".", 1)[1] for n in result["patched"]["new"]] == ["process_mm_data_async"]
    ran = [d for d in result["findings"] if d["patch"]["status"] != "not run with the patch"]
    assert [d["function"] for d in ran] == [TIE]  # the patched run ran InternVL's C13-C15 on SGLang only
    md = render.markdown(result)
    assert "**With the patch** (`sglang-0.5.23+patch.5c8f6af9`" in md and "1 fixed, 71 not run" in md
    assert md.count("**With the patch.**") == 1


def test_a_cause_still_failing_in_its_function_is_not_fixed() -> None:
    other = copy.deepcopy(PATCHED)
    other["verdicts"]["C13"]["internvl:0.5.23"] = "fails"  # the unpatched C13 cell: its failure, its provenance
    for key in ("evidence", "signatures", "provenance", "counterexamples"):
        other[key]["internvl:0.5.23"]["C13"] = BASE[key]["internvl:0.5.23"]["C13"]
    other["failure_groups"] = BASE["failure_groups"]
    tie = next(d for d in _judged(other)["findings"] if d["function"] == TIE)
    assert tie["patch"]["status"] == "partly fixed"
    assert ("C13", "still fails here") in {(c["claim"], c["cause"]) for c in tie["patch"]["cells"]}


def test_a_document_without_a_patch_or_sharing_no_column_is_refused() -> None:
    with pytest.raises(UsageError, match=r"--patched 'b\.json': no release in it was run with --patch; accepted"):
        patched.check(BASE, BASE, "b.json")
    other = copy.deepcopy(PATCHED)
    other["columns"] = {"internvl:0.5.99": other["columns"]["internvl:0.5.23"]}
    with pytest.raises(UsageError, match=r"none of its columns is one of RESULTS'"):
        patched.check(BASE, other, "p.json")
