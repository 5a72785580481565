"""`impl.sglang.families.step3_vl`: SGLang's own Step3-VL image path as a normalization-only path.

What is checked against what: the levels SGLang's ``Step3VLProcessor`` gives (its ``_split_images`` and
``_convert_images_to_pixel_values`` run as shipped) against the arithmetic semantics §18.9 states for
``Step3VisionProcessor``, written here in NumPy: ``ToTensor``'s ``f32(u) / 255`` then ``Normalize``'s
``(x - f32(m)) / f32(s)`` with CLIP's constants, in FP32 and after the model's BF16 cast; C15 on it against the
trained table (§18.7: it holds, no value off), and the geometry refused as ``n/a``. The module imports transformers
and torchvision, so the path runs in a child that loads SGLang with its companions.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.impl.sglang import norm_only
from tests.impl.sglang.support import CLIP_MEAN, CLIP_STD, bits


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    return norm_only.served("step3-vl", request.param, asked=("dtype",))


def stated() -> np.ndarray:
    """§18.9's ``ToTensor`` then ``Normalize(CLIP)``: (3, 256) float32."""
    x = np.arange(256, dtype=np.float32)[None, :] / np.float32(255)
    mean, std = np.asarray(CLIP_MEAN, np.float32), np.asarray(CLIP_STD, np.float32)
    return (x - mean[:, None]) / std[:, None]


@pytest.mark.extra("transformers")
def test_levels_are_the_stated_totensor_then_normalize(served):
    got = norm_only.levels(served, stated())
    assert not np.array_equal(bits(got["bfloat16"]), bits(got["float32"]))  # the cast is applied: some level moved
    assert "Step3VisionProcessor" in served["provenance"]["serve"]


@pytest.mark.extra("transformers")
def test_c15_holds_as_semantics_18_7_expects(served):
    """The checkpoint's own order (ToTensor, then Normalize): no value off in FP32 or after BF16."""
    assert served["float32"]["problem"] is None and served["bfloat16"]["problem"] is None


@pytest.mark.extra("transformers")
def test_geometry_and_unknown_dtype_are_refused_in_one_line(served):
    assert served["geometry"].startswith("InputValueError: n/a: ") and "step3-vl" in served["geometry"]
    assert "remote-code rule is unread" in served["geometry"]
    assert served["dtype"].startswith("InputValueError: dtype: 'float16'; accepted: 'bfloat16'")
