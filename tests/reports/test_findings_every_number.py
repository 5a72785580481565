"""Every finding of the newest-release example states at least one impact number (issue 32: every failing cell has
an impact), and the two read off their failure text alone say the right numbers: C11's patch count and C10's
placement decisions."""

from __future__ import annotations

import json
from pathlib import Path

from deferlab.reports.findings.group import group
from deferlab.reports.findings.numbers import measure

DOC = json.loads((Path(__file__).resolve().parents[2] / "reports/example/versions-newest/versions.json").read_text())


def test_every_finding_has_a_number() -> None:
    found = [(f.function, f.severity.label, measure(f)) for f in group(DOC)]
    assert [(fn, label) for fn, label, numbers in found if not numbers] == []
    c11 = next(n for fn, label, n in found if fn.endswith("get_image_feature") and label == "sequence")
    assert c11["patches"] == "4 materialized vs 12 the 2x9 image needs (0.33x)"
    c10 = next(n for fn, _, n in found if fn.endswith("DEFERRED_PREPROCESSING_KEY"))
    assert c10["placement"] == "1 of 2 images decided otherwise in the request than alone"
