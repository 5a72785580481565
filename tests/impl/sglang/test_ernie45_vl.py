"""`impl.sglang.families.ernie45_vl`: SGLang's own ERNIE-4.5-VL normalization as a normalization-only path.

What is checked against what: the levels SGLang's ``_pixel_values_norm`` gives (run as shipped) against the
arithmetic semantics §18.9 states for it (``(f32(r) * f32(u) - f32(m)) / f32(s)``), written here in NumPy, for
the published statistics and for other ones (SGLang reads the checkpoint's, so drawn statistics reach it); the
BF16 path against that rounded once; the counts against the trained table (§18.7's 325 / 0). The module imports
transformers and torchvision, so the path runs in a child that loads SGLang with its companions.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from deferlab.reference.system.family_configs import family_profile
from tests.impl.sglang.support import default_spec, run_child

OTHER = ((0.1, 0.7, 0.33), (0.2, 0.9, 0.41), 0.0041)  # mean, std, rescale: not the published ones

CHILD = """
import json, sys
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from deferlab.reference.system.family_configs import NormConfig
from tests.impl.sglang.support import JSON_MARK

source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config("ernie-4.5-vl"), fam.Trained("ernie-4.5-vl")
mean, std, rescale = json.loads(sys.argv[2])
other = NormConfig(image_mean=tuple(mean), image_std=tuple(std), rescale_factor=rescale)
out = {"want": want.levels(cfg).tolist()}
for dtype in ("float32", "bfloat16"):
    path = family_path(source, "ernie-4.5-vl", dtype=dtype)
    out[dtype] = {
        "levels": path.levels(cfg).tolist(),
        "other": path.levels(other).tolist(),
        "attributes": [path.family, path.label, path.path, path.dtype, path.real_code],
        "problem": fam.normalization_problem(path, cfg, want),
        "provenance": path.provenance(),
    }
off = NormConfig(image_mean=(0.5,) * 3, image_std=(0.5,) * 3, do_normalize=False)
for name, call in (("geometry", lambda: path.geometry(10, 10, cfg)), ("off", lambda: path.levels(off))):
    try:
        out[name] = f"answered {call()}"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
print(JSON_MARK + json.dumps(out))
"""


@pytest.fixture(scope="module")
def served():
    spec = default_spec()
    return run_child(CHILD, spec, json.dumps(OTHER), spec=spec, timeout=900)


def stated(mean: tuple, std: tuple, rescale: float) -> np.ndarray:
    """§18.9's arithmetic of SGLang's ``_pixel_values_norm``, in float32 throughout: (3, 256)."""
    x = np.arange(256, dtype=np.float32)[None, :] * np.float32(rescale)
    return (x - np.asarray(mean, np.float32)[:, None]) / np.asarray(std, np.float32)[:, None]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.extra("transformers")
def test_levels_are_sglangs_stated_arithmetic_for_published_and_other_statistics(served):
    cfg = family_profile("ernie-4.5-vl")
    got = np.asarray(served["float32"]["levels"], dtype=np.float32)
    assert np.array_equal(bits(got), bits(stated(cfg.image_mean, cfg.image_std, cfg.rescale_factor)))
    assert np.array_equal(bits(served["float32"]["other"]), bits(stated(*OTHER)))
    assert served["float32"]["attributes"] == ["ernie-4.5-vl", "SGLANG", "served", "float32", True]
    assert served["float32"]["provenance"]["normalize"].endswith("on the processor's levels)")


@pytest.mark.extra("transformers")
def test_bf16_path_is_sglangs_own_cast_of_the_float32_values(served):
    for key in ("levels", "other"):
        f32 = torch.tensor(served["float32"][key], dtype=torch.float32)
        assert np.array_equal(bits(served["bfloat16"][key]), bits(f32.bfloat16().float().numpy()))


@pytest.mark.extra("transformers")
def test_c15_counts_are_semantics_18_7s(served):
    """325 of 768 differ in FP32; none after SGLang's own cast to BF16."""
    assert "325 of 768 values differ from the checkpoint in FP32, first level 48, 0 of 768 after BF16" in (
        served["float32"]["problem"] or ""
    )
    assert served["bfloat16"]["problem"] is None


@pytest.mark.extra("transformers")
def test_geometry_is_answered_and_a_config_it_cannot_express_is_refused_in_one_line(served):
    """Its geometry is judged (C13, `tests/impl/sglang/test_ernie45_vl_geometry.py`): 10 x 10 -> 56 x 56."""
    assert served["geometry"] == "answered Geometry(width=56, height=56, grid=(1, 4, 4), tokens=4, pad=(0, 0))"
    assert served["off"].startswith("InputValueError: sglang-") and "do_normalize=False" in served["off"]
