"""vLLM as an engine of the loader: which trees are refused before import, and what the load reads off the code."""

from __future__ import annotations

import textwrap
import types
from pathlib import Path

import pytest

from deferlab.impl.loader.sources import Resolved
from deferlab.impl.vllm import sources

pytestmark = pytest.mark.extra("vllm")  # vLLM runs for real: numba and pydantic (the vllm extra)


def _tree(root: Path, with_path: bool) -> Path:
    (root / "vllm" / "multimodal").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    if with_path:
        (root / "vllm" / "models" / "kimi_k3" / "common").mkdir(parents=True)
        (root / sources._PATH_FILE).write_text("")
    return root


def test_a_tree_without_the_kimi_k3_path_is_refused_before_import(tmp_path):
    found = Resolved("checkout", _tree(tmp_path, with_path=False), "0.26.0")
    with pytest.raises(sources.VLLMSourceError, match=r"no Kimi-K3 image path .*accepted: vLLM 0\.27\.0 and later"):
        sources._check_path("0.26.0", found)


def test_a_tree_with_the_path_passes_the_file_check(tmp_path):
    sources._check_path("x", Resolved("checkout", _tree(tmp_path, with_path=True), "0.33.0"))


def _module(code: str) -> types.ModuleType:
    """A module whose classes `inspect.getsource` can read (its file on disk)."""
    import importlib.util
    import sys
    import tempfile

    path = Path(tempfile.mkdtemp()) / "fake_mm_preprocess.py"
    path.write_text(textwrap.dedent(code))
    spec = importlib.util.spec_from_file_location("fake_mm_preprocess", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_mm_preprocess"] = module
    spec.loader.exec_module(module)
    return module


def test_served_processor_reads_the_override_off_the_code():
    with_override = _module(
        """
        def cached_get_image_processor(*a, **k): ...
        class Fused: ...
        class KimiK3ProcessingInfo:
            def __init__(self):
                self.p = cached_get_image_processor("m", processor_cls_overrides=Fused)
        """
    )
    assert sources.served_processor(with_override) == "Fused"


def test_served_processor_without_override_is_the_checkpoints_own():
    without = _module(
        """
        def cached_get_image_processor(*a, **k): ...
        class KimiK3ProcessingInfo:
            def __init__(self):
                self.p = cached_get_image_processor("m", trust_remote_code=True)
        """
    )
    assert sources.served_processor(without) == ""
    assert sources.served_processor(types.ModuleType("empty")) == ""


def test_the_release_serves_its_fused_processor_and_unpacks_only_python(vll):
    """0.33.0's Kimi-K3 processing info overrides the checkpoint's processor with vLLM's fused one."""
    assert vll.source.processor_name == "KimiK25FusedVisionProcessor"
    assert vll.serves_own_processor
    root = Path(vll.source.root)
    if vll.source.kind == "wheel":
        unpacked = {p.suffix for p in (root / "vllm").rglob("*") if p.is_file()}
        assert ".so" not in unpacked and ".py" in unpacked
    kinds = {r.kind for r in vll.source.stand_ins}
    assert kinds <= {"bare", "init", "missing", "absent", "patched", "companion", "declared"}
    # Loaded with its companions (conftest): transformers is the release's pin, recorded as a companion, never the
    # functional stand-in and never the installed copy (`child` checks the load without them).
    records = [r for r in vll.source.stand_ins if r.module == "transformers"]
    assert [r.kind for r in records] == ["companion"], records
    assert vll.source.companions["transformers"].tree.parts[-2:] == ("transformers", records[0].why.split()[1])


def test_the_release_verifies_against_its_wheels_record_and_none_of_its_own_modules_is_stood_in_for(vll):
    """The cached tree is its wheel's Python sources exactly (the compiled modules the wheel ships, never
    unpacked, are known as such), and the load stood in for no module of vLLM's own."""
    from deferlab.impl.loader import integrity, wheels

    if vll.source.kind != "wheel":
        pytest.skip(f"DEFERLAB_VLLM={vll.source.spec} is not a cached release")
    root = Path(vll.source.root)
    assert integrity.status(sources.ENGINE, root) == ("verified", "")
    shipped = wheels.shipped_modules(root)
    assert shipped["vllm.multimodal.parse"] == ("python", "vllm/multimodal/parse.py")
    assert (
        shipped["vllm.spinloop"] == ("compiled", "vllm/spinloop.abi3.so")
        and not (root / "vllm/spinloop.abi3.so").exists()
    )
    own = [r for r in vll.source.stand_ins if r.kind in ("missing", "failed") and sources.ENGINE.owns(r.module)]
    assert all(shipped.get(r.module, ("",))[0] == "compiled" for r in own), own  # only what the wheel compiles


def test_unknown_release_is_refused_with_what_is_accepted():
    with pytest.raises(sources.VLLMSourceError, match=r"accepted: 'installed'"):
        sources.load("not a spec at all!")
