"""A failing claim row's severity class (semantics §21.3), for every writer that shows or gates a row.

Why here: the report's tables, its ``--fail-on``, the baselines and the JUnit file of report, versions and compare
all class the same row the same way; the rule and its reading of a row are `reference.system.impact`
(``of_verdict_row``, which the typed `reference.system.rows.Row` answers as its ``severity`` too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.impact import of_verdict_row


def severity(row: Mapping[str, Any]) -> str | None:
    """A failing claim row's class label (a ``severity`` the row already carries, as versions' rows do, first);
    None when it does not fail or its claim has no class."""
    found = of_verdict_row(row)
    return None if found is None else found.label
