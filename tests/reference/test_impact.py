"""The severity rule (semantics §21.1-§21.3) on the example matrix's real rows, and on those rows changed by one
fact each, so every assertion can fail: a class follows the evidence, not the claim id alone."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deferlab.reference.system import impact
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.impact import LABELS, Severity, classify, parse_fail_on, row_from_versions

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(EXAMPLE.read_text())


def _failing(doc: dict) -> list[tuple[str, str]]:
    return [(c, col) for c, row in doc["verdicts"].items() for col, v in row.items() if v == "fails"]


def test_the_example_rows_get_the_classes_semantics_21_6_names(doc: dict) -> None:
    got = {(c, col): classify(row_from_versions(doc, c, col)) for c, col in _failing(doc)}
    assert got[("C13", "internvl:0.5.23")] == Severity.SEQUENCE  # 2560 tokens vs 256
    assert got[("C14", "internvl:0.5.23")] == Severity.SEQUENCE  # its grid is C13's
    assert got[("C14", "qwen2.5-vl:0.5.23")] == Severity.TOWER_INPUT  # alpha dropped, up to 255 levels
    assert got[("C11", "0.5.23")] == Severity.CRASH  # IndexError
    assert got[("C10", "0.5.23")] == Severity.COST
    assert got[("C3", "0.5.23")] == Severity.FLOAT32_ONLY  # its BF16 difference is a drawn mean/std's only
    assert got[("C4", "vllm-0.34.0")] == Severity.TOWER_INPUT  # 3 of 768 after BF16
    assert got[("C15", "qwen3-vl:vllm-0.34.0")] == Severity.TOWER_INPUT  # 333 FP32 / 3 BF16


def test_every_c15_row_with_no_bf16_difference_is_float32_only_and_the_others_are_not(doc: dict) -> None:
    rows = [row_from_versions(doc, c, col) for c, col in _failing(doc) if c == "C15"]
    zero = [r for r in rows if re.search(r"\b0 BF16|\b0 of \d+ after BF16", r.evidence) and not re.search(r"\b[1-9]\d* (BF16|of \d+ after BF16)", r.evidence)]  # fmt: skip
    assert len(zero) >= 8, "the example has C15 rows of the '490 FP32 / 0 BF16' form"
    assert {classify(r) for r in zero} == {Severity.FLOAT32_ONLY}
    assert {classify(r) for r in rows if r not in zero} == {Severity.TOWER_INPUT}


def test_one_bf16_value_makes_a_float32_only_row_tower_input(doc: dict) -> None:
    row = row_from_versions(doc, "C15", "glm-4.1v:vllm-0.34.0")
    assert classify(row) == Severity.FLOAT32_ONLY
    changed = dataclasses.replace(row, evidence=row.evidence.replace("0 BF16", "1 BF16"))
    assert classify(changed) == Severity.TOWER_INPUT


def test_a_drawn_mean_std_counts_only_when_it_is_not_marked_drawn(doc: dict) -> None:
    row = row_from_versions(doc, "C3", "0.5.23")
    assert "over drawn mean/std" in row.evidence and classify(row) == Severity.FLOAT32_ONLY
    unmarked = dataclasses.replace(row, evidence=row.evidence.replace("over drawn mean/std", "for the shipped one"))
    assert classify(unmarked) == Severity.TOWER_INPUT


def test_an_exception_or_a_one_sided_refusal_in_any_piece_is_a_crash(doc: dict) -> None:
    row = row_from_versions(doc, "C14", "qwen3-vl:0.5.23")
    assert classify(row) == Severity.TOWER_INPUT
    raised = dataclasses.replace(row, evidence=row.evidence + " also ['RGB', 1, 1, 0]: IndexError: boom")
    assert classify(raised) == Severity.CRASH
    refused = dataclasses.replace(row, failure="AssertionError: [PA] 1x1: served side cannot serve it (ValueError: x)")
    assert classify(refused) == Severity.CRASH


def test_a_grid_change_in_a_pixel_claim_is_sequence(doc: dict) -> None:
    row = row_from_versions(doc, "C14", "qwen2.5-vl:vllm-0.34.0")
    assert classify(row) == Severity.TOWER_INPUT
    grid = "AssertionError: [RGB] 12x10: vllm-0.34.0 (qwen2.5-vl, served): grid (1, 2, 2) != checkpoint's (1, 2, 4)"
    assert classify(dataclasses.replace(row, failure=grid)) == Severity.SEQUENCE


def test_an_unknown_claim_is_refused_in_one_line() -> None:
    with pytest.raises(InputValueError, match=r"^claim 'C99': no severity class; accepted: C1, .*C20$"):
        classify(impact.Row(claim="C99", column="x"))


@given(st.sampled_from(list(Severity)), st.sampled_from(list(Severity)))
def test_the_order_is_total_and_worst_is_its_maximum(a: Severity, b: Severity) -> None:
    assert [a < b, a == b, a > b].count(True) == 1
    assert impact.worst([a, b]) == impact.worst([b, a]) == (a if a >= b else b)


def test_the_order_is_crash_sequence_tower_input_float32_only_cost() -> None:
    assert [s.label for s in sorted(Severity, reverse=True)] == [
        "crash", "sequence", "tower-input", "float32-only", "cost",
    ]  # fmt: skip
    assert [s.defect for s in sorted(Severity, reverse=True)] == [True, True, True, False, False]


@given(st.lists(st.sampled_from(sorted(LABELS)), min_size=1, max_size=5))
def test_parse_fail_on_takes_every_comma_list_of_labels(names: list[str]) -> None:
    assert parse_fail_on(",".join(names)) == frozenset(LABELS[n] for n in names)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789 ", min_size=1, max_size=12))
def test_parse_fail_on_refuses_an_unknown_name_in_one_line(name: str) -> None:
    if name.strip().lower() in LABELS:
        return
    with pytest.raises(InputValueError) as e:
        parse_fail_on(f"crash,{name}")
    assert "\n" not in str(e.value)
    assert str(e.value).endswith("accepted: a comma list of crash, sequence, tower-input, float32-only, cost")


# The wording the request-as-sent claim tests write (claims.toml's C16-C20 failure patterns, properties.bytes_trained)
@pytest.mark.parametrize(
    ("claim", "failure", "expected"),
    [
        ("C16", "AssertionError: [30@30.0 64x48 fps=2] frames taken differ from the trained side's: [0, 15] != [0, 14]", Severity.SEQUENCE),
        ("C16", "AssertionError: [1@30.0 64x48] the served side refused what the trained side takes (ValueError: x)", Severity.CRASH),
        ("C17", "AssertionError: [30@30.0 64x48] geometry differs from the trained side's: grid (2, 4, 4) != (1, 4, 4)", Severity.SEQUENCE),
        ("C18", "AssertionError: [30@30.0 64x48] times differ from the trained side's: [0.0, 1.0] != [0.0, 0.5]", Severity.SEQUENCE),
        ("C19", "AssertionError: [30@30.0 64x48] pixels differ from the trained side's: 3 of 2352 values unexplained", Severity.TOWER_INPUT),
        ("C19", "AssertionError: [30@30.0 64x48] pixels differ from the trained side's: frames taken (read back) [0, 2]", Severity.SEQUENCE),
        ("C20", "AssertionError: [JPEG EXIF 6 40x30; data-uri] SGLANG: size 40x30 != trained 30x40", Severity.SEQUENCE),
        ("C20", "AssertionError: [RGBA PNG 8x8; file] VLLM: 12 of 64 pixels differ (first at (0, 0): served [255, 255, 255], trained [3, 4, 5])", Severity.TOWER_INPUT),
        ("C20", "AssertionError: [JPEG truncated 8x8; file] VLLM: the served side took what the trained side refuses (OSError: x)", Severity.CRASH),
    ],
)  # fmt: skip
def test_the_request_as_sent_claims_wording_gets_its_class(claim: str, failure: str, expected: Severity) -> None:
    assert classify(impact.Row(claim=claim, column="c", failure=failure)) == expected
