"""LMDeploy as an engine of the loader: what is refused before import, in one line, and what is unpacked."""

from __future__ import annotations

from pathlib import Path

import pytest

from deferlab.impl.lmdeploy import sources
from deferlab.impl.loader.sources import Resolved


def _tree(root: Path, vl: bool, internvl: bool) -> Path:
    (root / "lmdeploy").mkdir(parents=True)
    (root / "lmdeploy" / "__init__.py").write_text("")
    if vl:
        (root / "lmdeploy" / "vl" / "model").mkdir(parents=True)
    if internvl:
        (root / sources._PATH_FILE).write_text("")
    return root


def test_the_engine_is_described_directly():
    e = sources.ENGINE
    assert (e.name, e.distribution, e.package, e.marker) == ("lmdeploy", "lmdeploy", "lmdeploy", "vl")
    assert "LMDeploy source checkout" in e.accepted and "'0.18.0'" in e.accepted


def test_only_the_python_sources_are_unpacked():
    keep = sources.ENGINE.wheel_members
    assert keep("lmdeploy/vl/model/internvl.py")
    assert not keep("lmdeploy/turbomind/_turbomind.cpython-311-x86_64-linux-gnu.so")
    assert not keep("lmdeploy/turbomind/include/deep_ep/common/comm.cuh")
    assert not keep("lmdeploy-0.18.0.dist-info/RECORD")


def test_a_folder_without_lmdeploy_vl_is_refused_in_one_line(tmp_path):
    with pytest.raises(sources.LMDeploySourceError) as e:
        sources.load(str(_tree(tmp_path, vl=False, internvl=False)))
    msg = str(e.value)
    assert "\n" not in msg
    assert "is not an LMDeploy checkout (no lmdeploy/ with __init__.py and vl/" in msg
    assert msg.endswith("(fetched with pip download into the deferlab cache)")


def test_a_tree_without_internvl_preprocessing_is_refused_before_import(tmp_path):
    found = Resolved("checkout", _tree(tmp_path, vl=True, internvl=False), "0.13.0")
    with pytest.raises(sources.LMDeploySourceError, match=r"no InternVL preprocessing .*accepted: LMDeploy 0\.14\.0"):
        sources._check_path("0.13.0", found)
    sources._check_path("x", Resolved("checkout", _tree(tmp_path / "ok", vl=True, internvl=True), "0.18.0"))


@pytest.mark.parametrize("spec", ["", "not a version", "./no/such/folder"])
def test_bad_specs_are_refused_in_one_line(spec):
    with pytest.raises(sources.LMDeploySourceError) as e:
        sources.load(spec)
    assert "\n" not in str(e.value) and "accepted: 'installed'" in str(e.value)


def test_an_unknown_release_is_refused_in_one_line():
    try:
        sources.load("0.18.99")
    except sources.LMDeployFetchError as e:
        pytest.skip(f"the package index cannot be reached: {e}")
    except sources.LMDeploySourceError as e:
        msg = str(e)
        assert "\n" not in msg
        assert "the package index has no lmdeploy==0.18.99 (nearest: 0.18.0" in msg
    else:
        pytest.fail("0.18.99 loaded")
