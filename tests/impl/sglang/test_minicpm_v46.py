"""`impl.sglang.families.minicpm_v46`: SGLang's own MiniCPM-V 4.6 image processor as a normalization-only path.

What is checked against what: the levels the path reads off SGLang's packed output against the arithmetic
semantics §18.9 states for ``MiniCPMV4_6ImageProcessor._normalize`` (float32 ``u * f32(1/255)``, then
``(x - 0.5) / 0.5``), written here in NumPy; the BF16 path against that exactly rounded; the counts against the
trained table of §18.1 (§18.7's 333 / 3). The module imports transformers and torchvision, so the path runs in a
child that loads SGLang with its companions (as `family_child`).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.impl.sglang.support import bits, release_child

CHILD = """
import json, sys
import numpy as np
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from tests.impl.sglang.support import JSON_MARK, outcome

source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config("minicpm-v-4.6"), fam.Trained("minicpm-v-4.6")
out = {"want": want.levels(cfg).tolist()}
for dtype in ("float32", "bfloat16"):
    path = family_path(source, "minicpm-v-4.6", dtype=dtype)
    out[dtype] = {
        "levels": path.levels(cfg).tolist(),
        "attributes": [path.family, path.label, path.path, path.dtype, path.real_code],
        "problem": fam.normalization_problem(path, cfg, want),
        "provenance": path.provenance(),
    }
for name, call in (("geometry", lambda: path.geometry(10, 10, cfg)), ("serve", lambda: path.serve([], cfg))):
    out[name] = outcome(call)
out["bad_dtype"] = outcome(lambda: family_path(source, "minicpm-v-4.6", dtype="float16"), "accepted")
print(JSON_MARK + json.dumps(out))
"""


@pytest.fixture(scope="module")
def served():
    return release_child(CHILD, "newest")


def stated(levels: np.ndarray) -> np.ndarray:
    """§18.9's arithmetic of SGLang's ``_normalize``, in float32 throughout."""
    x = levels.astype(np.float32) * np.float32(1 / 255)
    return (x - np.float32(0.5)) / np.float32(0.5)


@pytest.mark.extra("transformers")
def test_levels_are_sglangs_stated_arithmetic_read_through_its_packing(served):
    got = np.asarray(served["float32"]["levels"], dtype=np.float32)
    assert got.shape == (3, 256)
    assert np.array_equal(bits(got), bits(np.broadcast_to(stated(np.arange(256)), (3, 256))))
    assert served["float32"]["attributes"] == ["minicpm-v-4.6", "SGLANG", "served", "float32", True]
    assert "MiniCPMV4_6MultimodalProcessor._preprocess_images" in served["float32"]["provenance"]["serve"]


@pytest.mark.extra("transformers")
def test_bf16_path_is_the_float32_values_rounded_once(served):
    f32 = torch.tensor(served["float32"]["levels"], dtype=torch.float32)
    bf16 = np.asarray(served["bfloat16"]["levels"], dtype=np.float32)
    assert np.array_equal(bits(bf16), bits(f32.bfloat16().float().numpy()))


@pytest.mark.extra("transformers")
def test_c15_counts_are_semantics_18_7s(served):
    """333 of 768 differ in FP32, 3 after BF16 (level 127 of each channel) against the trained table."""
    stated_counts = "333 of 768 values differ from the checkpoint in FP32, first level 48, 3 of 768 after BF16"
    assert stated_counts in served["float32"]["problem"]
    want = np.asarray(served["want"], dtype=np.float32)
    got = np.asarray(served["bfloat16"]["levels"], dtype=np.float32)
    assert want.shape == got.shape == (3, 256)
    rounded = torch.from_numpy(want).bfloat16().float().numpy()
    assert np.argwhere(bits(rounded) != bits(got)).tolist() == [[0, 127], [1, 127], [2, 127]]


@pytest.mark.extra("transformers")
def test_geometry_serve_and_bad_dtype_refused_in_one_line(served):
    # the geometry is answered since MiniCPM-V 4.6 became a geometry-scope family (C13, semantics §18.9); serving
    # a whole request still is not
    assert not served["geometry"].startswith("InputValueError")
    assert served["serve"].startswith("InputValueError: n/a: sglang-") and "normalization only" in served["serve"]
    assert served["bad_dtype"] == (
        "InputValueError: dtype: 'float16'; accepted: 'bfloat16' (the tower's cast) or 'float32' (none)"
    )
