"""`impl.sglang.matrix`: one version's probes (the child side, here in-process on the loaded release)."""

from __future__ import annotations

from deferlab.impl.sglang import matrix, provenance


def test_probe_one_reports_features_stand_ins_and_provenance(sgl):
    out = matrix.probe_one(sgl.source.spec, compare=False)
    assert out["name"] == sgl.name and out["features"]["has_deferred_feature"] is True
    assert out["provenance"] == provenance.of(sgl)  # per function, as the version table reads it
    assert out["stand_ins"] and all(r["kind"] != "patched" for r in out["stand_ins"])


def test_a_bad_spec_is_an_error_row_not_a_crash():
    out = matrix.probe_one("latest-please", compare=False)
    assert "neither 'installed', an existing path nor a version" in out["error"]
