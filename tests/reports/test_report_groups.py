"""report.md for a reviewer: the one-screen summary on top, one Details entry per distinct failure, no text cut
without its full text beside it; report.json's ``failure_groups``; ``report --junit`` and the CI job summary.

Rendered from synthetic report dicts (`reports.report.render` reads nothing else), plus one tiny end-to-end report from a
results file for ``--junit`` and ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from deferlab.reports.cli import main
from deferlab.reports.report import render
from deferlab.reports.report import run as runner
from tests.reports.support import CLAIM_IDS, FAST_ARGS, write_config, write_results

POLICIES = ["PR_33921", "RELEASED", "HARDENED", "INTERIM_3D3194F", "INTERIM_418975B", "PRE_PR", "RELEASED_0_5_19"]
C3_EVIDENCE = "0.5/0.5: FP32 differs. AssertionError: 205 of 256 levels differ in FP32 (mean (0.5, 0.5, 0.5))"
LONG_EVIDENCE = "AssertionError: " + " ".join(f"w{i:04d}" for i in range(400))  # about 2,000 characters
LONG_CE = "ArrayImage(" + ", ".join(f"px{i}" for i in range(300)) + ")"


def _row(cid: str, policy: str, verdict: str = "holds", evidence: str = "fine", ce: Any = None) -> dict[str, Any]:
    return {
        "id": cid,
        "statement": f"statement of {cid}",
        "source": "test",
        "policy": policy,
        "verdict": verdict,
        "evidence": evidence,
        "counterexample": ce,
        "ran_on": "deferlab's model",
    }


def _report(claims: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    report = {
        "generated_at": "2026-01-01T00:00:00+00:00",
        "profile": "dev",
        "impl": "deferlab",
        "system": None,
        "systems": None,
        "config": {"name": "kimi-k3", "source": "preset kimi-k3"},
        "decision_source": "x",
        "claims": claims,
        "properties": [],
        "sweeps": [],
        "served": None,
        "sim": [],
        "benchmarks": [],
        "figures": [],
        "regressions": [],
        "notes": [],
        "baseline": None,
        "steps": [{"name": "properties", "status": "ok", "seconds": 1.0, "error": None}],
        "environment": {"python": "3.11"},
    }
    return {**report, **kw}


def _model_claims() -> list[dict[str, Any]]:
    """C3 fails identically under all seven policies, C1 holds everywhere, C12 fails two different ways."""
    rows = [_row("C1", p) for p in POLICIES]
    rows += [_row("C3", p, "fails", C3_EVIDENCE, [[0.5] * 3, [0.5] * 3]) for p in POLICIES]
    rows += [_row("C12", "PR_33921", "fails", "AssertionError: RGBa: a transparent pixel is not background", "a")]
    rows += [_row("C12", "RELEASED", "fails", "KeyError: 'backend'", "b")]
    return rows


def _details_section(md: str) -> str:
    start = md.index("### Failing claims: one entry per distinct failure")
    return md[start : md.index("### Served vs trained")]


def _entries(section: str) -> list[str]:
    """The Details entries: each bullet line that names a claim."""
    return [x for x in section.splitlines() if re.match(r"- \*\*C\d+\*\*", x)]


def test_identical_failures_under_seven_policies_are_one_entry_listing_them_all() -> None:
    """C3's one failure under the seven policies is one entry naming all seven; the old per-policy lines are gone."""
    md = render.render_markdown(_report(_model_claims()))
    entries = [e for e in _entries(_details_section(md)) if e.startswith("- **C3**")]
    assert len(entries) == 1, entries
    assert all(f"`{p}`" in entries[0] for p in POLICIES)
    assert md.count(C3_EVIDENCE) == 1  # the full evidence once, not once per policy column
    assert "C3 / PR_33921" not in md


def test_two_signatures_of_one_claim_are_two_entries() -> None:
    """C12 failing with an AssertionError on one policy and a KeyError on another gives two entries, one each."""
    section = _details_section(render.render_markdown(_report(_model_claims())))
    c12 = [e for e in _entries(section) if e.startswith("- **C12**")]
    assert len(c12) == 2
    assert "`PR_33921`" in c12[0] and "RELEASED" not in c12[0] and "AssertionError" in c12[0]
    assert "`RELEASED`" in c12[1] and "KeyError" in c12[1]


def test_a_policy_named_in_the_evidence_does_not_split_a_group() -> None:
    """C14/C15 name the served path (``deferlab-model/<policy>``): the same flaw under two policies is one entry."""
    claims = [
        _row("C15", p, "fails", f"AssertionError: deferlab-model/{p} (eager): 205 of 256 differ") for p in POLICIES
    ]
    [group] = render.failure_groups(claims)
    assert group["where"] == POLICIES and len(group["members"]) == 7
    other = render.failure_groups([*claims, _row("C15", "X", "fails", "AssertionError: something else")])
    assert len(other) == 2


def _blocks(md: str) -> list[str]:
    """The text inside each <details> block (its fenced lines, unindented)."""
    return ["\n".join(x.strip() for x in b.splitlines()) for b in re.findall(r"<details>(.*?)</details>", md, re.S)]


def test_no_line_is_cut_without_its_full_text_in_a_details_block_beside_it() -> None:
    """A 2,000-character evidence and a long counterexample: every line holding a cut ("…") has the text it cut,
    whole, in a <details> block; in Details the block follows the cut line at once."""
    claims = [_row("C11", p, "fails", LONG_EVIDENCE, LONG_CE) for p in ("PR_33921", "RELEASED")]
    claims += [{**_row("C2", "PR_33921"), "statement": "A very long statement " + "s" * 300}]
    steps = [{"name": "sweeps", "status": "failed", "seconds": 1.0, "error": "RuntimeError: " + "e" * 500}]
    md = render.render_markdown(_report(claims, steps=steps))
    blocks = _blocks(md)
    assert any(LONG_EVIDENCE in b for b in blocks) and any(LONG_CE in b for b in blocks)
    assert md.count(LONG_EVIDENCE) == 1  # once, for both policies
    lines = md.splitlines()
    cut_lines = [i for i, x in enumerate(lines) if "…" in x and "<details>" not in x]
    assert cut_lines, "the fixture must make the renderer cut something"
    for i in cut_lines:
        for frag in re.findall(r"([^`(|]{12,})…", lines[i]):  # each cut's kept text, up to the ellipsis
            frag = frag.strip()[-40:]
            assert any(frag in b and not b.rstrip().endswith(frag) for b in blocks), (lines[i][:120], frag)
    details = _details_section(md).splitlines()
    for j, x in enumerate(details):
        if "…" in x and x.startswith("- **"):
            follow = next(y for y in details[j + 1 :] if y.strip())
            assert follow.strip().startswith("<details>"), (x[:80], follow)


def _summary(md: str) -> list[str]:
    lines = md.splitlines()
    lines = lines[:2] + lines[lines.index("## Summary") :]  # the findings section between them leads report.md
    end = next(i for i, x in enumerate(lines[1:], 1) if x.startswith("## ") and x != "## Summary")
    return lines[:end]


def test_the_summary_is_at_the_top_and_fits_one_screen() -> None:
    """Right after the title: the system, one line per failing claim with where it fails, the baseline; <= 25 lines."""
    md = render.render_markdown(_report(_model_claims()))
    top = _summary(md)
    assert top[0].startswith("# deferlab report") and top[2] == "## Summary"
    assert len(top) <= 25, len(top)
    text = "\n".join(top)
    assert "deferlab's model" in text and all(p in text for p in POLICIES)
    c3 = [x for x in top if x.strip().startswith("- **C3**")]
    assert len(c3) == 1 and "AssertionError: 205 of 256 levels differ" in c3[0]
    assert all(p in c3[0] for p in POLICIES)
    c12 = [x for x in top if x.strip().startswith("- **C12**")]
    assert len(c12) == 1 and "+1 other failure" in c12[0]
    assert "no baseline compared" in text
    assert not [x for x in top if x.strip().startswith("- **C1**")]  # C1 holds: not listed


def test_every_claim_failing_still_fits_one_screen() -> None:
    """Every claim of claims.toml failing on every policy, and twice as many claims: still at most 25 lines (past
    the cap, the rest are counted, not listed)."""
    claims = [_row(c, p, "fails", f"AssertionError: {c} broke", "x") for c in CLAIM_IDS for p in POLICIES]
    top = _summary(render.render_markdown(_report(claims)))
    assert len(top) <= 25, len(top)
    listed = min(len(CLAIM_IDS), render.SUMMARY_CLAIMS)  # past the cap, counted (semantics §20 took it to 20)
    assert sum(1 for x in top if re.match(r"\s+- \*\*C\d+\*\*", x)) == listed
    if len(CLAIM_IDS) > listed:
        assert f"  - and {len(CLAIM_IDS) - listed} more failing claim(s) under *Details*" in top
    many = [_row(f"C{i}", "PR_33921", "fails", f"AssertionError: {i} broke") for i in range(1, 31)]
    top = _summary(render.render_markdown(_report(many)))
    assert len(top) <= 25, len(top)
    assert "  - and 15 more failing claim(s) under *Details*" in top


def test_the_summary_says_what_changed_against_the_baseline() -> None:
    """Nothing changed, N regressions with the first few named, or no baseline."""
    same = "\n".join(_summary(render.render_markdown(_report(_model_claims(), baseline="b.json"))))
    assert "nothing changed against the baseline `b.json`" in same
    regs = [
        {"kind": "claim", "name": f"C{i}/PR_33921", "baseline": "holds", "current": "fails", "detail": ""}
        for i in range(1, 6)
    ]
    changed = "\n".join(_summary(render.render_markdown(_report(_model_claims(), baseline="b.json", regressions=regs))))
    assert "**5 regression(s)** against `b.json`" in changed
    assert "`C1/PR_33921` holds -> fails" in changed and "`C3/PR_33921`" in changed
    assert "`C5/PR_33921`" not in changed and "2 more" in changed


def test_the_system_line_names_real_engines() -> None:
    """With --sglang/--vllm the summary's system line gives SGLang's version and source, and vLLM's version."""
    sglang = {"name": "sglang-0.5.23", "version": "0.5.23", "kind": "wheel", "spec": "0.5.23", "commit": None}
    vllm = {"engine": "vllm", "system": "vllm-0.33.0", "version": "0.33.0", "processor": "KimiK3Processor"}
    rows = [_row("C3", "SGLANG", "fails", C3_EVIDENCE), _row("C13", "VLLM")]
    report = _report(rows, impl="sglang:0.5.23+vllm:0.33.0", systems={"sglang": sglang, "vllm": vllm})
    line = next(x for x in _summary(render.render_markdown(report)) if x.startswith("- System under test"))
    assert "SGLang `0.5.23` (wheel `0.5.23`)" in line and "vLLM `0.33.0`" in line


def test_report_json_keeps_the_failure_groups(tmp_path: Path) -> None:
    """write_report puts failure_groups into report.json: one per (claim, signature), every policy listed."""
    runner.write_report(_report(_model_claims()), tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    got = [(g["claim"], g["where"]) for g in doc["failure_groups"]]
    assert got == [("C3", POLICIES), ("C12", ["PR_33921"]), ("C12", ["RELEASED"])]
    assert doc["failure_groups"][0]["evidence"] == C3_EVIDENCE and len(doc["failure_groups"][0]["members"]) == 7


def test_report_junit_and_step_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``report --junit FILE``: one testcase per (claim, column), fails as failures, not-run as skipped, written
    after the report; $GITHUB_STEP_SUMMARY gets the summary and the verdict table appended."""
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    seen = []
    original = runner.junit.write_junit

    def after_report(rows, path, **kw):
        seen.append((tmp_path / "r" / "report.json").is_file())
        return original(rows, path, **kw)

    monkeypatch.setattr(runner.junit, "write_junit", after_report)
    res = write_results(tmp_path / "results", {"C3/PR_33921": "fails", "C3/RELEASED": "fails", "C7/RELEASED": "n/a"})
    data = json.loads((res / "verdicts.json").read_text())
    data["claims"] = [c for c in data["claims"] if (c["id"], c["policy"]) != ("C4", "RELEASED")]  # -> not-run
    (res / "verdicts.json").write_text(json.dumps(data))
    args = ["report", "--config", str(write_config(tmp_path)), "--from-results", str(res), "--out", str(tmp_path / "r")]
    xml = tmp_path / "ci" / "claims.xml"
    assert main([*args, "--baseline", "none", *FAST_ARGS, "--junit", str(xml)]) == 0
    assert seen == [True]
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None
    cases = list(suite.iter("testcase"))
    assert len(cases) == 2 * len(CLAIM_IDS)
    assert {k: suite.get(k) for k in ("tests", "failures", "skipped", "errors")} == {
        "tests": str(2 * len(CLAIM_IDS)),
        "failures": "2",
        "skipped": "2",
        "errors": "0",
    }
    failed = [c for c in cases if c.find("failure") is not None]
    assert {c.get("classname") for c in failed} == {"deferlab.PR_33921", "deferlab.RELEASED"}
    assert "width=1 height=1" in (failed[0].find("failure").text or "")  # the counterexample rides along
    text = step.read_text()
    assert text.startswith("earlier step\n")  # appended, never replaced
    assert "## Summary" in text and "## Claim verdicts" in text and "| C3 |" in text
    assert "<details><summary>full text" not in text  # the one-screen part only
