"""`impl.sglang.families.ernie45_vl`'s pixels (C14, semantics §18.9): SGLang's own loading, pre-resize and
normalization around the checkpoint processor's levels, against the trained side and against its own table.

What is checked against what: every image class at C14's pinned 12 x 10 against the trained side as §18.9 expected
before the code ran (the transparent classes fail: SGLang's loader drops alpha and keys; every other class is
explained); on RGB the levels are the trained side's exactly (0 levels off), only the normalization's float32 bits
differ; a 56 x 56 image neither side resizes against the path's own level table in Qwen's patch layout (temporal
patch 1: the load, the processor's layout and ``_pixel_values_norm`` together); the served grid and tokens against
the path's geometry (98 x 1: C13's first difference, served as its geometry says); the BF16 path a rounding of the
float32 one.
"""

from __future__ import annotations

import pytest

from tests.impl.sglang.family_pixels import shared_tests

TRANSPARENT = frozenset({"RGBA partly transparent", "LA", "PA", "P with tRNS", "RGB with a stray key", "L with a key"})
SIZES = [(98, 1), (40, 33), (1, 40)]


@pytest.mark.extra("transformers")
def test_rgb_levels_are_the_checkpoints_only_the_normalization_differs(served):
    total, differing, unexplained, max_levels = served["rgb"]
    assert (total, unexplained, max_levels) == (4 * 6 * 3 * 196, 0, 0)
    assert 0 < differing < total  # C15's float32 rescale: some values, not all


@pytest.mark.extra("transformers")
def test_bfloat16_path_rounds_the_float32_one_and_provenance_names_the_steps(served):
    assert served["bf16"]
    assert (
        "_load_single_item (own" in served["provenance"]["load"] and "resize_image (own" in served["provenance"]["load"]
    )
    assert "Ernie4_5_VLMoeImageProcessorPil" in served["provenance"]["serve"]


# the fixture, and the checks both families make alike with this family's numbers (`family_pixels.shared_tests`)
(
    served,
    test_each_class_as_semantics_expected,
    test_an_unresized_image_is_the_paths_table_in_the_patch_layout,
    test_grid_and_tokens_are_the_paths_geometry,
) = shared_tests("ernie-4.5-vl", 1, 56, SIZES, 196, TRANSPARENT)
