"""MiMo-V2.5's trained-side geometry (semantics §18.9): its checkpoint's ``Qwen2VLImageProcessor`` config read as a
`MiMoConfig`, whose geometry is Qwen's rule (`reference.oracle.qwen`, checked against transformers in
``test_qwen.py``). Checked here: the profile's bounds are transformers 5.24.0's class defaults (run for real), the
``qwen`` view carries them, and the trained side's geometry is Qwen's on that view."""

from __future__ import annotations

import pytest

from deferlab.reference.oracle import qwen
from deferlab.reference.oracle.trained import Trained
from deferlab.reference.system import families
from deferlab.reference.system.family_configs import MiMoConfig, NormConfig, QwenVLConfig, family_profile

CFG = family_profile("mimo-v2.5")


def test_profile_is_a_norm_config_with_qwen2vls_bounds() -> None:
    assert isinstance(CFG, MiMoConfig) and isinstance(CFG, NormConfig) and CFG.kind == "mimo"
    assert (CFG.factor, CFG.min_pixels, CFG.max_pixels) == (28, 56 * 56, 28 * 28 * 1280)
    view = CFG.qwen
    assert isinstance(view, QwenVLConfig)
    assert (view.patch_size, view.merge_size, view.min_pixels, view.max_pixels) == (14, 2, 3136, 1003520)
    assert families.family("mimo-v2.5").claims[:4] == ("C4", "C13", "C14", "C15")  # full since C14 (§18.9)


@pytest.mark.parametrize("wh", [(6, 1), (20, 30), (1920, 1080), (4096, 4096), (1, 201)])
def test_trained_geometry_is_qwens_rule_on_the_view(wh: tuple[int, int]) -> None:
    w, h = wh
    trained = Trained("mimo-v2.5")
    try:
        want = qwen.resize_target(h, w, CFG.qwen)
    except ValueError:
        with pytest.raises(ValueError, match="ratio"):
            trained.geometry(w, h, CFG)
        return
    g = trained.geometry(w, h, CFG)
    assert (g.height, g.width) == want and g.tokens == qwen.num_tokens(h, w, CFG.qwen)


@pytest.mark.extra("transformers")
def test_bounds_are_transformers_class_defaults() -> None:
    module = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
    processor = module.Qwen2VLImageProcessorPil()
    assert processor.size == {"shortest_edge": CFG.min_pixels, "longest_edge": CFG.max_pixels}
    assert (processor.patch_size, processor.merge_size) == (CFG.patch_size, CFG.merge_size)
