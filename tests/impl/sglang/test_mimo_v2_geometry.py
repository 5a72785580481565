"""`impl.sglang.families.mimo_v2`'s geometry (C13, semantics §18.9): SGLang's own ``MiMoProcessor.smart_resize``
with the bounds ``MiMoProcessor.from_hf_config`` gives a checkpoint config naming none, against the checkpoint's
``Qwen2VLImageProcessor`` (`reference.oracle.qwen`, its class defaults).

What is checked against what: the bounds the path reads from the release against §18.9's (4 and 4096 factor
squares); the path's geometry at the sizes §18.9 works by hand (each way it differs, and sizes where it agrees);
the exhaustive sweep's route, count and first size against §18.9's estimate written before the code ran
(13,163,254 of 16,777,216, first 6 x 1, compiled, within 60 s); a side ratio over 200 with no side under the
factor refused as the checkpoint refuses it. The module imports transformers and torchvision, so the path runs in
a child that loads SGLang with its companions.
"""

from __future__ import annotations

import pytest

from tests.impl.sglang import geometry_child

# (width, height) -> SGLang's served (width, height), and whether the checkpoint's differs (semantics §18.9)
WORKED = {
    (10, 10): ((56, 56), False),
    (6, 1): ((168, 28), True),  # scaled to the factor before rounding: the checkpoint's 140 x 28
    (1, 201): ((28, 5628), True),  # scaled up before the ratio check: the checkpoint refuses
    (20, 30): ((56, 84), False),
    (1000, 800): ((1008, 812), False),
    (1920, 1080): ((1932, 1092), True),  # SGLang's budget: the checkpoint's 1316 x 728
    (4096, 4096): ((1792, 1792), True),  # the checkpoint's 980 x 980
}

EXTRA = """
out["bounds"] = list(path.bounds())
try:
    out["refused"] = str(path.geometry(30, 6100, cfg))
except ValueError as e:
    out["refused"] = f"{type(e).__name__}: {e}"
out["refused_problem"] = fam.geometry_problem(path, 30, 6100, cfg, want)
"""


# the fixture, and C13 at each WORKED size (`geometry_child.check_worked`)
served, test_geometry_at_the_worked_sizes = geometry_child.worked_tests("mimo-v2.5", WORKED, EXTRA)


@pytest.mark.extra("transformers")
def test_the_bounds_are_the_releases_defaults(served):
    assert served["bounds"] == [4 * 28 * 28, 4096 * 28 * 28]
    assert "MiMoProcessor.smart_resize (own)" in served["provenance"]["geometry"]


@pytest.mark.extra("transformers")
def test_a_ratio_over_200_without_a_short_side_is_refused_as_the_checkpoint_refuses_it(served):
    assert served["refused"].startswith("ValueError: absolute aspect ratio must be smaller than 200")
    assert served["refused_problem"] is None


@pytest.mark.extra("transformers")
def test_exhaustive_sweep_is_compiled_and_finds_what_semantics_estimated(served):
    geometry_child.check_sweep(served, 13_163_254, [6, 1], [168, 28], [140, 28])
