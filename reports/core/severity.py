"""A failing claim row's severity class (semantics §21.3), for every writer that shows or gates a row.

Why here: the report's tables, its ``--fail-on`` and the JUnit file of report, versions and compare all class the
same row the same way; the rule itself is `reference.system.impact.classify`, this only builds its input from a
verdicts.json row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.impact import CLAIM_CLASS, Row, classify
from deferlab.reference.system.signatures import signature_set
from deferlab.reports.core import grouping


def severity(row: Mapping[str, Any]) -> str | None:
    """A failing claim row's class label, read off what it recorded (a ``severity`` the row already carries, as
    versions' rows do, first); None when it does not fail or its claim has no class."""
    if row.get("verdict") != "fails":
        return None
    if row.get("severity"):
        return str(row["severity"])
    if str(row.get("id")) not in CLAIM_CLASS:
        return None
    evidence = str(row.get("evidence") or "")
    return classify(
        Row(
            claim=str(row["id"]),
            column=str(row.get("policy", "")),
            failure=grouping.failure_text(evidence),
            evidence=evidence,
            signatures=tuple(sorted(signature_set(row))),
            counterexample=row.get("counterexample"),
        )
    ).label
