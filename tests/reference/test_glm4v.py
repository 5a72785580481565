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


@pytest.mark.parametrize(
    ("hw", "expected"),
    [
        ((1, 1), (84, 84)),  # scaled to 28 x 28, then 2*784 under the minimum: grown by sqrt(8), ceiled
        ((200, 1), (5600, 28)),  # scaled to 5600 x 28: ratio exactly 200, kept
        ((1, 6), (56, 196)),  # scaled by 28 (w under the factor), then the minimum
        ((112, 112), (112, 112)),  # 2 * 12,544 pixels: inside the bounds, kept
        ((42, 70), (84, 112)),  # 1.5 -> 2, 2.5 -> 2 (half to even): 2 * 56 * 56 under the minimum: grown
        ((1080, 1920), (1092, 1932)),  # in budget: 38.57 -> 39, 68.57 -> 69 factors
        ((3000, 4000), (1876, 2520)),  # over: scaled by sqrt(2 * 12e6 / 9633792), floored
        ((4096, 4096), (2184, 2184)),
    ],
)
def test_resize_target_by_hand(hw: tuple[int, int], expected: tuple[int, int]) -> None:
    assert glm4v.resize_target(*hw, GEO) == expected


def test_grid_and_tokens_by_hand() -> None:
    assert glm4v.grid(1080, 1920, GEO) == (1, 78, 138)
    assert glm4v.num_tokens(1080, 1920, GEO) == 78 * 138 // 4


@pytest.mark.parametrize("hw", [(201, 1), (1, 201), (4096, 20)])
def test_a_ratio_over_200_after_the_scale_up_is_refused(hw: tuple[int, int]) -> None:
    with pytest.raises(InputValueError, match="side ratio over 200"):
        glm4v.resize_target(*hw, GEO)


def test_vectorized_refusals_are_0_and_bad_arrays_are_refused() -> None:
    new_h, new_w = glm4v.resize_targets(np.array([201, 200]), np.array([1, 1]), GEO)
    assert new_h.tolist() == [0, 5600] and new_w.tolist() == [0, 28]
    with pytest.raises(InputTypeError, match="integer array"):
        glm4v.resize_targets(np.array([1.5]), np.array([1]), GEO)
    with pytest.raises(InputValueError, match="heights must all be in"):
        glm4v.resize_targets(np.array([0]), np.array([1]), GEO)
    with pytest.raises(InputTypeError, match="Glm4vGeometry"):
        glm4v.resize_targets(np.array([1]), np.array([1]), {"size": 1})


def _sizes() -> tuple[np.ndarray, np.ndarray]:
    """(heights, widths): every size to 120 x 120, every 1 x n and n x 1 to 4096, multiples of 14 and 28 +-1 against
    each other to 4096, 3000 drawn sizes."""
    small = np.arange(1, 121)
    hs, ws = [np.repeat(small, 120)], [np.tile(small, 120)]
    line = np.arange(1, 4097)
    hs += [line, np.ones_like(line)]
    ws += [np.ones_like(line), line]
    edge = np.unique(np.concatenate([np.arange(14, 4097, 14) + d for d in (-1, 0, 1)]))
    edge = edge[(edge >= 1) & (edge <= 4096)]
    rng = np.random.default_rng(29)
    picked = rng.choice(edge, (4000, 2))
    hs += [picked[:, 0], rng.integers(1, 4097, 3000)]
    ws += [picked[:, 1], rng.integers(1, 4097, 3000)]
    return np.concatenate(hs), np.concatenate(ws)


@pytest.mark.extra("transformers")
def test_equals_transformers_5_24_run_for_real() -> None:
    pil = pytest.importorskip("transformers.models.glm4v.image_processing_pil_glm4v")
    proc = pil.Glm4vImageProcessorPil(size={"shortest_edge": GEO.min_pixels, "longest_edge": GEO.max_pixels})
    hs, ws = _sizes()
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


def test_the_family_is_judged_on_geometry_with_its_own_config_type() -> None:
    """GLM-4.1V's scope is ``geometry`` (C13 on the paths that answer it, semantics §18.9): its published config reads
    as a `Glm4vConfig` whose geometry is the oracle's, and a bad temporal patch is refused naming the config."""
    from deferlab.reference.oracle.trained import Trained, config
    from deferlab.reference.system import families
    from deferlab.reference.system.errors import ConfigError
    from deferlab.reference.system.family_configs import Glm4vConfig

    fam = families.family("glm-4.1v")
    assert fam.scope == "geometry" and fam.claims[:3] == ("C4", "C13", "C15") and "C14" not in fam.claims
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
