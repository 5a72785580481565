"""vLLM's family paths on the default release (0.34.0), run for real with the transformers and torchvision it pins:
what each serves, its geometry and levels, and what its provenance names; 0.33.0 in a child."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from deferlab.impl.vllm import serving
from deferlab.impl.vllm.family import NotCovered
from deferlab.impl.vllm.served import FAMILIES, paths
from deferlab.reference.system.served import FamilyPath
from tests.impl.vllm.support import CONFIGS, child, rgb

# The numbers below are vLLM 0.34.0's (the in-process release is DEFERLAB_VLLM, default 0.34.0).
pytestmark = [
    pytest.mark.skipif(os.environ.get("DEFERLAB_VLLM", "0.34.0") != "0.34.0", reason="0.34.0's facts"),
    pytest.mark.extra("vllm"),
    pytest.mark.extra("transformers"),
]


def smart_resize(h: int, w: int, factor: int, lo: int, hi: int) -> tuple[int, int]:
    """transformers' smart_resize as its source reads (the expectation, computed by hand below too)."""
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = (
            max(factor, math.floor(h / beta / factor) * factor),
            max(factor, math.floor(w / beta / factor) * factor),
        )
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


@pytest.fixture(scope="module")
def family_paths(vllm_source):
    return {family: paths(vllm_source, family) for family in FAMILIES if family != "kimi-k3"}


def test_each_family_has_the_releases_default_and_the_host_row_beside_a_device_default(family_paths):
    got = {f: [(p.label, p.path, p.dtype) for p in found] for f, found in family_paths.items()}
    device, host = ("VLLM", "device-normalized", "bfloat16"), ("VLLM host-normalized", "host-normalized", "float32")
    assert got["qwen2.5-vl"] == got["qwen3-vl"] == [device, host]
    assert got["internvl"] == [("VLLM", "served", "float32")]
    assert all(got[f] == [device] for f in ("glm-4.1v", "mistral3", "gemma3", "gemma4"))
    assert all(isinstance(p, FamilyPath) for found in family_paths.values() for p in found)


@pytest.mark.parametrize(
    "family, size, want",
    [  # (width, height) -> (resized w, h, tokens), smart_resize by hand: factor 28 (2.5) / 32 (3)
        ("qwen2.5-vl", (640, 480), (644, 476, 391)),  # round(480/28)=17 -> 476, round(640/28)=23 -> 644
        ("qwen2.5-vl", (90, 60), (84, 56, 6)),  # 56x84 = 4704 >= 3136
        ("qwen2.5-vl", (28, 28), (56, 56, 4)),  # 784 < 3136: beta 2 -> ceil(28*2/28)*28
        ("qwen3-vl", (640, 480), (640, 480, 300)),
        ("qwen3-vl", (90, 60), (320, 224, 70)),  # 6144 < 65536: beta sqrt(65536/5400) -> ceil(6.53)*32, ceil(9.80)*32
        ("qwen3-vl", (28, 28), (256, 256, 64)),
    ],
)
def test_qwen_geometry_is_transformers_smart_resize_with_the_checkpoints_bounds(family_paths, family, size, want):
    device, host = family_paths[family]
    cfg = CONFIGS[family]
    got = device.geometry(*size, cfg)
    assert (got.width, got.height, got.tokens) == want and host.geometry(*size, cfg) == got
    patch = cfg["patch_size"]
    assert got.grid == (1, got.height // patch, got.width // patch)
    lo, hi = (3136, 12845056) if family == "qwen2.5-vl" else (65536, 16777216)
    assert smart_resize(size[1], size[0], patch * 2, lo, hi) == (want[1], want[0])


def test_qwen_min_max_pixels_settings_are_honoured(vllm_source):
    (path,) = paths(vllm_source, "qwen2.5-vl", {"device_normalize": True, "processor_kwargs": {"max_pixels": 50000}})
    got = path.geometry(640, 480, CONFIGS["qwen2.5-vl"])
    assert (got.width, got.height) == smart_resize(480, 640, 28, 3136, 50000)[::-1] == (252, 168)
    values, grids = path.serve([rgb(640, 480)], CONFIGS["qwen2.5-vl"])
    assert grids.tolist() == [[1, 12, 18]] and values.shape == (12 * 18, 3, 2 * 14 * 14)


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_qwen_serves_uint8_through_the_device_norm_and_the_host_row_normalizes_itself(family_paths, family):
    device, host = family_paths[family]
    cfg = CONFIGS[family]
    image = rgb(90, 60)
    values, grids = device.serve([image], cfg)
    host_values, host_grids = host.serve([image], cfg)
    assert grids.tolist() == host_grids.tolist() == [[1, *device.geometry(90, 60, cfg).grid[1:]]]
    p = cfg["patch_size"]
    assert values.shape == host_values.shape == (grids[0, 1] * grids[0, 2], 3, 2 * p * p)
    # every served value is one of the 256 levels' (its table): the device path got uint8 and normalized it
    table = device.levels(cfg)
    for c in range(3):
        assert np.isin(values[:, c], table[c]).all() and np.isin(host_values[:, c], host.levels(cfg)[c]).all()
    bf16 = table.astype(np.float32).view(np.uint32) & 0xFFFF
    assert not bf16.any()  # widened bfloat16


def test_internvl_tiles_the_card_way_and_normalizes_on_the_host(family_paths):
    (path,) = family_paths["internvl"]
    cfg = CONFIGS["internvl"]
    one, three = path.geometry(448, 448, cfg), path.geometry(896, 448, cfg)
    assert (one.grid, one.tokens) == ((1, 1, 1), 256)
    assert (three.width, three.height, three.grid, three.tokens) == (896, 448, (1, 2, 3), 768)
    values, grids = path.serve([rgb(896, 448), rgb(448, 448, seed=1)], cfg)
    assert grids.tolist() == [[1, 2, 3], [1, 1, 1]] and values.shape == (4, 3, 448 * 448)
    imagenet = (np.arange(256) / 255 - np.array([[0.485], [0.456], [0.406]])) / np.array([[0.229], [0.224], [0.225]])
    assert np.abs(path.levels(cfg) - imagenet).max() < 2e-6


def test_normalization_only_families_give_levels_through_the_releases_norm(family_paths):
    gemma3, gemma4 = family_paths["gemma3"][0], family_paths["gemma4"][0]
    assert gemma3.layout == "bchw" and gemma4.layout == "pcl"
    assert gemma3.levels(CONFIGS["gemma3"])[:, [0, 255]].tolist() == [[-1.0, 1.0]] * 3
    assert gemma4.levels(CONFIGS["gemma4"])[:, [0, 255]].tolist() == [[0.0, 1.0]] * 3  # rescale only: 1/255
    with pytest.raises(NotCovered, match="normalization only"):
        gemma3.serve([rgb(8, 8)], CONFIGS["gemma3"])
    with pytest.raises(NotCovered, match=r"n/a: .* does not normalize Gemma 3 on the device \(the setting"):
        paths(family_paths["gemma3"][0].source, "gemma3", {"device_normalize": False})


def test_float32_is_selectable_and_the_clip_table_is_the_release_arithmetic(vllm_source):
    (path,) = paths(vllm_source, "glm-4.1v", serving.Settings(device_normalize=True, dtype="float32"))
    mean, std = (torch.tensor(CONFIGS["glm-4.1v"][k], dtype=torch.float32) for k in ("image_mean", "image_std"))
    weight, bias = ((1 / 255) / std).numpy()[:, None], (-mean / std).numpy()[:, None]  # its fp32 buffers
    want = np.arange(256, dtype=np.float32)[None] * weight + bias  # forward_native: multiply, then add
    assert path.dtype == "float32" and (path.levels(CONFIGS["glm-4.1v"]) == want).all()


def test_provenance_names_each_engine_function_and_the_companions(family_paths, vllm_source):
    device = family_paths["qwen3-vl"][0]
    device.serve([rgb(40, 40)], CONFIGS["qwen3-vl"])
    steps = device.provenance()
    assert "Qwen3VLProcessingInfo._get_vision_info" in steps["geometry"]
    assert "Qwen2VLImageProcessor.__call__ (TorchvisionBackend)" in steps["serve"]
    assert "FusedMMInputNorm.forward_native into bfloat16" in steps["normalize"]
    transformers = vllm_source.companions["transformers"]
    assert transformers.requirement == "<5.23.0,>=5.16.1"  # vLLM 0.34.0's METADATA
    assert steps["companion transformers"].startswith(f"transformers {transformers.version} ")
    assert steps["companion torchvision"].startswith("torchvision 0.29.0 (vllm 0.34.0 requires torchvision==0.29.0")
    assert "supports_mm_device_do_normalize" in steps["device_normalize"]


def test_bad_input_is_one_line():
    with pytest.raises(NotCovered, match=r"n/a: no vLLM path for model family 'llava'; accepted: kimi-k3, "):
        paths("0.34.0", "llava")
    with pytest.raises(ValueError, match=r"dtype 'float16' is not accepted; accepted: bfloat16, float32"):
        paths("0.34.0", "gemma3", {"dtype": "float16"})
    with pytest.raises(ValueError, match=r"unknown serving settings \['normalize'\]"):
        paths("0.34.0", "gemma3", {"normalize": True})


def test_release_0_33_0_in_its_own_process():
    """0.33.0 (transformers < 5.21.0): the same Qwen and InternVL numbers; Gemma 3 and 4 not served (n/a)."""
    got = child("families", "0.33.0")
    fam = got["families"]
    assert fam["gemma3"].startswith("n/a: vllm-0.33.0 ") and fam["gemma4"].startswith("n/a: vllm-0.33.0 ")
    assert [r["label"] for r in fam["qwen3-vl"]] == ["VLLM", "VLLM host-normalized"]
    assert fam["qwen2.5-vl"][0]["geometry"][0][:2] == [644, 476] and fam["qwen3-vl"][0]["geometry"][1][:2] == [320, 224]
    assert [g[2] for g in fam["internvl"][0]["geometry"]] == [[1, 1, 1], [1, 2, 3], [1, 3, 4]]
    tf = got["companions"]["transformers"]
    assert tf["requirement"] == "<5.21.0,>=5.16.1" and tf["version"].startswith("5.20.")


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl", "internvl", "gemma3"])
def test_the_registrys_typed_configs_are_read_as_the_files_they_stand_for(family_paths, family):
    """`reference.system.family_configs`' typed configs give what the published dicts give."""
    configs = pytest.importorskip("deferlab.reference.system.family_configs")
    typed = configs.family_profile(family)
    path = family_paths[family][0]
    assert (path.levels(typed) == path.levels(CONFIGS[family])).all()
    if family != "gemma3":
        for size in ((640, 480), (90, 60), (896, 448)):
            assert path.geometry(*size, typed) == path.geometry(*size, CONFIGS[family])
    with pytest.raises(TypeError, match=r"cfg must be the family's published config dict .* got int"):
        path.levels(3)
