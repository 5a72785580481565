"""`impl.sglang.families.glm4v`: SGLang's GLM-4V image path for GLM-4.1V, judged on normalization (C15).

What is checked against what: the levels the path gives (SGLang's own ``_load_single_item``, then the release's
transformers ``Glm4vImageProcessor``) against the arithmetic semantics §18.9 states for the torchvision backend's
fused ``rescale_and_normalize``, written here in NumPy: ``(f32(u) - f32(f32(m) * 255)) / f32(f32(s) * 255)``, with
the published CLIP statistics and with drawn ones (they must reach the processor); the counts against §18.9's table
(537 / 768 in FP32, 0 after BF16); the processor is the pin's torchvision backend; bad input refused in one line.
The module imports transformers and torchvision, so the path runs in a child that loads SGLang with its companions;
0.5.17 (transformers 5.12.1, no ``smart_rgb_conversion``) and the newest release (5.19.0, with it).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.impl.sglang.support import default_spec, run_child

CHILD = """
import json, sys
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from deferlab.reference.system.family_configs import NormConfig
from tests.impl.sglang.support import JSON_MARK

source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config("glm-4.1v"), fam.Trained("glm-4.1v")
path = family_path(source, "glm-4.1v", dtype="float32")
half = NormConfig(image_mean=(0.5,) * 3, image_std=(0.5,) * 3)
ip = path.image_processor(cfg)
out = {"version": source.version, "levels": path.levels(cfg).tolist(), "half": path.levels(half).tolist(),
       "problem": fam.normalization_problem(path, cfg, want), "provenance": path.provenance(),
       "ip": [type(ip).__module__, type(ip).__name__],
       "smart_rgb": bool(getattr(path.module.Glm4vImageProcessor, "smart_rgb_conversion", False))}
for name, call in (("dtype", lambda: family_path(source, "glm-4.1v", dtype="float16")),
                   ("width", lambda: path.geometry(0, 10, cfg))):
    try:
        call()
        out[name] = "accepted"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
print(JSON_MARK + json.dumps(out))
"""
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    spec = default_spec() if request.param == "newest" else request.param
    return run_child(CHILD, spec, spec=spec, timeout=900)


def stated(mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """§18.9's fused form of the torchvision backend: (3, 256) float32."""
    scale = np.float32(1.0 / (1 / 255))
    m = np.asarray(mean, np.float32) * scale
    s = np.asarray(std, np.float32) * scale
    u = np.arange(256, dtype=np.float32)[None, :]
    return (u - m[:, None]) / s[:, None]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.extra("transformers")
def test_levels_are_the_fused_torchvision_normalization(served):
    got = np.asarray(served["levels"], dtype=np.float32)
    assert got.shape == (3, 256) and np.array_equal(bits(got), bits(stated(CLIP_MEAN, CLIP_STD)))


@pytest.mark.extra("transformers")
def test_the_configs_statistics_reach_the_processor(served):
    got = np.asarray(served["half"], dtype=np.float32)
    assert np.array_equal(bits(got), bits(stated((0.5,) * 3, (0.5,) * 3)))
    assert not np.array_equal(got, np.asarray(served["levels"], dtype=np.float32))


@pytest.mark.extra("transformers")
def test_c15_counts_are_semantics_18_9s(served):
    counts = "537 of 768 values differ from the checkpoint in FP32, first level 1, 0 of 768 after BF16"
    assert counts in served["problem"]


@pytest.mark.extra("transformers")
def test_it_runs_the_pins_torchvision_processor_and_sglangs_own_loader(served):
    assert served["ip"] == ["transformers.models.glm4v.image_processing_glm4v", "Glm4vImageProcessor"]
    assert "Glm4vImageProcessor._load_single_item (own" in served["provenance"]["load"]
    # smart_rgb_conversion (semantics §18.9, §20.8): from 0.5.20 only (read in every cached wheel)
    assert served["smart_rgb"] == (tuple(int(p) for p in served["version"].split(".")[:3]) >= (0, 5, 20))


@pytest.mark.extra("transformers")
def test_bad_input_is_refused_in_one_line(served):
    assert served["dtype"].startswith("InputValueError: dtype: 'float16'; accepted: 'bfloat16'")
    assert served["width"].startswith("InputValueError: width") and "\n" not in served["width"]
