"""ERNIE-4.5-VL's image geometry restated (`reference.oracle.ernie45_vl`, semantics §18.9).

Hand values for each branch of its smart_resize (a side under half a factor rounded to 0, the 200 ratio refusal,
both pixel branches, ties), the config reader, the vectorized form against the scalar one (every size to
120 x 120, every 1 x n and n x 1, factor multiples +-1, drawn sizes), then transformers 5.24.0 run for real:
``Ernie4_5_VLMoeImageProcessorPil``'s ``smart_resize`` and ``get_number_of_image_patches`` on the same sizes."""

from __future__ import annotations

import dataclasses

import pytest

from deferlab.reference.oracle import ernie45_vl as ernie
from deferlab.reference.system.errors import ConfigError
from deferlab.reference.system.family_configs import ErnieVLConfig, NormConfig, family_profile, published_config
from tests.reference import family_checks as checks

CFG = family_profile("ernie-4.5-vl")  # factor 28, 3136..4842768 pixels
TIGHT = ErnieVLConfig(image_mean=(0.5,) * 3, image_std=(0.5,) * 3, min_pixels=784, max_pixels=3136)


def test_published_profile_is_the_class_defaults() -> None:
    assert isinstance(CFG, ErnieVLConfig) and isinstance(CFG, NormConfig) and CFG.kind == "ernie"
    assert (CFG.factor, CFG.min_pixels, CFG.max_pixels) == (28, 56 * 56, 28 * 28 * 6177)
    assert type(CFG.norm) is NormConfig and CFG.norm.image_mean == CFG.image_mean


def test_config_reads_size_and_refuses_bad_bounds() -> None:
    table = published_config("ernie-4.5-vl") | {"size": {"shortest_edge": 784, "longest_edge": 3136}}
    cfg = ErnieVLConfig.from_preprocessor_config(table, name="t")
    assert (cfg.min_pixels, cfg.max_pixels) == (784, 3136)
    with pytest.raises(ConfigError, match="min_pixels must be <= max_pixels"):
        ErnieVLConfig.from_preprocessor_config(
            published_config("ernie-4.5-vl") | {"size": {"shortest_edge": 9, "longest_edge": 8}}, name="t"
        )


def test_qwen_config_hands_over_every_field() -> None:
    """What `qwen.patchify` and MiMo-V2.5's pixels read: each field of the config by name, none left at Qwen's
    class default (every value below differs from it), the temporal patch the caller's."""
    odd = ErnieVLConfig(
        image_mean=(0.1, 0.2, 0.3), image_std=(0.4, 0.5, 0.6), rescale_factor=0.5, do_rescale=False,
        do_normalize=False, patch_size=7, merge_size=3, min_pixels=441, max_pixels=9000,
    )  # fmt: skip
    found = ernie.qwen_config(odd, 3)
    names = [f.name for f in dataclasses.fields(odd)]
    assert found.temporal_patch_size == 3 and [getattr(found, n) for n in names] == [getattr(odd, n) for n in names]


BY_HAND = [  # (config, (h, w), resize target)
    (CFG, (1, 1), (56, 56)),  # both sides round to 0: grown to the minimum from 1 x 1
    (CFG, (1, 98), (28, 560)),  # h rounds to 0 (no floor of one factor): the min branch from the original
    (CFG, (400, 10), (364, 28)),  # w rounds to 0: grown by sqrt(3136 / 4000)
    (CFG, (200, 1), (812, 28)),  # ratio 200 exactly: kept; w rounds to 0, grown by sqrt(3136 / 200)
    (CFG, (1080, 1920), (1092, 1932)),  # in budget: 38.57 -> 39, 68.57 -> 69 factors
    (CFG, (42, 70), (56, 56)),  # 1.5 -> 2 and 2.5 -> 2 (half to even): 56 x 56 = 3136, the minimum: kept
    (CFG, (4000, 3000), (2520, 1904)),  # over: scaled by sqrt(12e6 / 4842768), floored
    (CFG, (4096, 4096), (2184, 2184)),
    (TIGHT, (100, 100), (56, 56)),
]
TestResizeRules = checks.resize_rules(
    ernie, CFG, targets=BY_HAND, grid=((1080, 1920), (1, 78, 138), 78 * 138 // 4),
    refused=[(201, 1), (1, 201), (4096, 20)], sweep={"published": CFG, "tight": TIGHT},
    refusals=("side ratio .* is over 200", family_profile("qwen2.5-vl"), "cfg must be an ErnieVLConfig"),
)  # fmt: skip


@pytest.mark.extra("transformers")
def test_geometry_equals_transformers() -> None:
    module = pytest.importorskip("transformers.models.ernie4_5_vl_moe.image_processing_pil_ernie4_5_vl_moe")
    processor = module.Ernie4_5_VLMoeImageProcessorPil.from_dict(published_config("ernie-4.5-vl"))
    assert processor.size == {"shortest_edge": CFG.min_pixels, "longest_edge": CFG.max_pixels}
    assert (processor.patch_size, processor.merge_size) == (CFG.patch_size, CFG.merge_size)
    checks.smart_resize_equals(ernie, module, processor, CFG, TIGHT)
