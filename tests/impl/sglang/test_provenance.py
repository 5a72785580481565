"""`impl.sglang.provenance`: per function (`of`) and per seam method (`per_method`), read off the tree."""

from __future__ import annotations

from deferlab.impl.sglang import provenance


def test_provenance_is_found_by_running(sgl):
    prov = provenance.of(sgl)
    assert prov["navit_resize_config"].startswith("real:") and prov["deliver"].startswith("modelled:")
    assert any(k.startswith("patched ") for k in prov)


def test_per_method_folds_the_functions_lines(sgl):
    per = provenance.per_method(sgl)
    raw = provenance.of(sgl)
    assert set(per) == set(provenance.METHOD_KEYS) and sgl.provenance() == per
    assert per["normalize_and_patchify"] == raw["normalization_tensors"] + "; " + raw["normalize_and_patchify"]
    assert per["defers"].startswith("real: read off the loaded code")
