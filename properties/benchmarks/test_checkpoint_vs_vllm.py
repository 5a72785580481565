"""Benchmark: the checkpoint oracle beside vLLM's own CPU processor for Kimi-K3, on the three workloads of
issue 15.

vLLM's side is the path it serves (`impl.vllm.driver.VLLMPath.serve`: its
parser, then ``KimiK25FusedVisionProcessor`` with its numba patch writer,
``deferlab[vllm]``): the fastest CPU implementation of the same pipeline a
user would pick instead of the checkpoint's processor. The oracle is
`reference.oracle.checkpoint.preprocess`. Both resize with the same Pillow
call on RGB images, so before timing they must give the same grids and, on
the RGB workloads, the same pixel values to within vLLM's float32
normalization table (C15: bitwise for Kimi-K3's 0.5/0.5). Timings alternate,
best of a few rounds; ``checkpoint_over_vllm_<workload>`` gates at 2.0
(`reports.report.benchmarks`).
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from deferlab.properties.benchmarks.support import best_alternating
from deferlab.reference.system.profiles import profile

pytestmark = pytest.mark.bench

K3 = profile("kimi-k3")
WORKLOADS = {
    "4x1536x1024-rgb": ((1024, 1536, 3), 4),
    "8000x6000-rgb-downscale": ((6000, 8000, 3), 1),
    "3840x2160-rgba": ((2160, 3840, 4), 1),
}


@pytest.fixture(scope="module")
def vllm():
    """vLLM's host-normalized path (``DEFERLAB_VLLM``, default the driver's release); skipped only when its wheel
    cannot be fetched."""
    import os

    from deferlab.impl.vllm.driver import VLLMPath
    from deferlab.impl.vllm.sources import DEFAULT_VERSION, VLLMFetchError

    try:
        # the host-normalized setting: the values §16.4 holds bitwise equal to the checkpoint's (from 0.32.0 the
        # default normalizes on the device, x * w + b, which C15 records as differing: no timing of equal work)
        return VLLMPath(os.environ.get("DEFERLAB_VLLM", DEFAULT_VERSION), device_normalize=False)
    except VLLMFetchError as e:
        pytest.skip(f"vllm wheel not fetchable: {e}")


def _images(shape: tuple[int, int, int], count: int) -> list[Image.Image]:
    rng = np.random.default_rng(33921)
    mode = "RGBA" if shape[2] == 4 else "RGB"
    out = []
    for _ in range(count):
        arr = rng.integers(0, 256, shape, dtype=np.uint8)
        if mode == "RGBA":
            arr[..., 3] = 255  # opaque: both pipelines then agree on levels (the partly transparent case is C14's)
        out.append(Image.fromarray(arr, mode))
    return out


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_bench_checkpoint_vs_vllm(benchmark, vllm, name: str) -> None:
    """checkpoint oracle / vLLM CPU time on one workload (target <= 2x), after checking both agree."""
    from deferlab.reference.oracle import checkpoint

    shape, count = WORKLOADS[name]
    images = _images(shape, count)
    ref_pv, ref_grids = checkpoint.preprocess(images, K3)
    vl_pv, vl_grids = vllm.serve(images, K3)
    assert np.array_equal(vl_grids, ref_grids), "grids differ"
    assert np.array_equal(vl_pv.view(np.uint32), ref_pv.view(np.uint32)), "pixel values differ (semantics §16.4)"
    ref_s, vl_s = best_alternating(lambda: checkpoint.preprocess(images, K3), lambda: vllm.serve(images, K3))
    benchmark.group = f"checkpoint-vs-vllm:{name}"
    benchmark.pedantic(checkpoint.preprocess, args=(images, K3), rounds=1)
    key = "checkpoint_over_vllm_" + name.replace("-", "_")
    benchmark.extra_info.update({"checkpoint_s": ref_s, "vllm_s": vl_s, key: ref_s / vl_s, "vllm": vllm.system})
    print(
        f"\n[bench checkpoint vs {vllm.system}] {name}: oracle {ref_s:.3f} s, vLLM {vl_s:.3f} s, ratio {ref_s / vl_s:.2f}"
    )
