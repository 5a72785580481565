"""Benchmarks: the NumPy oracle's `preprocess` beside the torch CPU implementation on the same inputs.

Run with ``OPENBLAS_NUM_THREADS=1 deferlab test -m bench -k test_reference`` (or ``deferlab bench``)
and read the ``min`` column. Each workload
is one benchmark group with two members (``reference`` and ``impl-torch-cpu``),
so pytest-benchmark reports their ratio from one run on one machine. The oracle
works in float64 through banded BLAS blocks; against real SGLang's own CPU
pipeline see ``test_reference_vs_sglang.py`` (target <= 1.5x). Both sides must
agree bit for bit on the no-resize workloads (fused normalize, as torch 2.13's
CPU addcmul) before anything is timed.

Why one BLAS thread: the reference's resize is many small band matmuls; on a
busy machine NumPy's OpenBLAS threads fight torch's OpenMP pool and other
processes, and the median swings 10x while the min stays put.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deferlab.reference.oracle.pipeline import preprocess
from deferlab.reference.system.profiles import profile

impl_pipeline = pytest.importorskip("deferlab.impl.pipeline")

pytestmark = pytest.mark.bench


def _workloads() -> dict[str, tuple[list[np.ndarray], str]]:
    rng = np.random.default_rng(33921)
    return {
        # semantics §9's microbenchmark shape: four 1536 x 1024 RGB images (kimi-k3 keeps their size).
        "4x1536x1024-rgb": ([rng.integers(0, 256, (3, 1024, 1536), dtype=np.uint8) for _ in range(4)], "kimi-k3"),
        # One 4k RGBA frame: exercises the chessboard composite (kimi-k3 keeps its size too).
        "3840x2160-rgba": ([rng.integers(0, 256, (4, 2160, 3840), dtype=np.uint8)], "kimi-k3"),
        # A resize workload: kimi-k2.5 shrinks 4000 x 3000 to 2073 x 1554.
        "4000x3000-rgb-resize": ([rng.integers(0, 256, (3, 3000, 4000), dtype=np.uint8)], "kimi-k2.5"),
    }


WORKLOADS = _workloads()


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_bench_reference(benchmark, name: str) -> None:
    """The oracle's end-to-end preprocess (fused normalize, CPU composite)."""
    images, prof = WORKLOADS[name]
    cfg = profile(prof)
    benchmark.group = name
    benchmark.extra_info["side"] = "reference"
    pixel_values, grids = benchmark(preprocess, images, cfg, arithmetic="cpu", fused=True)
    assert pixel_values.shape[0] == int((grids[:, 1] * grids[:, 2]).sum())


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_bench_impl_torch_cpu(benchmark, name: str) -> None:
    """The torch implementation on CPU, same inputs, as the side-by-side baseline."""
    images, prof = WORKLOADS[name]
    cfg = profile(prof)
    tensors = [torch.from_numpy(x) for x in images]
    benchmark.group = name
    benchmark.extra_info["side"] = "impl-torch-cpu"
    pixel_values, grids = benchmark(impl_pipeline.preprocess, tensors, cfg, device="cpu")
    ref_pv, ref_grids = preprocess(images, cfg, arithmetic="cpu", fused=True)
    assert np.array_equal(grids.numpy(), ref_grids)
    if "resize" not in name:  # no resize: nothing but exact float32 steps, so bitwise
        assert np.array_equal(pixel_values.numpy(), ref_pv)
