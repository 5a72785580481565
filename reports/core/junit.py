"""JUnit XML of claim verdicts: one testcase per (claim, system), so a CI dashboard shows each claim as a test.

Why JUnit: it is what CI systems (GitHub Actions reporters, GitLab, Jenkins)
read as per-test results without knowing deferlab. A failing claim is a
``<failure>`` whose message is the failure, whose type names its severity class (``ClaimFails.sequence``,
semantics §21.3; also a ``severity`` property) and whose text carries the
evidence and the minimal counterexample; ``n/a`` (the system has no such
feature) is ``<skipped>``; ``not-run`` is an ``<error>`` by default, because a
claim nobody checked must not look like one that holds (``deferlab report`` and
``deferlab versions`` ask ``not_run="skipped"``: a matrix cell no test reached
is then a skip saying so, never a pass); ``holds-with-caveat`` passes with the
caveat in ``<system-out>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from deferlab.reports.core.atomic import write_bytes_atomic
from deferlab.reports.core.grouping import failure_text
from deferlab.reports.core.severity import severity


def _system(row: dict[str, Any], system: str | None) -> str:
    return str(row.get("system") or system or row.get("policy") or "unknown")


NOT_RUN = ("error", "skipped")  # what a not-run verdict becomes


def junit_tree(
    rows: Iterable[dict[str, Any]],
    *,
    system: str | None = None,
    suite: str = "deferlab claims",
    not_run: str = "error",
) -> ET.Element:
    """The ``<testsuites>`` element: ``rows`` are verdicts.json's claim rows; a row's ``system`` key, else
    ``system``, else its ``policy`` names the system (a testcase's classname); a row's ``note`` (say, what
    changed against a baseline) is prefixed to its message; ``not_run`` (`NOT_RUN`) is the element a
    ``not-run`` verdict gets."""
    if not_run not in NOT_RUN:
        raise ValueError(f"not_run must be one of {NOT_RUN}, got {not_run!r}")
    rows = list(rows)
    cases = []
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for row in rows:
        verdict = str(row.get("verdict", "not-run"))
        case = ET.Element(
            "testcase",
            {
                "classname": f"deferlab.{_system(row, system)}",
                "name": f"{row['id']} {row.get('statement', '')}".strip(),
                "time": "0",
            },
        )
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", {"name": "verdict", "value": verdict})
        note = f"{row['note']}: " if row.get("note") else ""
        evidence = str(row.get("evidence") or "")
        if verdict == "fails":
            counts["failures"] += 1
            body = f"evidence: {evidence}"
            if row.get("counterexample") is not None:
                body += f"\ncounterexample: {row['counterexample']}"
            found = severity(row)  # semantics §21.3: a dashboard can sort and filter on it
            if found:
                ET.SubElement(props, "property", {"name": "severity", "value": found})
            kind = f"ClaimFails.{found}" if found else "ClaimFails"
            el = ET.SubElement(case, "failure", {"message": note + failure_text(evidence), "type": kind})
            el.text = body
        elif verdict == "n/a":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", {"message": note + (evidence or "n/a: the claim cannot apply")})
        elif verdict == "not-run" and not_run == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", {"message": note + "not run: no test reached it (never read it as holds)"})
        elif verdict == "not-run":
            counts["errors"] += 1
            ET.SubElement(case, "error", {"message": note + (evidence or "not run"), "type": "ClaimNotRun"})
        else:
            ET.SubElement(case, "system-out").text = note + evidence
        counts["tests"] += 1
        cases.append(case)
    root = ET.Element("testsuites", {k: str(v) for k, v in counts.items()})
    suite_el = ET.SubElement(root, "testsuite", {"name": suite, **{k: str(v) for k, v in counts.items()}})
    suite_el.extend(cases)
    return root


def junit_xml(
    rows: Iterable[dict[str, Any]], *, system: str | None = None, suite: str = "deferlab claims", not_run: str = "error"
) -> bytes:
    """`junit_tree` serialized (UTF-8, with the XML declaration)."""
    root = junit_tree(rows, system=system, suite=suite, not_run=not_run)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(
    rows: Iterable[dict[str, Any]],
    path: str | Path,
    *,
    system: str | None = None,
    suite: str = "deferlab claims",
    not_run: str = "error",
) -> Path:
    """`junit_xml` of ``rows`` written atomically to ``path``."""
    return write_bytes_atomic(path, junit_xml(rows, system=system, suite=suite, not_run=not_run))
