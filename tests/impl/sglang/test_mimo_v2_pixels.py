"""`impl.sglang.families.mimo_v2`'s pixels (C14, semantics §18.9): SGLang's own ``MiMoProcessor`` image path
(``_process_image_content``: its resize, standardization and patch layout), against the trained side and its own
table.

What is checked against what: every image class at C14's pinned 12 x 10 against the checkpoint's
``Qwen2VLImageProcessor`` as §18.9 expected before the code ran (every class fails: the float bilinear resize is
not Pillow's bicubic); on RGB many levels off; a 56 x 56 image its resize keeps against the path's own level table
in Qwen's patch layout (temporal patch 2, the frame repeated); the served grid and tokens against the path's
geometry (6 x 1: C13's first difference, served as its geometry says); the BF16 path a rounding of the float32 one.
"""

from __future__ import annotations

import pytest

from deferlab.reference.system.served import IMAGE_CLASSES
from tests.impl.sglang.family_pixels import shared_tests

SIZES = [(6, 1), (40, 33), (1, 40)]


@pytest.mark.extra("transformers")
def test_rgb_is_many_levels_off(served):
    total, differing, unexplained, max_levels = served["rgb"]
    assert total == 4 * 6 * 3 * 392 and differing > total * 0.99 and unexplained > total // 2 and max_levels > 10


@pytest.mark.extra("transformers")
def test_bfloat16_path_rounds_the_float32_one_and_provenance_names_the_steps(served):
    assert served["bf16"]
    assert "_load_single_item (own" in served["provenance"]["load"]
    assert served["provenance"]["serve"].startswith("sglang.srt.multimodal.processors.mimo_v2.MiMoProcessor.get_visual")
    assert "inside _process_image_content (own" in served["provenance"]["serve"]


# the fixture, and the checks both families make alike with this family's numbers (`family_pixels.shared_tests`)
(
    served,
    test_every_class_fails_as_semantics_expected,
    test_a_kept_image_is_the_paths_table_in_the_patch_layout,
    test_grid_and_tokens_are_the_paths_geometry,
) = shared_tests("mimo-v2.5", 2, 56, SIZES, 392, frozenset(IMAGE_CLASSES))
