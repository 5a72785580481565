"""The findings section leading report.md and the adapter under it (`reports.findings.fromreport`): a report's claim
rows laid out as the versions-like document `group` reads, on constructed report dicts (no engine runs)."""

from __future__ import annotations

from typing import Any

from deferlab.reference.system.systems import MODEL
from deferlab.reports.findings import fromreport
from deferlab.reports.findings.group import group
from deferlab.reports.report.render import render_markdown

SGLANG = {"name": "sglang-0.5.23", "version": "0.5.23", "kind": "wheel", "spec": "0.5.23", "commit": None}
TILING = "real: sglang.srt.multimodal.processors.internvl.InternVLProcessor.dynamic_preprocess"
C13_FAILURE = (
    "AssertionError: [448x448]: sglang-0.5.23 (internvl, served): 1344x1344 grid (3, 3, 10) 2560 tokens != "
    "checkpoint's 448x448 grid (1, 1, 1) 256 tokens"
)


def _row(cid: str, policy: str, verdict: str = "holds", evidence: str = "fine", **kw: Any) -> dict[str, Any]:
    return {"id": cid, "statement": f"statement of {cid}", "source": "test", "policy": policy, "verdict": verdict,
            "evidence": evidence, "counterexample": kw.pop("ce", None), "provenance": kw.pop("provenance", {}),
            "ran_on": "real code", **kw}  # fmt: skip


def _engine_rows() -> list[dict[str, Any]]:
    """A crash (C11 on SGLANG), a sequence change (C13 on InternVL), a float32-only C15, a holding C1 and C9 (no
    severity class in the findings' sense: it is left out only if it holds)."""
    return [
        _row("C1", "SGLANG"),
        _row("C11", "SGLANG", "fails", "IndexError: index 3 is out of bounds for dimension 0 with size 3", ce="3x4",
             provenance={"sglang-0.5.23 (kimi-k3, served): materialize": "real: KimiK3ForConditionalGeneration.get_image_feature"}),
        _row("C13", "internvl:SGLANG", "fails", "exhaustive: 36 sizes; 1 sizes differ " + C13_FAILURE, ce=[448, 448],
             provenance={"sglang-0.5.23 (internvl, served): tiling": TILING},
             impact={"map": {"kind": "token-map", "widths": [448], "heights": [448], "served": [[2560]], "trained": [[256]]}},
             figure={"kind": "video-strips"}),
        _row("C15", "SGLANG", "fails", "AssertionError: 490 FP32 / 0 BF16 of 768 values differ",
             provenance={"sglang-0.5.23 (kimi-k3, served): normalize": "real: sglang.srt.multimodal.kimi.normalize"}),
    ]  # fmt: skip


def _report(rows: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    report = {
        "generated_at": "2026-01-01T00:00:00+00:00", "profile": "ci", "impl": "sglang:0.5.23", "system": SGLANG,
        "systems": {"sglang": SGLANG}, "config": {"name": "kimi-k3", "source": "preset kimi-k3"},
        "decision_source": "x", "claims": rows, "properties": [], "sweeps": [], "served": None, "sim": [],
        "benchmarks": [], "figures": [], "regressions": [], "notes": [], "baseline": None,
        "steps": [{"name": "properties", "status": "ok", "seconds": 1.0, "error": None}],
        "environment": {"python": "3.11"},
    }  # fmt: skip
    return {**report, **kw}


def test_the_adapter_lays_the_claim_rows_out_as_a_versions_document() -> None:
    doc = fromreport.versions_like(_report(_engine_rows()))
    assert doc["columns"]["SGLANG"] == {"release": "0.5.23", "engine": "sglang", "version": "0.5.23",
                                        "family": "kimi-k3", "path": None}  # fmt: skip
    assert doc["columns"]["internvl:SGLANG"]["family"] == "internvl"
    assert doc["verdicts"]["C1"] == {"SGLANG": "holds"} and doc["verdicts"]["C13"] == {"internvl:SGLANG": "fails"}
    assert doc["counterexamples"]["internvl:SGLANG"]["C13"] == [448, 448]
    assert doc["impact"]["internvl:SGLANG"]["C13"]["map"]["served"] == [[2560]]
    assert doc["figures"]["internvl:SGLANG"]["C13"] == {"kind": "video-strips"}
    assert doc["provenance"]["internvl:SGLANG"]["C13"] == {"sglang-0.5.23 (internvl, served): tiling": TILING}
    assert {(g["claim"], tuple(g["where"])) for g in doc["failure_groups"]} == {
        ("C11", ("SGLANG",)), ("C13", ("internvl:SGLANG",)), ("C15", ("SGLANG",))
    }  # fmt: skip
    c13 = next(g for g in doc["failure_groups"] if g["claim"] == "C13")
    assert c13["failure"].startswith("AssertionError: [448x448]") and "2560 tokens" in c13["failure"]
    assert doc["signatures"]["SGLANG"]["C11"] == ["IndexError: index # is out of bounds for dimension # with size #"]
    assert "C1" not in doc["signatures"].get("SGLANG", {})  # a holding row has no failure signature


def test_the_adapter_reads_a_path_column_and_the_models_policies() -> None:
    rows = [_row("C14", "qwen3-vl:VLLM host-normalized", "fails", "AssertionError: level 3 served, 2 trained"),
            _row("C12", "PR_33921", "fails", "KeyError: 'backend'"), _row("C99", "PR_33921", "fails", "x")]  # fmt: skip
    vllm = {"engine": "vllm", "system": "vllm-0.34.0", "version": "0.34.0", "processor": None}
    doc = fromreport.versions_like(_report(rows, impl="vllm:0.34.0", systems={"vllm": vllm}))
    assert doc["columns"]["qwen3-vl:VLLM host-normalized"] == {
        "release": "0.34.0", "engine": "vllm", "version": "0.34.0", "family": "qwen3-vl", "path": "host-normalized"
    }  # fmt: skip
    assert doc["columns"]["PR_33921"]["engine"] == MODEL and doc["columns"]["PR_33921"]["version"] == "PR_33921"
    assert "C99" not in doc["verdicts"]  # no severity class: not a finding's cell
    found = group(doc)
    assert {(f.engine, f.severity.label) for f in found} == {("vllm", "tower-input"), (MODEL, "crash")}


def test_the_findings_section_leads_report_md_worst_first_with_the_informational_folded() -> None:
    md = render_markdown(_report(_engine_rows()))
    lines = md.splitlines()
    head = lines.index("## Findings: one per root cause, worst first (semantics §21.4)")
    summary = lines.index("## Summary")
    assert lines[0].startswith("# deferlab report") and head == 2 and head < summary
    section = [x for x in lines[head + 1 : summary] if x.startswith("- ")]
    assert (
        section[0]
        == "- 3 findings (1 crash, 1 sequence, 0 tower-input, 1 float32-only, 0 cost) from this report's claim rows"
    )
    assert section[1].startswith("- F1 [crash] SGLang 0.5.23 `KimiK3ForConditionalGeneration.get_image_feature` (C11;")
    assert section[1].endswith("raises IndexError")
    assert section[2].startswith(
        "- F2 [sequence] SGLang 0.5.23 `" + TILING.removeprefix("real: ") + "` (C13; internvl)"
    )
    assert "2560 served vs 256 trained (10.00x) at the minimal input" in section[2]
    assert section[3] == "- informational (1): F3 `sglang.srt.multimodal.kimi.normalize`"
    assert len(section) == 4  # the float32-only finding has no line of its own


def test_a_report_on_deferlabs_model_gets_findings_named_for_the_model() -> None:
    rows = [_row("C12", p, "fails", "KeyError: 'backend'") for p in ("PR_33921", "RELEASED")]
    md = render_markdown(_report(rows, impl="deferlab", system=None, systems=None))
    section = md.split("## Findings", 1)[1].split("## Summary", 1)[0]
    assert "- 1 findings (1 crash," in section
    assert (
        "F1 [crash] deferlab's model PR_33921-RELEASED `(no function recorded: C12)`" in section
        and "raises KeyError" in section
    )


def test_no_failing_claim_is_said_in_one_line() -> None:
    md = render_markdown(_report([_row("C1", "SGLANG"), _row("C13", "SGLANG")]))
    section = md.split("## Findings", 1)[1].split("## Summary", 1)[0]
    assert [x for x in section.splitlines() if x.startswith("- ")] == [
        "- No finding: no claim with a severity class fails."
    ]
