"""``deferlab findings`` on the recorded example matrix (semantics §21.4-§21.6): findings worst first, one per
root cause, float32-only folded last, ``--fail-on`` exit statuses, and bad input refused in one line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from deferlab.reference.system.impact import Severity
from deferlab.reports.cli import main
from deferlab.reports.findings.group import group

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, str, float]:
    out = tmp_path_factory.mktemp("findings")
    start = time.monotonic()
    status = main(["findings", str(EXAMPLE), "--out", str(out)])
    took = time.monotonic() - start
    return status, json.loads((out / "findings.json").read_text()), (out / "findings.md").read_text(), took


def _index(found: list[dict], function_part: str) -> int:
    return next(i for i, f in enumerate(found) if function_part in f["function"])


def test_the_internvl_tie_break_is_a_sequence_finding_listed_before_any_float32_only(example: tuple) -> None:
    status, doc, _, took = example
    assert status == 0
    found = doc["findings"]
    internvl = found[_index(found, "InternVLProcessor.dynamic_preprocess")]
    assert internvl["severity"] == "sequence" and internvl["engine"] == "sglang"
    assert {c["claim"] for c in internvl["cells"]} == {"C13", "C14"}  # C14's grid is the same cause
    assert internvl["minimal_input"] == [448, 448]
    assert "2560 tokens" in internvl["served"] and "256 tokens" in internvl["expected"]
    assert internvl["impact"]["sizes"] == "919 of 4,270 swept sizes differ"
    # the share C13's test measured on the realistic distribution (semantics §21.7), not parsed from text
    assert internvl["impact"]["realistic"] == ["184 of 2,000 realistic images (9.2%) on internvl:0.5.23"]
    first_float32 = min(i for i, f in enumerate(found) if f["severity"] == "float32-only")
    assert found.index(internvl) < first_float32
    ranks = [Severity[f["severity"].upper().replace("-", "_")] for f in found]
    assert ranks == sorted(ranks, reverse=True)
    assert took < 60, f"{took:.1f} s"  # semantics §21: measured about 1 s of CPU; generous for a shared machine


def test_c15_rows_without_a_bf16_difference_are_float32_only_cells(example: tuple) -> None:
    _, doc, _, _ = example
    source = json.loads(EXAMPLE.read_text())
    cells = {(c["claim"], c["column"]): c["severity"] for f in doc["findings"] for c in f["cells"]}
    zero = [
        col
        for col, evidence in source["evidence"].items()
        if source["verdicts"]["C15"][col] == "fails" and " 0 BF16" in evidence.get("C15", "")
    ]
    assert len(zero) >= 8
    assert {cells[("C15", col)] for col in zero} == {"float32-only"}
    # the same function, with BF16 differences on other families, makes the finding tower-input
    norm = doc["findings"][_index(doc["findings"], "mm_input_norm.build_mm_input_norm")]
    assert norm["severity"] == "tower-input" and norm["impact"]["bf16_differ_max"] == 3


def test_float32_only_is_folded_into_the_informational_list_at_the_end(example: tuple) -> None:
    _, doc, md, _ = example
    head, informational = md.split("## Informational", 1)
    for f in doc["findings"]:
        where = informational if f["severity"] in ("float32-only", "cost") else head
        assert f"{f['id']} " in where or f"| {f['id']} |" in where, f["id"]
    assert "### [sequence] SGLang 0.5.23" in head


def test_every_failing_cell_is_in_exactly_one_finding_unless_split_by_cause(example: tuple) -> None:
    _, doc, _, _ = example
    source = json.loads(EXAMPLE.read_text())
    failing = {(c, col) for c, row in source["verdicts"].items() for col, v in row.items() if v == "fails"}
    seen = [(c["claim"], c["column"]) for f in doc["findings"] for c in f["cells"]]
    assert set(seen) == failing
    twice = {cell for cell in seen if seen.count(cell) > 1}
    crash_split = {(c["claim"], c["column"]) for f in doc["findings"] if f["severity"] == "crash" for c in f["cells"]}
    assert twice <= crash_split  # a cell is in two findings only when a crash is split from its other cause


def test_fail_on_sequence_exits_1(tmp_path: Path) -> None:
    assert main(["findings", str(EXAMPLE), "--out", str(tmp_path), "--fail-on", "sequence"]) == 1


def test_fail_on_crash_exits_0_on_a_document_without_a_crash(tmp_path: Path) -> None:
    doc = json.loads(EXAMPLE.read_text())
    assert main(["findings", str(EXAMPLE), "--out", str(tmp_path / "a"), "--fail-on", "crash"]) == 1
    for f in group(doc):
        if f.severity == Severity.CRASH:
            for m in f.members:
                doc["verdicts"][m.claim][m.column] = "holds"
    assert not [f for f in group(doc) if f.severity == Severity.CRASH]
    path = tmp_path / "versions.json"
    path.write_text(json.dumps(doc))
    assert main(["findings", str(path), "--out", str(tmp_path / "b"), "--fail-on", "crash"]) == 0
    assert main(["findings", str(path), "--out", str(tmp_path / "c"), "--fail-on", "crash,sequence"]) == 1


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--fail-on", "severe"], "--fail-on 'severe': unknown class 'severe'; accepted: a comma list of crash, "),
        (["RESULTS=other"], "another schema (no columns, verdicts, failure_groups, evidence, provenance)"),
        (["RESULTS=missing"], "no such file; accepted: a versions.json written by `deferlab versions`"),
    ],
    ids=["unknown class", "another schema", "missing file"],
)
def test_bad_input_is_refused_in_one_line_with_exit_2(
    argv: list[str], match: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    results = str(EXAMPLE)
    if argv == ["RESULTS=other"]:
        (tmp_path / "results.json").write_text(json.dumps({"schema_version": 1, "claims": {}}))
        results, argv = str(tmp_path / "results.json"), []
    elif argv == ["RESULTS=missing"]:
        results, argv = str(tmp_path / "nowhere.json"), []
    assert main(["findings", results, "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("deferlab: error: ") and match in err[0], err
    assert not (tmp_path / "out").exists()


def test_the_realistic_share_is_computed_only_from_the_whole_set_of_differing_sizes() -> None:
    from deferlab.reference.system import realistic
    from deferlab.reports.findings.numbers import realistic_share

    screens = {(1920, 1080), (1366, 768)}
    expected = sum(realistic.displayed(r) in screens for r in realistic.images())
    assert expected > 0
    assert realistic_share(screens, 2) == f"{expected:,} of 2,000 realistic images ({expected / 2000:.1%})"
    assert realistic_share(screens, 919).startswith("not measured: the document records 2 of the 919")
    assert realistic_share(screens, None).startswith("not measured")


def test_a_video_pixel_failure_through_other_frames_is_the_sampling_finding_seen_again() -> None:
    column = "qwen3-vl:vllm-0.34.0"
    step = {"vllm-0.34.0 (qwen3-vl, served): sampling": "real: vllm.multimodal.video.sample_frames (own)"}
    doc = {
        "columns": {column: {"engine": "vllm", "version": "0.34.0", "family": "qwen3-vl", "path": None}},
        "verdicts": {"C16": {column: "fails"}, "C19": {column: "fails"}},
        "failure_groups": [
            {"claim": "C16", "where": [column], "failure": "AssertionError: [4@2.0 64x48] frames taken differ from the trained side's: [0, 2] != [0, 1]"},
            {"claim": "C19", "where": [column], "failure": "AssertionError: [4@2.0 64x48] pixels differ from the trained side's: frames taken (read back) [0, 2]"},
        ],
        "evidence": {column: {"C16": "", "C19": ""}},
        "provenance": {column: {"C16": step, "C19": step}},
        "signatures": {},
        "counterexamples": {},
    }  # fmt: skip
    (finding,) = group(doc)
    assert finding.severity == Severity.SEQUENCE and finding.function == "vllm.multimodal.video.sample_frames"
    assert [m.claim for m in finding.members] == ["C16", "C19"] and finding.representative().claim == "C16"


def test_a_crash_the_other_way_round_names_the_checkpoints_refusal_not_the_engine() -> None:
    """An engine that serves what the checkpoint refuses (a one-sided video point): the exception in the failure is
    the trained side's, so the finding says the engine serves it and the checkpoint refuses, never that the engine
    raises it (semantics §21.1); a refusal by the engine in the same cell is still "raises"."""
    from deferlab.reports.findings.numbers import expected_served, measure

    column = "gemma4:vllm-0.34.0"
    step = {"vllm-0.34.0 (gemma4, served): sampling": "real: vllm.multimodal.video.VideoBackend.sample (own)"}
    took = (
        "AssertionError: [1@1 64x48; defaults] the served side took what the trained side refuses (ValueError: "
        "When loading the video with num_frames=32, the requested number of frames exceeds total_num_frames=1)"
    )
    doc = {
        "columns": {column: {"engine": "vllm", "version": "0.34.0", "family": "gemma4", "path": None}},
        "verdicts": {"C16": {column: "fails"}},
        "failure_groups": [{"claim": "C16", "where": [column], "failure": took}],
        "evidence": {column: {"C16": ""}},
        "provenance": {column: {"C16": step}},
        "signatures": {},
        "counterexamples": {},
    }  # fmt: skip
    (finding,) = group(doc)
    assert finding.severity == Severity.CRASH
    expected, served = expected_served(finding.members[0])
    assert expected.startswith("refused (ValueError: When loading the video") and served.startswith("taken and served")
    assert measure(finding) == {"takes": ["ValueError"]}
    raised = "AssertionError: [one; defaults] the served side refused what the trained side takes (DECORDError: bad)"
    doc["failure_groups"][0]["failure"] = f"{took}; {raised.removeprefix('AssertionError: ')}"
    (finding,) = group(doc)
    assert measure(finding) == {"errors": ["DECORDError"], "takes": ["ValueError"]}


def test_a_token_count_difference_is_the_counting_functions_finding_with_its_own_share(example: tuple) -> None:
    """§21.4 (stop 45): a C17 failure naming only the token count is keyed to the provenance's counting step, not
    the sampler the geometry steps name first; §21.7: a video finding beside its cell's crash finding states the
    clips both sides take (the cell's one-sided refusals are the crash finding's), and a sampler's C16/C18 finding
    the larger of its claims' shares."""
    _, doc, md, _ = example
    found = doc["findings"]
    tie = found[_index(found, "Gemma4ProcessingInfo._compute_num_soft_tokens")]
    assert (tie["claims"], tie["severity"], tie["engine"]) == (["C17"], "sequence", "vllm")
    assert "17x1190; num_frames=12] geometry differs from the trained side's: tokens 828 != 840" in tie["failure"]
    assert tie["impact"]["realistic"] == [
        "0 of 200 realistic clips (0.0%), both sides taking them, on gemma4:vllm-0.34.0"
    ]  # the cell's whole count is 2: the two phone clips under 32 frames TRAINED refuses
    assert tie["picture"] is None and "only the token count differs" in tie["no_picture"]
    sampler_c17 = [f for f in found if f["function"].endswith(".VideoBackend.compute_frames_index_to_sample")]
    assert [f["severity"] for f in sampler_c17 if f["claims"] == ["C17"]] == ["crash"]
    sglang = next(
        f
        for f in found
        if f["function"].endswith("_video_decoder_to_tensor") and "C18" in f["claims"] and f["severity"] == "sequence"
    )
    # its frames agree on every realistic clip both sides take (C16: 0), the times told on 198 (C18)
    assert sglang["impact"]["realistic"] == [
        "198 of 200 realistic clips (99.0%) in C18, both sides taking them, on gemma4:0.5.23"
    ]
