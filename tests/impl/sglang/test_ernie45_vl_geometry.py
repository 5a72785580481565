"""`impl.sglang.families.ernie45_vl`'s geometry (C13, semantics §18.9): SGLang's own pre-resize, then the
checkpoint processor's resize of its target, against the trained side (`reference.oracle.ernie45_vl`).

What is checked against what: the constants the path reads from the release against §18.9's (28, 4 x 28 x 28,
16384 x 28 x 28); the path's geometry at the sizes §18.9 works by hand (each of the three ways it differs, and
sizes where it agrees); the exhaustive sweep's route, count and first size against §18.9's estimate written
before the code ran (1,717,038 of 16,777,216, first 98 x 1, compiled, within 60 s); the second stage keeping a
refusal. The module imports transformers and torchvision, so the path runs in a child that loads SGLang with its
companions.
"""

from __future__ import annotations

import pytest

from tests.impl.sglang import geometry_child

# (width, height) -> SGLang's served (width, height), and whether the checkpoint's differs (semantics §18.9)
WORKED = {
    (10, 10): ((56, 56), False),
    (98, 1): ((112, 28), True),  # the floor of one factor: the checkpoint's 560 x 28
    (10, 400): ((28, 392), True),  # the checkpoint's 28 x 364
    (1, 201): ((28, 5600), True),  # the ratio clamp: the checkpoint refuses
    (3000, 4000): ((1876, 2520), True),  # the second resize from the rounded size: the checkpoint's 1904 x 2520
    (4096, 4096): ((2184, 2184), False),
    (4032, 3024): ((2520, 1904), False),
    (1920, 1080): ((1932, 1092), False),
}

EXTRA = """
from deferlab.impl.sglang.families.ernie45_vl import compiled_second, then_processor
out["constants"] = list(path.pre_resize()[1])
second = compiled_second(*path.processor_resize(cfg))
out["refused"] = then_processor(np.array([[compiled.REFUSED, 56], [5600, 56]]), second).tolist()
out["second"] = then_processor(np.array([[112, 1], [28, 300]]), second).tolist()
"""


# the fixture, and C13 at each WORKED size (`geometry_child.check_worked`)
served, test_geometry_at_the_worked_sizes = geometry_child.worked_tests("ernie-4.5-vl", WORKED, EXTRA)


@pytest.mark.extra("transformers")
def test_the_pre_resize_reads_the_releases_constants(served):
    assert served["constants"] == [28, 4 * 28 * 28, 16384 * 28 * 28]
    assert "ernie45_vl.smart_resize (own" in served["provenance"]["geometry"]
    assert "image_processing_ernie4_5_vl_moe.smart_resize of that size" in served["provenance"]["geometry"]


@pytest.mark.extra("transformers")
def test_exhaustive_sweep_is_compiled_and_finds_what_semantics_estimated(served):
    geometry_child.check_sweep(served, 1_717_038, [98, 1], [112, 28], [560, 28])


@pytest.mark.extra("transformers")
def test_the_second_stage_keeps_a_refusal_and_refuses_a_ratio_over_200(served):
    assert served["refused"] == [[-1, 56], [-1, 56]]
    assert served["second"] == [[112, -1], [28, -1]]  # 112 x 28 kept; 1 x 300 refused by the processor
