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

from tests.impl.sglang.support import bits, release_child

CHILD = """
import json, sys
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from tests.impl.sglang.support import JSON_MARK, outcome

source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config("gemma4"), fam.Trained("gemma4")
out = {"version": source.version}
for dtype in ("float32", "bfloat16"):
    path = family_path(source, "gemma4", dtype=dtype)
    out[dtype] = {"levels": path.levels(cfg).tolist(), "problem": fam.normalization_problem(path, cfg, want)}
out["backend"] = type(path.image_processor(cfg)).__name__
out["provenance"] = path.provenance()
out["geometry"] = outcome(lambda: path.geometry(10, 10, cfg), "answered {}")
print(JSON_MARK + json.dumps(out))
"""


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    return release_child(CHILD, request.param)


def stated() -> np.ndarray:
    """The torchvision backend's rescale as the fragment states it: (3, 256) float32."""
    return np.repeat((np.arange(256, dtype=np.float32) * np.float32(1 / 255))[None, :], 3, axis=0)


def to_bf16(a: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even to BF16, widened back to float32 (as torch's cast does)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


@pytest.mark.extra("transformers")
def test_levels_are_the_torchvision_backends_float32_rescale(served):
    got = np.asarray(served["float32"]["levels"], dtype=np.float32)
    assert got.shape == (3, 256) and np.array_equal(bits(got), bits(stated()))
    cast = np.asarray(served["bfloat16"]["levels"], dtype=np.float32)
    assert np.array_equal(bits(cast), bits(to_bf16(stated())))
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
