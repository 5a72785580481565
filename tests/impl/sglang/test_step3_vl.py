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

from tests.impl.sglang.support import CLIP_MEAN, CLIP_STD, bits, release_child

CHILD = """
import json, sys
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from tests.impl.sglang.support import JSON_MARK, outcome

source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config("step3-vl"), fam.Trained("step3-vl")
out = {"version": source.version}
for dtype in ("float32", "bfloat16"):
    path = family_path(source, "step3-vl", dtype=dtype)
    out[dtype] = {"levels": path.levels(cfg).tolist(), "problem": fam.normalization_problem(path, cfg, want)}
out["provenance"] = path.provenance()
out["geometry"] = outcome(lambda: path.geometry(10, 10, cfg), "answered {}")
out["dtype"] = outcome(lambda: family_path(source, "step3-vl", dtype="float16"), "accepted")
print(JSON_MARK + json.dumps(out))
"""


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    return release_child(CHILD, request.param)


def stated() -> np.ndarray:
    """§18.9's ``ToTensor`` then ``Normalize(CLIP)``: (3, 256) float32."""
    x = np.arange(256, dtype=np.float32)[None, :] / np.float32(255)
    mean, std = np.asarray(CLIP_MEAN, np.float32), np.asarray(CLIP_STD, np.float32)
    return (x - mean[:, None]) / std[:, None]


def to_bf16(a: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even to BF16, widened back to float32 (as torch's cast does)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


@pytest.mark.extra("transformers")
def test_levels_are_the_stated_totensor_then_normalize(served):
    got = np.asarray(served["float32"]["levels"], dtype=np.float32)
    assert got.shape == (3, 256) and np.array_equal(bits(got), bits(stated()))
    cast = np.asarray(served["bfloat16"]["levels"], dtype=np.float32)
    assert np.array_equal(bits(cast), bits(to_bf16(stated())))
    assert not np.array_equal(bits(cast), bits(got))  # the cast is applied: some level moved
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
