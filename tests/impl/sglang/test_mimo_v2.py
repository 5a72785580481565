"""`impl.sglang.families.mimo_v2`: SGLang's own MiMo-V2 image path as a normalization-only path for MiMo-V2.5.

What is checked against what: the levels SGLang's ``MiMoProcessor.get_visual_transform`` gives (run as shipped)
against the arithmetic semantics §18.9 states for ``standardize_batch``, written here in NumPy: ``(f32(u) - M) / S``
with ImageNet's 0..255 constants in 0.5.21 and CLIP's times 255 (each a float32 product) from 0.5.22; the counts
against the trained table (§18.7: 768 / 768, then 537 / 0). The module imports transformers and torchvision, so
the path runs in a child that loads SGLang with its companions.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.impl.sglang import norm_only
from tests.impl.sglang.support import CLIP_MEAN, CLIP_STD


@pytest.fixture(scope="module", params=["0.5.21", "newest"])
def served(request):
    return norm_only.served("mimo-v2.5", request.param, dtypes=("float32",))


def stated(version: str) -> np.ndarray:
    """§18.9's ``standardize_batch`` of the release: (3, 256) float32."""
    if tuple(int(p) for p in version.split(".")[:3]) < (0, 5, 22):
        mean = np.asarray((123.675, 116.28, 103.53), np.float32)
        std = np.asarray((58.395, 57.12, 57.375), np.float32)
    else:
        mean = np.asarray(CLIP_MEAN, np.float32) * np.float32(255.0)
        std = np.asarray(CLIP_STD, np.float32) * np.float32(255.0)
    u = np.arange(256, dtype=np.float32)[None, :]
    return (u - mean[:, None]) / std[:, None]


@pytest.mark.extra("transformers")
def test_levels_are_the_releases_stated_standardization(served):
    assert set(norm_only.levels(served, stated(served["version"]))) == {"float32"}
    assert "MiMoProcessor.get_visual_transform" in served["provenance"]["serve"]


@pytest.mark.extra("transformers")
def test_c15_counts_are_semantics_18_7s(served):
    """ImageNet's statistics (to 0.5.21): every value off, after BF16 too; CLIP's fused form: 537 / 0."""
    old = tuple(int(p) for p in served["version"].split(".")[:3]) < (0, 5, 22)
    counts = "768 of 768 values differ from the checkpoint in FP32, first level 0, 768 of 768 after BF16"
    if not old:
        counts = "537 of 768 values differ from the checkpoint in FP32, first level 1, 0 of 768 after BF16"
    assert counts in served["float32"]["problem"]
    # its geometry is judged (C13, tests/impl/sglang/test_mimo_v2_geometry.py): 10 x 10 -> 56 x 56
    assert served["geometry"] == "answered Geometry(width=56, height=56, grid=(1, 4, 4), tokens=4, pad=(0, 0))"
