"""`impl.sglang.compare`: SGLang against deferlab's model, function by function (nothing skipped)."""

from __future__ import annotations

from deferlab.impl.sglang.compare import compare


def test_every_comparison_runs(sgl):
    report = compare(sgl)
    assert report["name"] == sgl.name and report["checks"] > 200
    assert report["skipped"] == []  # a comparison that cannot run is reported, never hidden
    assert all(isinstance(d, str) and ":" in d for d in report["disagreements"])
