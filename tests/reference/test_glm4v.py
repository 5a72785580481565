"""GLM-4.1V's image geometry restated (`reference.oracle.glm4v`, semantics §18.9).

Hand values for each branch of its smart_resize (the small-side scale-up before the 200 ratio check, both pixel
branches, ties), the config reader and its refusals, then transformers 5.24.0 run for real (its PIL backend
``Glm4vImageProcessorPil``: ``smart_resize`` as its ``resize`` calls it, and ``get_number_of_image_patches``) on every
size to 120 x 120, every 1 x n and n x 1 to 4096, factor multiples +-1 and drawn sizes."""

from __future__ import annotations

import numpy as np
import pytest

from deferlab.reference.oracle import glm4v
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs_published import PUBLISHED
from tests.reference import family_checks as checks

GEO = glm4v.Glm4vGeometry()  # the published config: factor 28, T 2, 12,544..9,633,792


def test_published_config_is_the_default() -> None:
    assert glm4v.Glm4vGeometry.from_config(PUBLISHED["glm-4.1v"]) == GEO
    assert (GEO.factor, GEO.min_pixels, GEO.max_pixels) == (28, 12544, 9633792)


def test_config_reader_refuses_bad_values() -> None:
    tight = glm4v.Glm4vGeometry.from_config({"size": {"shortest_edge": 784, "longest_edge": 6272}, "merge_size": 1})
    assert (tight.factor, tight.min_pixels, tight.max_pixels) == (14, 784, 6272)
    with pytest.raises(InputValueError, match="patch_size"):
        glm4v.Glm4vGeometry.from_config({"patch_size": 0})
    with pytest.raises(InputTypeError, match="preprocessor_config.json dict"):
        glm4v.Glm4vGeometry.from_config([("size", 1)])


BY_HAND = [  # (config, (h, w), resize target)
    (GEO, (1, 1), (84, 84)),  # scaled to 28 x 28, then 2*784 under the minimum: grown by sqrt(8), ceiled
    (GEO, (200, 1), (5600, 28)),  # scaled to 5600 x 28: ratio exactly 200, kept
    (GEO, (1, 6), (56, 196)),  # scaled by 28 (w under the factor), then the minimum
    (GEO, (112, 112), (112, 112)),  # 2 * 12,544 pixels: inside the bounds, kept
    (GEO, (42, 70), (84, 112)),  # 1.5 -> 2, 2.5 -> 2 (half to even): 2 * 56 * 56 under the minimum: grown
    (GEO, (1080, 1920), (1092, 1932)),  # in budget: 38.57 -> 39, 68.57 -> 69 factors
    (GEO, (3000, 4000), (1876, 2520)),  # over: scaled by sqrt(2 * 12e6 / 9633792), floored
    (GEO, (4096, 4096), (2184, 2184)),
]
# the ratio is read after the small-side scale-up: 1 x 201 (scaled to 28 x 5628) is refused
TestResizeRules = checks.resize_rules(
    glm4v, GEO, targets=BY_HAND, grid=((1080, 1920), (1, 78, 138), 78 * 138 // 4),
    refused=[(201, 1), (1, 201), (4096, 20)],
    refusals=("side ratio over 200", {"size": 1}, "Glm4vGeometry"),
)  # fmt: skip


def test_vectorized_refusals_are_0() -> None:
    new_h, new_w = glm4v.resize_targets(np.array([201, 200]), np.array([1, 1]), GEO)
    assert new_h.tolist() == [0, 5600] and new_w.tolist() == [0, 28]


@pytest.mark.extra("transformers")
def test_equals_transformers_5_24_run_for_real() -> None:
    pil = pytest.importorskip("transformers.models.glm4v.image_processing_pil_glm4v")
    proc = pil.Glm4vImageProcessorPil(size={"shortest_edge": GEO.min_pixels, "longest_edge": GEO.max_pixels})
    # every size to 120 x 120, 1 x n and n x 1 to 4096, multiples of 14 (and so 28) +-1 paired, 3000 drawn
    hs, ws = checks.size_arrays(14, 29, 4000, 3000, small=True, squares=False)
    new_h, new_w = glm4v.resize_targets(hs, ws, GEO)
    refused = 0
    for h, w, oh, ow in zip(hs.tolist(), ws.tolist(), new_h.tolist(), new_w.tolist(), strict=True):
        try:
            found = pil.smart_resize(num_frames=2, height=h, width=w, temporal_factor=2, factor=28,
                                     min_pixels=GEO.min_pixels, max_pixels=GEO.max_pixels)  # fmt: skip
        except ValueError:
            found = (0, 0)
            refused += 1
        assert (oh, ow) == tuple(found), (h, w)
        if oh:
            assert proc.get_number_of_image_patches(h, w, None) == (oh // 14) * (ow // 14), (h, w)
    assert refused > 7000  # the 1 x n and n x 1 lines refuse most of their sizes: the branch is exercised


def test_the_family_is_judged_in_full_with_its_own_config_type() -> None:
    """GLM-4.1V's scope is ``full`` (C13 and C14 on the paths that answer them, semantics §18.9): its published config
    reads as a `Glm4vConfig` whose geometry is the oracle's, and a bad temporal patch is refused naming the config."""
    from deferlab.reference.oracle.trained import Trained, config
    from deferlab.reference.system import families
    from deferlab.reference.system.errors import ConfigError
    from deferlab.reference.system.family_configs import Glm4vConfig

    fam = families.family("glm-4.1v")
    assert fam.scope == "full" and fam.claims[:4] == ("C4", "C13", "C14", "C15")
    cfg = config("glm-4.1v")
    assert type(cfg) is Glm4vConfig and cfg.kind == "glm4v" and glm4v._geo(cfg) == GEO
    assert Trained("glm-4.1v").geometry(1, 1, cfg).width == 84  # the small side scaled up (1x1 -> 84x84)
    with pytest.raises(ValueError, match="side ratio over 200"):
        Trained("glm-4.1v").geometry(1, 201, cfg)
    read = Glm4vConfig.from_preprocessor_config({**PUBLISHED["glm-4.1v"], "temporal_patch_size": 1}, name="t1")
    # the temporal patch reaches the rule: with T 1, 84 x 84 (7,056 pixels) is under 12,544 and grows to 112 x 112
    assert glm4v.resize_target(1, 1, read) == (112, 112) and glm4v.resize_target(1, 1, cfg) == (84, 84)
    with pytest.raises(ConfigError, match="'t0'.*temporal_patch_size"):
        Glm4vConfig.from_preprocessor_config({**PUBLISHED["glm-4.1v"], "temporal_patch_size": 0}, name="t0")
