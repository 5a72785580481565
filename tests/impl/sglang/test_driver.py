"""`impl.sglang.driver.SGLangImpl`: SGLang's own code behind the seam, against semantics' numbers.

The default release (``DEFERLAB_SGLANG``, default 0.5.23) is the folder's
``sgl`` fixture; 0.5.17 (eager-only) runs once in a child that prints every
probe as JSON (`probes`), checked against values worked out by hand from
semantics §3.1, §3.4, §3.5 and §7; a release with the deferred path runs in a
child of its own too, so no test depends on which SGLang this process holds.
"""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from tests.impl.sglang.support import K3, KIP, default_spec, run_child, u8

VERSION = default_spec()  # the release with the deferred path to check


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
    pv, grids = sgl.preprocess([u8(3, 32, 32)], K3)
    assert grids.tolist() == [[1, 4, 4]] and grids.dtype == torch.int64
    assert pv.shape == (16, 3, 14, 14) and pv.dtype == torch.float32
    assert torch.all(pv[15] == -1.0)  # the bottom-right patch is all padding: bias = -mean/std


def test_a_config_other_than_the_profiles_goes_through(sgl):
    cfg = PreprocessConfig(patch_size=2, merge_kernel_size=2, in_patch_limit=1024, patch_limit_on_one_side=64)
    _, grids = sgl.preprocess([u8(3, 6, 8), u8(3, 9, 5)], cfg)
    assert grids.tolist() == [[1, 4, 4], [1, 6, 4]]  # SGLang's EPD test values (semantics §3.2)


def test_it_is_the_seam_itself_and_describes_what_ran(sgl):
    """No forwarding layer: `SGLangImpl` satisfies the seam's `Impl`, with `real_code`, `describe` and `LABEL`."""
    from deferlab.impl.sglang.driver import LABEL
    from deferlab.properties.seam import Impl, resolve_impl

    assert isinstance(sgl, Impl) and resolve_impl(sgl) is sgl and sgl.real_code is True and LABEL == "SGLANG"
    described = sgl.describe()
    assert described["name"] == sgl.name and described["version"] == sgl.source.version
    assert described["stand_ins"] == [s.as_dict() for s in sgl.source.stand_ins]
    assert set(sgl.provenance()) >= {"to_chw_uint8", "defer_decisions", "ack_counts", "defers"}
    assert sgl.gate_paths(None)[0] == ("artifact", True) and sgl.defers(None) is True
    assert sgl.skip_pre_embed(None) is True and sgl.has_epd(None) is sgl.capabilities.epd_producer
    assert [a.name for a in sgl.ack_counts(None)] == [f"{sgl.name} ({t} pool)" for t in ("cuda_ipc", "cuda_vmm")]


def test_an_epd_cpu_backend_owner_is_refused_not_faked(sgl):
    items = sgl.epd_items([u8(3, 32, 32)], K3, backend="cpu")
    with pytest.raises(NotImplementedError, match="EPD 'cpu' backend's owner runs the checkpoint's own HF"):
        sgl.materialize(items, [0], K3)


# The child: load the release named in argv[1], run every probe, print one JSON object (`run_child`).
CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    from PIL import Image
    from deferlab.impl.sglang import provenance
    from deferlab.impl.sglang.driver import SGLangImpl
    from deferlab.reference.system.config import BackgroundConfig
    from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY
    from deferlab.reference.system.profiles import profile

    def caught(fn):
        try:
            fn()
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        return None

    sgl = SGLangImpl(sys.argv[1])
    K3 = profile("kimi-k3")
    u8 = torch.arange(3 * 32 * 32).remainder(251).to(torch.uint8).view(3, 32, 32)
    keyed = Image.frombytes("RGB", (2, 1), bytes([9, 9, 9, 200, 100, 50]))
    keyed.info["transparency"] = (9, 9, 9)
    plain = keyed.copy(); plain.info.pop("transparency")
    grey = Image.frombytes("L", (2, 1), bytes([0, 5])); grey.info["transparency"] = 5
    la = Image.frombytes("LA", (2, 1), bytes([7, 0, 200, 255]))
    x = np.array([[[10, 100]], [[20, 150]], [[30, 200]], [[0, 255]]], np.float32)  # (4, 1, 2): clear, opaque
    out = {"name": sgl.name, "has_deferred_path": sgl.has_deferred_path}
    out["stage"] = {
        "keyed_rgb": sgl.to_chw_uint8(keyed).tolist(),
        "la": sgl.to_chw_uint8(la).tolist(),
        "keyed_l": sgl.to_chw_uint8(grey).tolist(),
        "hw_u8": list(sgl.to_chw_uint8(torch.zeros(4, 5, dtype=torch.uint8)).shape),
        "float": [str(t.dtype) + str(list(t.shape)) for t in [sgl.to_chw_uint8(torch.zeros(1, 2, 2))]][0],
        "promote": caught(lambda: sgl.to_chw_uint8(keyed, promote_rgb_transparency=True)),
        "numpy": caught(lambda: sgl.to_chw_uint8(np.zeros((3, 2, 2), np.uint8))),
    }
    out["fill"] = {
        "white": sgl.fill_transparent_bg(x, BackgroundConfig("white")).tolist(),
        "gray": sgl.fill_transparent_bg(x, BackgroundConfig("gray")).tolist(),
        "none": sgl.fill_transparent_bg(x, None).tolist(),
        "rgb_passthrough": sgl.fill_transparent_bg(x[:3], BackgroundConfig("white")).tolist(),
    }
    scale, bias = sgl.normalization_tensors([0.5] * 3, [0.5] * 3)
    out["norm"] = [scale.flatten().tolist(), bias.flatten().tolist(), str(scale.dtype), list(scale.shape)]
    out["navit"] = {f"{w}x{h}": sgl.navit_resize_config(w, h, K3) for w, h in ((32, 32), (640, 480), (1, 1))}
    pv, grids = sgl.preprocess([u8], K3)
    out["preprocess"] = [list(pv.shape), grids.tolist(), bool(torch.all(pv[15] == -1.0))]
    produced = sgl.process([u8, keyed], K3)
    out["process"] = {
        "deferred": produced.deferred,
        "features": [[str(it.feature.dtype), list(it.feature.shape)] for it in produced.items],
        "grids": [it.model_specific_data["image_grid_thw"].tolist() for it in produced.items],
        "module": type(produced.items[0]).__module__,
    }
    pv2, grids2 = sgl.preprocess([u8, keyed], K3)
    n0 = int(grids2[0].prod())
    got = sgl.materialize(produced.items, [1, 0], K3)
    out["materialize"] = [str(got.dtype), bool(torch.equal(got, torch.cat([pv2[n0:], pv2[:n0]]).to(torch.bfloat16)))]
    same = []
    for transport in ("cuda_ipc", "cpu"):
        a = sgl.materialize(sgl.process([keyed], K3, transport=transport).items, [0], K3)
        b = sgl.materialize(sgl.process([plain], K3, transport=transport).items, [0], K3)
        same.append(bool(torch.equal(a, b)))
    out["keyed_equals_plain"] = same
    out["ipc_items_keys"] = sorted(sgl.process([u8], K3, transport="cuda_ipc").items[0].model_specific_data)
    out["decisions"] = [sgl.defer_decisions([u8, keyed], K3), sgl.defer_decisions([], K3)]
    out["absent"] = {
        "gate_bytes": caught(lambda: sgl.gate_bytes([u8], K3)),
        "epd_items": caught(lambda: sgl.epd_items([u8], K3)),
        "process_epd": caught(lambda: sgl.process([u8], K3, epd=True)),
    }
    out["scheduler"] = {
        "k3": sgl.can_skip_pre_embed("KimiK3ForConditionalGeneration"),
        "k25": sgl.can_skip_pre_embed("KimiK25ForConditionalGeneration"),
        "owners": sgl.assign_owners([1000, 100, 200, 50], 2),
        "local": sgl.local_item_indices([1000, 100, 200, 50], 1, 2),
    }
    vdp = sgl.vision_dp(produced.items, 2, K3)
    out["vision_dp"] = [vdp.owners, [r.log.images_preprocessed for r in vdp.ranks]]
    seam = sgl
    out["seam"] = [seam.defers(None), seam.gate_paths(None), seam.provenance()["defers"]]
    kip = sgl.source.module("{kip}")
    out["source"] = {
        "has_kip": sgl.source.has("{kip}"),
        "key": kip.DEFERRED_PREPROCESSING_KEY == DEFERRED_PREPROCESSING_KEY,
        "other_name": caught(lambda: kip.to_chw_uint8),
        "absent_records": [r.module for r in sgl.source.stand_ins if r.kind == "absent"],
        "whitelist_module": sgl.source.whitelist_module,
    }
    feats = sgl.features()
    out["features"] = {k: feats[k] for k in ("has_deferred_feature", "gate_call_sites", "pre_pr_eager_staging",
                                             "scheduler_whitelist", "contract_form", "grid_check")}
    out["provenance"] = provenance.of(sgl)
    print("JSON:" + json.dumps(out, default=str))
    """
).replace("{kip}", KIP)


@pytest.fixture(scope="module")
def probes() -> dict[str, Any]:
    """Every probe of the child on 0.5.17 (one process; skipped only if the wheel cannot be fetched)."""
    return run_child(CHILD, "0.5.17", spec="0.5.17", timeout=180)


def test_0_5_17_loads_as_eager_only(probes):
    assert probes["name"] == "sglang-0.5.17" and probes["has_deferred_path"] is False
    assert probes["source"]["has_kip"] is False and probes["source"]["absent_records"] == [KIP]
    assert probes["source"]["key"] is True  # the absent stand-in names the later key; no item here carries it
    assert probes["source"]["other_name"].startswith("AttributeError")
    assert probes["source"]["whitelist_module"] == "sglang.srt.managers.mm_utils"  # no mm_schedule before 0.5.18
    prov = probes["provenance"]["deferred path"]
    assert prov.startswith("real: read off the loaded code") and "absent" in prov and "present" not in prov


def test_eager_staging_keeps_keyed_rgb_rgb(probes):
    """0.5.17's _k3_to_cuda_chw: has_alpha = mode != RGB and (A band or key), semantics §3.1 (not PRE_PR's rule)."""
    stage = probes["stage"]
    assert stage["keyed_rgb"] == [[[9, 200]], [[9, 100]], [[9, 50]]]  # 3 channels, colours as they are
    assert stage["la"] == [[[7, 200]], [[7, 200]], [[7, 200]], [[0, 255]]]
    assert stage["keyed_l"] == [[[0, 5]], [[0, 5]], [[0, 5]], [[255, 0]]]  # a grey key is alpha: level 5 clear
    assert stage["hw_u8"] == [3, 4, 5]
    assert stage["float"] == "torch.float32[3, 2, 2]"  # the eager stager has no uint8 check (semantics §3.1)
    assert "no pre-PR eager staging path" in stage["promote"] and stage["numpy"].startswith("TypeError")
    assert probes["features"]["pre_pr_eager_staging"] is False


def test_eager_compositing_and_normalization_constants(probes):
    fill = probes["fill"]
    assert fill["white"] == [[[255.0, 100.0]], [[255.0, 150.0]], [[255.0, 200.0]]]
    assert fill["gray"] == [[[128.0, 100.0]], [[128.0, 150.0]], [[128.0, 200.0]]]
    assert fill["none"] == [[[10.0, 100.0]], [[20.0, 150.0]], [[30.0, 200.0]]]  # no background: alpha dropped
    assert fill["rgb_passthrough"] == fill["none"]
    scale, bias, dtype, shape = probes["norm"]
    assert scale == [0.007843137718737125] * 3 and bias == [-1.0] * 3  # f32(1/127.5), -0.5/0.5
    assert dtype == "torch.float32" and shape == [1, 3, 1, 1]


def test_navit_and_the_shared_pipeline(probes):
    for size, (grid, tokens) in {"32x32": ([4, 4], 4), "640x480": ([36, 46], 414), "1x1": ([2, 2], 1)}.items():
        rc = probes["navit"][size]
        assert rc["num_tokens"] == tokens
        assert [(rc["new_height"] + rc["pad_height"]) // 14, (rc["new_width"] + rc["pad_width"]) // 14] == grid
    assert probes["preprocess"] == [[16, 3, 14, 14], [[1, 4, 4]], True]  # bottom-right patch: padding = bias


def test_the_eager_producer_and_the_owner_loader(probes):
    process = probes["process"]
    assert process["deferred"] == [False, False]
    assert process["features"] == [["torch.float32", [16, 3, 14, 14]], ["torch.float32", [4, 3, 14, 14]]]
    assert process["grids"] == [[[1, 4, 4]], [[1, 2, 2]]]
    assert process["module"] == "sglang.srt.managers.schedule_batch"
    assert probes["materialize"] == ["torch.bfloat16", True]  # owner order [1, 0], BF16 of the eager pipeline
    assert probes["keyed_equals_plain"] == [True, True]  # C2 on both transports
    assert "_sglang_defer_cuda_ipc_feature_reconstruction" in probes["ipc_items_keys"]  # its lazy-IPC flag
    assert probes["vision_dp"] == [[[0], [1]], [0, 0]]  # owners by LPT; no owner preprocesses (eager items)


def test_what_0_5_17_lacks_is_said_not_faked(probes):
    assert probes["decisions"] == [[False, False], []]  # no gate: every image is eager
    absent = probes["absent"]
    assert absent["gate_bytes"].startswith("NotImplementedError: sglang-0.5.17 has no deferral gate")
    assert absent["epd_items"].startswith("NotImplementedError: sglang-0.5.17 has no EPD producer")
    assert absent["process_epd"] == absent["epd_items"]
    prov = probes["provenance"]
    assert prov["gate (defer_decisions)"].startswith("modelled: no gate exists in this version")
    assert prov["gate_bytes"].startswith("absent:") and prov["epd_items"].startswith("absent:")
    assert "_k3_to_cuda_chw" in prov["to_chw_uint8"] and "_fill_transparent_bg" in prov["fill_transparent_bg"]
    feats = probes["features"]
    assert feats["has_deferred_feature"] is False and feats["gate_call_sites"] == []
    assert feats["contract_form"].startswith("n/a") and feats["grid_check"] == {"present": False}


def test_scheduler_whitelist_and_owners(probes):
    sched = probes["scheduler"]
    assert sched["k3"] is False and sched["k25"] is True  # 0.5.17 does not whitelist Kimi-K3 (PRE_PR: no skip)
    assert sched["owners"] == [[0], [2, 1, 3]] and sched["local"] is None
    assert "KimiK3ForConditionalGeneration" not in probes["features"]["scheduler_whitelist"]


def test_the_seam_says_n_a_for_deferral(probes):
    defers, gate_paths, prov = probes["seam"]
    assert defers is False and gate_paths == [["request", False]]
    assert prov.startswith("real: read off the loaded code")


DEFERRED = (
    "import json, sys\n"
    "from deferlab.impl.sglang.driver import SGLangImpl\n"
    "sgl = SGLangImpl(sys.argv[1])\n"
    "seam = sgl\n"
    "print('JSON:' + json.dumps({'deferred': sgl.has_deferred_path, 'parts': sgl.source.deferred_parts,\n"
    "    'absent': list(sgl.source.absent), 'defers': seam.defers(None), 'paths': seam.gate_paths(None),\n"
    "    'promotes': sgl.eager_promotes_rgb_key(), 'whitelist': sgl.source.whitelist_module}))\n"
)


def test_a_release_with_the_deferred_path_keeps_it():
    """0.5.23 (or ``DEFERLAB_SGLANG``, when it names another release), in its own process like 0.5.17."""
    version = VERSION if VERSION != "0.5.17" else "0.5.23"
    got = run_child(DEFERRED, version, spec=version, timeout=180)
    assert got["deferred"] is True and got["defers"] is True and got["absent"] == []
    assert len(got["parts"]) == 3 and all(got["parts"].values())
    assert got["paths"][0] == ["artifact", True]  # the gate decides per image on its default path
    assert got["promotes"] is False and got["whitelist"] == "sglang.srt.managers.mm_schedule"
