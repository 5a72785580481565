"""The SGLang driver (``impl/sglang``): sources, stand-ins, and SGLang's own code against the SPEC's numbers.

The module fixture loads ``DEFERLAB_SGLANG`` (default 0.5.23) once; it is
fetched into the deferlab cache the first time (``pip download``), and the
tests that need it are skipped, with the reason, only when pip cannot reach
the package index and nothing is cached. Source-resolution errors use tiny
fake checkouts in ``tmp_path``; the import-failure case runs in a subprocess
because a process holds one SGLang.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from deferlab.impl.sglang import cache, sources
from deferlab.impl.sglang.broken import BrokenGateTie
from deferlab.impl.sglang.sources import SGLangFetchError, SGLangSourceError
from deferlab.impl.sglang.standins import StandInUsedError
from deferlab.properties.impl.sglang_support import default_spec, fake_sglang_tree, load_or_skip
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.profiles import profile

VERSION = default_spec()
REPO = Path(__file__).resolve().parents[2]
K3 = profile("kimi-k3")
L1 = profile("sglang-gate-test-l1")  # in_patch_limit 1 (SGLang's second gate case)


def _u8(c: int, h: int, w: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (c, h, w), dtype=np.uint8))


@pytest.fixture(scope="module")
def sgl():
    from deferlab.impl.sglang.driver import SGLangImpl

    return load_or_skip(SGLangImpl, VERSION)


KIP_FILE = "srt/multimodal/kimi_k3_image_processing.py"
# A fake checkout (version 9.9.9) whose files name every piece of the deferred feature.
FEATURE_FILES = {
    KIP_FILE: "DEFERRED_PREPROCESSING_KEY = 'k'\n",
    "srt/multimodal/processors/kimi_k3.py": "# _should_defer_gpu_preprocessing\n",
    "srt/models/kimi_k3.py": "# DEFERRED_PREPROCESSING_KEY\n",
}


# -- source resolution (a folder that is no checkout: front_door_api's row "sglang not a checkout") --------------------


def test_a_missing_path_and_a_meaningless_spec_are_refused():
    with pytest.raises(SGLangSourceError, match="no such path"):
        sources.load("./no/such/checkout")
    with pytest.raises(SGLangSourceError, match="neither 'installed', an existing path nor a version"):
        sources.load("latest-please")


def test_a_checkout_without_the_deferred_feature_is_refused(tmp_path):
    root = fake_sglang_tree(tmp_path, "9.9.9", {})
    with pytest.raises(SGLangSourceError, match=r"version 9\.9\.9.*no Kimi-K3 CPU-transport deferred preprocessing"):
        sources.load(str(root))


def test_an_unfetchable_wheel_is_refused_and_leaves_nothing(tmp_path):
    def offline(version, dest):
        dest.mkdir(parents=True)
        (dest / f"sglang-{version}-py3-none-any.whl").write_bytes(b"PK\x03\x04 half a wheel")
        raise cache.FetchError("Network is unreachable", None)

    with pytest.raises(SGLangFetchError, match="could not fetch the wheel.*Network is unreachable"):
        sources.load("0.5.23", cache=tmp_path, downloader=offline)
    assert list(tmp_path.iterdir()) == []


def test_a_wheel_that_arrives_broken_is_a_finding_not_a_failed_fetch(tmp_path):
    """A download that succeeded with a truncated wheel is refused as unusable (no test may skip on it), and
    leaves nothing in the cache."""

    def truncated(version, dest):
        dest.mkdir(parents=True)
        wheel = dest / f"sglang-{version}-py3-none-any.whl"
        wheel.write_bytes(b"PK\x03\x04 half a wheel")
        return wheel

    with pytest.raises(SGLangSourceError, match="the fetched wheel is unusable.*not a zip archive") as info:
        sources.load("0.5.23", cache=tmp_path, downloader=truncated)
    assert not isinstance(info.value, SGLangFetchError)
    assert list(tmp_path.iterdir()) == []


def test_tests_skip_on_a_failed_fetch_and_on_nothing_else(tmp_path):
    """`load_or_skip`: an unfetchable wheel is a skip; any other load failure reaches the test as itself."""

    def offline(version, dest):
        raise cache.FetchError("Network is unreachable", None)

    with pytest.raises(pytest.skip.Exception, match="0.5.23 is not cached"):
        load_or_skip(lambda spec: sources.load(spec, cache=tmp_path, downloader=offline), "0.5.23")
    with pytest.raises(SGLangSourceError, match="no such path") as info:
        load_or_skip(sources.load, str(tmp_path / "nowhere" / "sglang"))
    assert not isinstance(info.value, SGLangFetchError)


def test_an_unknown_version_names_what_the_index_has(tmp_path):
    with pytest.raises(SGLangSourceError) as info:
        load_or_skip(lambda spec: sources.load(spec, cache=tmp_path), "0.5.999")
    assert "no sglang==0.5.999" in str(info.value) and "0.5.23" in str(info.value)


def test_one_sglang_per_process(sgl, tmp_path):
    other = fake_sglang_tree(tmp_path, "9.9.9", FEATURE_FILES)
    with pytest.raises(SGLangSourceError, match="one SGLang version per process"):
        sources.load(str(other))
    assert sources.load(sgl.source.spec) is sgl.source


def test_an_import_failure_inside_sglang_names_the_module(tmp_path):
    root = fake_sglang_tree(tmp_path, "9.9.9", {**FEATURE_FILES, KIP_FILE: "DEFERRED_PREPROCESSING_KEY = 1 / 0\n"})
    code = "import sys; from deferlab.impl.sglang import sources; sources.load(sys.argv[1])"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert "importing sglang.srt.multimodal.kimi_k3_image_processing failed inside SGLang" in proc.stderr
    assert "ZeroDivisionError" in proc.stderr


# -- the cache -----------------------------------------------------------------------------------------------------


def _tiny_wheel(version: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"sglang-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("sglang/__init__.py", "")
        zf.writestr("sglang/srt/__init__.py", "")
    return wheel


def test_an_interrupted_download_leaves_nothing_a_later_run_mistakes_for_a_wheel(tmp_path):
    def interrupted(version, dest):
        wheel = _tiny_wheel(version, dest)
        wheel.write_bytes(wheel.read_bytes()[:20])  # cut mid-transfer
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.fetch("9.9.9", tmp_path, interrupted)
    assert cache.cached_tree("9.9.9", tmp_path) is None and list(tmp_path.iterdir()) == []

    with pytest.raises(cache.FetchError, match="not a zip"):
        cache.fetch(
            "9.9.9", tmp_path, lambda v, d: (d.mkdir(parents=True), d / "x.whl", (d / "x.whl").write_bytes(b"no"))[1]
        )
    assert cache.cached_tree("9.9.9", tmp_path) is None

    tree, downloaded = cache.fetch("9.9.9", tmp_path, _tiny_wheel)
    assert downloaded and (tree / "sglang" / "srt").is_dir() and cache.source_meta(tree)["version"] == "9.9.9"

    def must_not_run(version, dest):
        raise AssertionError("a second run downloaded again")

    assert cache.fetch("9.9.9", tmp_path, must_not_run) == (tree, False)
    assert [p.name for p in tmp_path.iterdir()] == ["9.9.9"]


# -- stand-ins -----------------------------------------------------------------------------------------------------


def test_every_stand_in_is_recorded_with_a_reason(sgl):
    records = sgl.source.stand_ins
    assert records and all(r.why for r in records)
    assert {r.kind for r in records} <= {"missing", "failed", "bare", "init", "patched"}
    stood_in = {r.module for r in records if r.kind in ("missing", "failed")}
    assert not stood_in & set(sources.REQUIRED)
    assert not {m for m in stood_in if m.split(".")[0] in ("torch", "numpy", "PIL")}
    assert any(r.module == "sglang" and r.kind == "bare" for r in records)
    try:
        import triton  # noqa: F401
    except ImportError:
        tri = [r for r in records if r.module == "triton"]
        assert tri and tri[0].kind == "missing" and "kernels/ops/mm/process/image.py" in tri[0].why


def test_a_stand_in_called_at_run_time_raises(sgl):
    image_kernels = sys.modules["sglang.kernels.ops.mm.process.image"]
    if not getattr(image_kernels.triton, "__deferlab_standin__", False):
        pytest.skip("triton is installed here: nothing stood in for it")
    with pytest.raises(StandInUsedError, match="stand-in"):
        image_kernels.triton.cdiv(5, 2)


# -- SGLang's code against the SPEC --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "grid", "tokens"),
    [
        ((32, 32), [1, 4, 4], 4),
        ((640, 480), [1, 36, 46], 414),
        ((10000, 100), [1, 6, 512], 768),
        ((1, 1), [1, 2, 2], 1),
    ],
)
def test_navit_worked_values(sgl, size, grid, tokens):
    w, h = size
    rc = sgl.navit_resize_config(w, h, K3)
    assert rc["num_tokens"] == tokens
    assert [1, (rc["new_height"] + rc["pad_height"]) // 14, (rc["new_width"] + rc["pad_width"]) // 14] == grid


def test_preprocess_grid_and_padding_equal_the_bias(sgl):
    pv, grids = sgl.preprocess([_u8(3, 32, 32)], K3)
    assert grids.tolist() == [[1, 4, 4]] and grids.dtype == torch.int64
    assert pv.shape == (16, 3, 14, 14) and pv.dtype == torch.float32
    assert torch.all(pv[15] == -1.0)  # the bottom-right patch is all padding: bias = -mean/std


def test_owner_assignment_worked_cases(sgl):
    assert sgl.assign_owners([1000, 100, 200, 50], 2) == [[0], [2, 1, 3]]
    assert sgl.assign_owners([8, 5, 3], 2) == [[0], [1, 2]]
    assert sgl.assign_owners([5, 5, 5, 5], 2) == [[0, 2], [1, 3]]
    local = sgl.local_item_indices([1000, 100, 200, 50], 1, 2)
    assert local is None or local == [2, 1, 3]


def test_gate_cases_of_spec_4(sgl):
    def decide(images, cfg=K3, **kw):
        return sgl.defer_decisions(images, cfg, policy=None, **kw)

    assert decide([_u8(3, 32, 32)]) == [True]
    assert decide([_u8(3, 1024, 1024)], L1) == [False]
    assert decide([torch.zeros(3, 32, 32)]) == [False]
    assert decide([]) == []
    assert decide([_u8(3, 32, 32)], transport="cuda_ipc") == [False]
    assert decide([_u8(3, 32, 32)], transport="fabric") == [False]
    assert decide([_u8(3, 32, 32)], cuda_available=False) == [False]
    assert sgl.gate_bytes([_u8(3, 32, 32)], K3) == (3072, 37632)
    tie = [_u8(3, 112, 28)]  # 3*28*112 = 9408 = 3*28*28*4 under in_patch_limit 1
    assert sgl.gate_bytes(tie, L1) == (9408, 9408)
    assert decide(tie, L1) == [True]  # ties defer


def test_staging_rules(sgl):
    rgb = Image.new("RGB", (5, 4))
    rgb.info["transparency"] = (0, 0, 0)
    assert tuple(sgl.to_chw_uint8(rgb).shape) == (3, 4, 5)
    assert tuple(sgl.to_chw_uint8(Image.new("LA", (5, 4))).shape) == (4, 4, 5)
    assert tuple(sgl.to_chw_uint8(torch.zeros(4, 5, dtype=torch.uint8)).shape) == (3, 4, 5)
    with pytest.raises(ValueError, match="raw uint8"):
        sgl.to_chw_uint8(torch.zeros(3, 4, 5))
    with pytest.raises(NotImplementedError, match="pre-PR"):
        sgl.to_chw_uint8(rgb, promote_rgb_transparency=True)


def test_background_and_normalization_constants(sgl):
    x = np.zeros((4, 1, 16), np.float32)  # fully transparent: the background shows
    out = sgl.fill_transparent_bg(x, BackgroundConfig("chessboard", square_size=8, gray_value=180))
    assert out[:, 0, 0].tolist() == [255.0] * 3 and out[:, 0, 8].tolist() == [180.0] * 3
    assert tuple(sgl.fill_transparent_bg(x, None).shape) == (3, 1, 16)
    scale, bias = sgl.normalization_tensors([0.5] * 3, [0.5] * 3)
    assert scale.flatten().tolist() == [0.007843137718737125] * 3 and bias.flatten().tolist() == [-1.0] * 3
    y = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7)
    assert torch.equal(torch.as_tensor(sgl.resize(y, 5, 7)), torch.as_tensor(y))


def test_deferred_items_carry_the_contract(sgl):
    out = sgl.process([_u8(3, 32, 32), Image.new("RGBA", (50, 40))], K3, policy=None)
    assert out.deferred == [True, True]
    for item, grid in zip(out.items, ([[1, 4, 4]], [[1, 4, 4]]), strict=True):
        msd = item.model_specific_data
        assert msd["image_grid_thw"].tolist() == grid and msd["image_grid_thw"].dtype == torch.int64
        cfg = msd["kimi_k3_deferred_preprocessing"]
        assert item.feature.dtype == torch.uint8 and item.feature.device.type == "cpu"
        rc = cfg["resize_config"] if isinstance(cfg, dict) else cfg.resize_config
        assert set(rc) == {"num_tokens", "new_width", "new_height", "pad_width", "pad_height"}
    assert type(out.items[0]).__module__ == "sglang.srt.managers.schedule_batch"


LOCAL_INDEX_BUG = ("sglang-0.5.18",)  # facts 13.25, found by features()["owner_subsets"]; see VERSIONS.md


def _pinned_local_index_bug(sgl, run) -> bool:
    """On a release with the local-index bug, a non-prefix owner list must raise "wrong grids" (pinned)."""
    if sgl.name not in LOCAL_INDEX_BUG:
        return False
    with pytest.raises(ValueError, match="produced wrong grids"):
        run()
    return True


def test_any_owner_subset_gets_its_own_features(sgl):
    items = sgl.process([_u8(3, 28, 28), _u8(3, 56, 84, 1), _u8(4, 112, 70, 2)], K3, policy=None).items
    if _pinned_local_index_bug(sgl, lambda: sgl.materialize(items, [2, 1], K3)):
        return
    parts = sgl.materialize(items, [0, 1, 2], K3, policy=None).split([4, 24, 48])
    for owner in ([2, 1], [1, 0, 2], [2]):
        assert torch.equal(sgl.materialize(items, owner, K3, policy=None), torch.cat([parts[i] for i in owner]))


def test_deferred_equals_eager_preprocessing_on_the_owner(sgl):
    images = [_u8(3, 100, 90), Image.fromarray(np.random.default_rng(3).integers(0, 256, (40, 30, 4), dtype=np.uint8))]
    items = sgl.process(images, K3, policy=None).items
    if _pinned_local_index_bug(sgl, lambda: sgl.materialize(items, [1, 0], K3)):
        return
    feats = sgl.materialize(items, [1, 0], K3)
    pv, _ = sgl.preprocess([images[1], images[0]], K3)
    assert feats.dtype == torch.bfloat16 and torch.equal(feats, pv.to(torch.bfloat16))


def test_vision_dp_owners_and_copies(sgl):
    items = sgl.process([_u8(3, 28, 28), _u8(3, 56, 84, 1), _u8(3, 112, 70, 2)], K3, policy=None).items
    if _pinned_local_index_bug(sgl, lambda: sgl.vision_dp(items, 2, K3, policy=None)):
        return
    group = sgl.vision_dp(items, 2, K3, policy=None)
    assert group.owners == sgl.assign_owners([4, 24, 48], 2) == [[2], [1, 0]]
    assert [r.log.images_preprocessed for r in group.ranks] == [1, 2]
    assert [r.log.h2d_copies for r in group.ranks] == [1, 2]  # whitelisted: owners copy only their own
    for i, feat in enumerate(group.per_image):
        assert torch.equal(feat, sgl.materialize(items, [i], K3))


def test_scheduler_whitelist_and_ipc_counts(sgl):
    assert sgl.can_skip_pre_embed("KimiK3ForConditionalGeneration") is True
    assert sgl.can_skip_pre_embed("LlamaForCausalLM") is False
    counts = sgl.ipc_counts()
    assert counts.producer_total(8) == 8
    assert counts.resolve(8, 8) == 8 and counts.resolve(16, 8) == 8 and counts.resolve(1, 8) == 1
    with pytest.raises(ValueError, match="one consumer or the complete consumer group"):
        counts.resolve(3, 8)
    assert counts.consumer_requested(8, 8) in (1, 8)
    assert {"producer_total[cuda_ipc]", "consumer_requested", "resolve"} <= set(counts.sources)


def test_features_and_provenance_are_found_by_running(sgl):
    feats = sgl.features()
    assert feats["has_deferred_feature"] is True
    assert feats["contract_form"]["form"] in ("dict", "dict+backend", "dataclass")
    assert {s["site"].rsplit(".", 1)[1] for s in feats["gate_call_sites"]} >= {"_process_mm_data_uncached"}
    prov = sgl.provenance()
    assert prov["navit_resize_config"].startswith("real:") and prov["deliver"].startswith("modelled:")
    assert any(k.startswith("patched ") for k in prov)


def test_the_seam_accepts_it_and_a_one_line_break_is_caught(sgl):
    from deferlab.properties.seam import resolve_impl
    from deferlab.properties.seam_sglang import SGLangSeam

    wrapped = SGLangSeam(driver=sgl)
    assert resolve_impl(wrapped) is wrapped
    broken = BrokenGateTie(sgl.source)
    tie = [_u8(3, 112, 28)]
    assert sgl.defer_decisions(tie, L1, policy=None) == [True]
    assert broken.defer_decisions(tie, L1, policy=None) == [False]  # SPEC 4: ties defer; the break keeps them eager
    assert sgl.defer_decisions(tie, L1, policy=None) == [True]  # the real class was restored


def test_a_config_other_than_the_profiles_goes_through(sgl):
    cfg = PreprocessConfig(patch_size=2, merge_kernel_size=2, in_patch_limit=1024, patch_limit_on_one_side=64)
    _, grids = sgl.preprocess([_u8(3, 6, 8), _u8(3, 9, 5)], cfg)
    assert grids.tolist() == [[1, 4, 4], [1, 6, 4]]  # SGLang's EPD test values (facts 1.4)
