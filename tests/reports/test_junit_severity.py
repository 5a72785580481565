"""JUnit carries each failing claim's severity class (issue 32: a CI dashboard can filter on it, semantics §21.3)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from deferlab.reports.core.junit import junit_xml

ROWS = [
    {"id": "C11", "policy": "SGLang", "verdict": "fails", "evidence": "IndexError: index 3 is out of bounds"},
    {"id": "C15", "policy": "SGLang", "verdict": "fails", "evidence": "490 / 768 FP32, 0 BF16 differ"},
    {"id": "C13", "policy": "internvl:SGLang", "verdict": "fails", "evidence": "tokens 2560 != 256 at 448x448"},
    {"id": "C13", "policy": "qwen3-vl:SGLang", "verdict": "holds", "evidence": "exhaustive"},
    {"id": "C13", "policy": "vLLM", "verdict": "fails", "evidence": "x", "severity": "tower-input"},
]


def _cases() -> list[ET.Element]:
    return list(ET.fromstring(junit_xml(ROWS)).iter("testcase"))


def test_each_failing_case_names_its_class_in_a_property_and_its_type() -> None:
    found = []
    for case in _cases():
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        failure = case.find("failure")
        found.append((props.get("severity"), None if failure is None else failure.get("type")))
    assert found == [
        ("crash", "ClaimFails.crash"),
        ("float32-only", "ClaimFails.float32-only"),
        ("sequence", "ClaimFails.sequence"),
        (None, None),  # a claim that holds has no class
        ("tower-input", "ClaimFails.tower-input"),  # a row that carries its class (versions') keeps it
    ]


def test_the_typed_row_carries_the_same_class() -> None:
    from deferlab.reference.system.rows import Row
    from deferlab.reports.core.severity import severity

    typed = [Row.from_dict(r).severity for r in ROWS]
    assert typed == [severity(r) for r in ROWS] == ["crash", "float32-only", "sequence", None, "tower-input"]
