"""`impl.sglang.features.detect`: what a version has, found by running it."""

from __future__ import annotations


def test_features_are_found_by_running(sgl):
    feats = sgl.features()
    assert feats["has_deferred_feature"] is True
    assert feats["contract_form"]["form"] in ("dict", "dict+backend", "dataclass")
    assert {s["site"].rsplit(".", 1)[1] for s in feats["gate_call_sites"]} >= {"_process_mm_data_uncached"}
    assert feats["owner_subsets"] and feats["name"] == sgl.name
