"""vLLM 0.34.0's Nemotron families (semantics §18.9): Nemotron VL's norm is vLLM's own SigLIP constants whatever the
checkpoint says, Nano Nemotron VL's its config.json's norm_mean / norm_std, Parse's build_mm_input_norm on the
processor config; each run through the release's own FusedMMInputNorm (`impl.vllm.norm_call`)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest

from deferlab.impl.vllm import norm_call
from deferlab.impl.vllm.served import NORM_FAMILIES, paths
from deferlab.reference.oracle import family_norm
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.family_configs import NormConfig
from tests.impl.vllm.support import CONFIGS

pytestmark = [
    pytest.mark.skipif(os.environ.get("DEFERLAB_VLLM", "0.34.0") != "0.34.0", reason="0.34.0's facts"),
    pytest.mark.extra("vllm"),
]
DRAWN = {"image_mean": [0.25, 0.5, 0.75], "image_std": [0.2, 0.3, 0.4]}


def one(vllm_source, family):
    (path,) = paths(vllm_source, family)
    return path


def counts(path, cfg) -> tuple[int, int]:
    """(FP32, after BF16) values of 768 differing from the trained table (the norm run into float32, and the BF16
    output the tower gets, as C15 reads them)."""
    want = family_norm.checkpoint_levels(NormConfig.from_preprocessor_config(cfg)).T
    fp32 = fp32_levels(path, cfg)
    return int((fp32 != want).sum()), int((path.levels(cfg) != family_norm.bf16(want)).sum())


def fp32_levels(path, cfg) -> np.ndarray:
    from deferlab.impl.vllm import serving

    return serving.norm_levels(path.norm(cfg), 3, path.layout, "float32")


def test_each_is_the_default_device_path_with_one_row(vllm_source):
    for family in ("nemotron-vl", "nemotron-parse", "nano-nemotron-vl"):
        p = one(vllm_source, family)
        assert (p.label, p.path, p.dtype, p.layout) == ("VLLM", "device-normalized", "bfloat16", "pcl"), family
    assert NORM_FAMILIES["nemotron-vl"][0].architecture == "LlamaNemotronVLForEmbedding"


def test_the_semantics_counts(vllm_source):
    """§18.7: Nemotron VL 333 / 768 in FP32 and 3 after BF16 (0.5 / 0.5, as Gemma 3); Parse and Nano 490 and 0."""
    assert counts(one(vllm_source, "nemotron-vl"), CONFIGS["nemotron-vl"]) == (333, 3)
    assert counts(one(vllm_source, "nemotron-parse"), CONFIGS["nemotron-parse"]) == (490, 0)
    nano = {
        "image_mean": CONFIGS["nano-nemotron-vl"]["norm_mean"],
        "image_std": CONFIGS["nano-nemotron-vl"]["norm_std"],
    }
    path = one(vllm_source, "nano-nemotron-vl")
    assert counts(path, {**CONFIGS["nano-nemotron-vl"], **nano}) == (490, 0)


def test_nemotron_vl_ignores_the_checkpoints_statistics(vllm_source):
    """vLLM builds Nemotron VL's norm from its own SigLIP constants: drawn statistics change nothing."""
    path = one(vllm_source, "nemotron-vl")
    assert (path.levels(DRAWN) == path.levels(CONFIGS["nemotron-vl"])).all()
    assert path.norm(DRAWN).weight.tolist() == pytest.approx([2 / 255] * 3)
    assert "read off the source" in path.provenance()["normalize"]


def test_nano_follows_config_json_as_parse_follows_its_processor_config(vllm_source):
    """The two construction routes agree: Nano's own call on norm_mean / norm_std gives what build_mm_input_norm
    (Parse's) gives on the same statistics as image_mean / image_std; a typed config reads the same."""
    nano, parse = one(vllm_source, "nano-nemotron-vl"), one(vllm_source, "nemotron-parse")
    as_config_json = {"norm_mean": DRAWN["image_mean"], "norm_std": DRAWN["image_std"]}
    got = nano.levels(as_config_json)
    assert (got == parse.levels({**DRAWN, "do_rescale": True, "do_normalize": True})).all()
    assert (got == nano.levels(NormConfig(tuple(DRAWN["image_mean"]), tuple(DRAWN["image_std"])))).all()
    assert not (got == nano.levels(CONFIGS["nano-nemotron-vl"])).all()
    assert "build_mm_input_norm" in parse.provenance()["normalize"]


def test_the_arguments_are_read_off_the_source(vllm_source):
    root = Path(vllm_source.root)
    model = NORM_FAMILIES["nano-nemotron-vl"][0]
    args = norm_call.arguments(root, model, {"norm_mean": [0.1] * 3, "norm_std": [0.2] * 3})
    assert args == {"image_mean": [0.1] * 3, "image_std": [0.2] * 3, "rescale_factor": 1.0 / 255.0}
    assert norm_call.call(root, NORM_FAMILIES["nemotron-parse"][0]) is None  # build_mm_input_norm's
    with pytest.raises(InputValueError, match="the checkpoint config has no 'norm_mean'"):
        norm_call.arguments(root, model, {})


def test_a_form_deferlab_does_not_read_is_refused_in_one_line(vllm_source):
    expr = ast.parse("torch.ones(3)", mode="eval").body
    with pytest.raises(InputValueError, match=r"argument 'torch.ones\(3\)' is not a form deferlab reads") as e:
        norm_call.evaluate(expr, Path(vllm_source.root), "x.py", {})
    assert "\n" not in str(e.value)
    with pytest.raises(InputValueError, match="no module constant 'NOPE'"):
        norm_call.evaluate(ast.parse("NOPE", mode="eval").body, Path(vllm_source.root), "vllm/__init__.py", {})
