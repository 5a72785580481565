"""Kimi-K3 on vLLM's served default (``mm_device_do_normalize`` on from 0.32.0) and its host row; the companions
the release pins, as the load records them; the default report's load without them (a child)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from deferlab.impl.loader import wheels
from deferlab.impl.vllm.served import paths
from deferlab.impl.vllm.sources import ENGINE
from deferlab.reference.oracle import checkpoint
from deferlab.reference.system.profiles import profile
from tests.impl.vllm.support import child, rgb

K3 = profile("kimi-k3")
# The numbers below are vLLM 0.34.0's (the in-process release is DEFERLAB_VLLM, default 0.34.0).
pytestmark = [
    pytest.mark.skipif(os.environ.get("DEFERLAB_VLLM", "0.34.0") != "0.34.0", reason="0.34.0's facts"),
    pytest.mark.extra("vllm"),
]


@pytest.fixture(scope="module")
def kimi(vllm_source):
    return paths(vllm_source, "kimi-k3")


def test_the_default_is_the_device_path_and_the_host_row_is_todays(kimi):
    device, host = kimi
    assert (device.label, device.path, device.dtype, device.device_normalize) == (
        "VLLM",
        "device-normalized",
        "bfloat16",
        True,
    )
    assert (host.label, host.path, host.dtype, host.device_normalize) == (
        "VLLM host-normalized",
        "host-normalized",
        "float32",
        False,
    )
    assert device.name != host.name and "merge_mm_processor_kwargs" in device.provenance()["serve"]


def test_the_device_path_sends_uint8_with_padding_level_0_through_the_releases_norm(kimi):
    device, host = kimi
    image = rgb(50, 30)  # 50x30 -> padded: the pad is level 0 on the device path
    values, grids = device.serve([image], K3)
    host_values, host_grids = host.serve([image], K3)
    assert grids.tolist() == host_grids.tolist() == [[1, 4, 4]] and values.shape == host_values.shape
    table = device.levels(K3)
    levels = np.stack([np.searchsorted(table[c], values[:, c]) for c in range(3)], axis=1)
    assert (table[np.arange(3)[None, :, None, None], levels] == values).all()  # each value a level's, exactly
    host_levels = np.stack([np.searchsorted(host.levels(K3)[c], host_values[:, c]) for c in range(3)], axis=1)
    assert (levels == host_levels).all()  # the same uint8 levels reach both normalizations
    assert (levels[-1, :, -1, -1] == 0).all()  # the bottom-right pixel is padding


def test_device_levels_are_the_release_arithmetic_and_differ_from_the_checkpoints(vllm_source):
    """Semantics §18 / research table A2 with 0.5/0.5: weight 2*f32(1/255), bias -1; forward_native multiplies,
    then adds (two fp32 roundings): 333 of 768 values differ from the checkpoint's normalization, and after the
    BF16 cast 3 (level 127 of each channel)."""
    (fp32,) = paths(vllm_source, "kimi-k3", {"device_normalize": True, "dtype": "float32"})
    (bf16,) = paths(vllm_source, "kimi-k3", {"device_normalize": True})
    std = torch.tensor([0.5] * 3)
    weight, bias = ((1 / 255) / std).numpy()[:, None], (-torch.tensor([0.5] * 3) / std).numpy()[:, None]
    want = np.arange(256, dtype=np.float32)[None] * weight + bias
    got = fp32.levels(K3)
    assert (got == want).all() and fp32.label == "VLLM"
    trained = checkpoint.normalization_table(K3)
    assert int((got != trained).sum()) == 333
    as_bf16 = torch.from_numpy(trained).to(torch.bfloat16).float().numpy()
    differ = np.argwhere(bf16.levels(K3) != as_bf16)
    assert differ[:, 1].tolist() == [127, 127, 127]
    assert (bf16.levels(K3) == torch.from_numpy(got).to(torch.bfloat16).float().numpy()).all()


def test_the_host_row_is_todays_path_bitwise_the_checkpoint_for_half(kimi):
    _, host = kimi
    assert (host.levels(K3) == checkpoint.normalization_table(K3)).all()
    assert "normalize" not in host.provenance()


def test_the_companions_are_the_releases_pins_recorded_in_the_load(vllm_source):
    records = {(r.module, r.kind): r.why for r in vllm_source.stand_ins}
    tf, tv = vllm_source.companions["transformers"], vllm_source.companions["torchvision"]
    assert (tv.version, tv.requirement) == ("0.29.0", "==0.29.0")
    import transformers

    assert transformers.__version__ == tf.version and Path(transformers.__file__).is_relative_to(tf.tree)
    assert f"transformers {tf.version} from {tf.tree}" in records[("transformers", "companion")]
    assert "never installed" in records[("torchvision", "companion")]
    assert wheels.cached_tree(tf.companion.engine, tf.version) == tf.tree


def test_torchvision_imports_beside_this_torch_on_its_declared_schemas(vllm_source):
    """The two schemas its _meta_registrations.py needs are declared (recorded); its Python transforms run; the
    operators have no kernel."""
    import torchvision.transforms as T
    from torchvision.transforms.v2 import functional as tvF

    declared = {r.module: r.why for r in vllm_source.stand_ins if r.kind == "declared"}
    assert sorted(declared) == ["torchvision::nms", "torchvision::qnms"]
    assert "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor" in declared["torchvision::nms"]
    tensor = T.Compose([T.Resize((8, 8), interpolation=T.InterpolationMode.BICUBIC), T.ToTensor()])(rgb(13, 9))
    assert tensor.shape == (3, 8, 8) and tensor.dtype == torch.float32
    resized = tvF.resize(torch.zeros(3, 9, 13, dtype=torch.uint8), [4, 6], antialias=True)
    assert resized.dtype == torch.uint8 and resized.shape == (3, 4, 6)
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.ops.torchvision.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)


def test_the_default_reports_kimi_load_needs_no_companion():
    """The Kimi-K3 paths load without transformers' pin (the default report), in their own process."""
    got = child("kimi", "0.34.0")
    assert got["companions"] == [] and [p["label"] for p in got["paths"]] == ["VLLM", "VLLM host-normalized"]
    assert all(p["shape"] == [16, 3, 14, 14] and p["grids"] == [[1, 4, 4]] for p in got["paths"])
    # transformers as this environment has it (recorded: not the release's pin), or the functional stand-in
    kinds = [r["kind"] for r in got["transformers"] if r["module"] == "transformers"]
    assert kinds == (["installed"] if got["installed"] else ["missing"]), got["transformers"]
    if got["installed"]:
        assert "not fetched at the release's pin (vllm 0.34.0 requires transformers<5.23.0,>=5.16.1)" in str(got)


def test_offline_with_the_companion_not_cached_is_refused_in_one_line(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "vllm").symlink_to(wheels.deferlab_cache() / "vllm", target_is_directory=True)
    if wheels.cached_tree(ENGINE, "0.34.0", cache / "vllm") is None:
        pytest.skip("vllm 0.34.0 is not cached here")
    got = child("offline", "0.34.0", env={"DEFERLAB_CACHE": str(cache), "DEFERLAB_OFFLINE": "1"})
    assert got["type"] == "VLLMFetchError" and "\n" not in got["error"]
    assert "transformers" in got["error"] and "DEFERLAB_OFFLINE=1 forbids fetching it" in got["error"]
    assert got["error"].endswith("cached transformers: none")
    assert not (cache / "transformers").exists() or not any((cache / "transformers").iterdir())
