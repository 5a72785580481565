"""`impl.sglang.families.gemma4`: SGLang's Gemma 4 image path as a normalization-only path.

What is checked against what: the levels the path reads off SGLang's loader and the release's transformers
``Gemma4ImageProcessor`` (its torchvision backend, the one ``AutoImageProcessor`` resolves) against the arithmetic
the fragment states for that backend's rescale, written here in NumPy: ``f32(u) * f32(1/255)`` in float32, and
after the model's BF16 cast; C15 on it against the trained table (the PIL backend's ``f32(f64(u) / 255)``): 378 of
768 FP32 values off from level 3, none after BF16. The path runs in a child that loads SGLang with its companions.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.impl.sglang import norm_only


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    return norm_only.served("gemma4", request.param, asked=("backend",))


def stated() -> np.ndarray:
    """The torchvision backend's rescale as the fragment states it: (3, 256) float32."""
    return np.repeat((np.arange(256, dtype=np.float32) * np.float32(1 / 255))[None, :], 3, axis=0)


@pytest.mark.extra("transformers")
def test_levels_are_the_torchvision_backends_float32_rescale(served):
    norm_only.levels(served, stated())
    assert served["backend"] == "Gemma4ImageProcessor"  # transformers 5.x: the torchvision backend's class name
    assert "torchvision backend" in served["provenance"]["serve"]


@pytest.mark.extra("transformers")
def test_c15_fails_in_float32_only_as_the_fragment_expects(served):
    assert served["float32"]["problem"] == (
        f"sglang-{served['version']} (gemma4, served): 378 of 768 values differ from the checkpoint in FP32, "
        "first level 3, 0 of 768 after BF16"
    )
    assert served["bfloat16"]["problem"] is None  # the tower's BF16 is the checkpoint's


@pytest.mark.extra("transformers")
def test_geometry_is_refused_as_normalization_only(served):
    assert served["geometry"].startswith("InputValueError: n/a: ") and "gemma4" in served["geometry"]
    assert "not restated" in served["geometry"]
