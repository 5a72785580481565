"""ERNIE-4.5-VL's image geometry restated (`reference.oracle.ernie45_vl`, semantics §18.9).

Hand values for each branch of its smart_resize (a side under half a factor rounded to 0, the 200 ratio refusal,
both pixel branches, ties), the config reader, the vectorized form against the scalar one (every size to
120 x 120, every 1 x n and n x 1, factor multiples +-1, drawn sizes), then transformers 5.24.0 run for real:
``Ernie4_5_VLMoeImageProcessorPil``'s ``smart_resize`` and ``get_number_of_image_patches`` on the same sizes."""

from __future__ import annotations

import numpy as np
import pytest

from deferlab.reference.oracle import ernie45_vl as ernie
from deferlab.reference.system.errors import ConfigError, InputTypeError, InputValueError
from deferlab.reference.system.family_configs import ErnieVLConfig, NormConfig, family_profile, published_config

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


@pytest.mark.parametrize(
    ("cfg", "hw", "expected"),
    [
        (CFG, (1, 1), (56, 56)),  # both sides round to 0: grown to the minimum from 1 x 1
        (CFG, (1, 98), (28, 560)),  # h rounds to 0 (no floor of one factor): the min branch from the original
        (CFG, (400, 10), (364, 28)),  # w rounds to 0: grown by sqrt(3136 / 4000)
        (CFG, (200, 1), (812, 28)),  # ratio 200 exactly: kept; w rounds to 0, grown by sqrt(3136 / 200)
        (CFG, (1080, 1920), (1092, 1932)),  # in budget: 38.57 -> 39, 68.57 -> 69 factors
        (CFG, (42, 70), (56, 56)),  # 1.5 -> 2 and 2.5 -> 2 (half to even): 56 x 56 = 3136, the minimum: kept
        (CFG, (4000, 3000), (2520, 1904)),  # over: scaled by sqrt(12e6 / 4842768), floored
        (CFG, (4096, 4096), (2184, 2184)),
        (TIGHT, (100, 100), (56, 56)),
    ],
)
def test_resize_target_by_hand(cfg: ErnieVLConfig, hw: tuple[int, int], expected: tuple[int, int]) -> None:
    assert ernie.resize_target(*hw, cfg) == expected


def test_grid_and_tokens_by_hand() -> None:
    assert ernie.grid(1080, 1920, CFG) == (1, 78, 138)
    assert ernie.num_tokens(1080, 1920, CFG) == 78 * 138 // 4


@pytest.mark.parametrize("hw", [(201, 1), (1, 201), (4096, 20)])
def test_a_ratio_over_200_is_refused(hw: tuple[int, int]) -> None:
    with pytest.raises(InputValueError, match="side ratio .* is over 200") as info:
        ernie.resize_target(*hw, CFG)
    assert "\n" not in str(info.value)
    h, w = ernie.resize_targets(np.array([hw[0]]), np.array([hw[1]]), CFG)
    assert (h.tolist(), w.tolist()) == ([0], [0])


def test_front_door_refusals() -> None:
    with pytest.raises(InputTypeError, match="cfg must be an ErnieVLConfig"):
        ernie.resize_target(10, 10, family_profile("qwen2.5-vl"))
    with pytest.raises(InputTypeError, match="heights must be an integer array"):
        ernie.resize_targets(np.array([1.5]), np.array([2]), CFG)
    with pytest.raises(InputValueError, match="widths must all be in 1.."):
        ernie.resize_targets(np.array([1]), np.array([0]), CFG)
    with pytest.raises(InputValueError, match="height"):
        ernie.resize_target(0, 5, CFG)


def sizes(seed: int = 5) -> list[tuple[int, int]]:
    """Every size to 120 x 120, every 1 x n and n x 1 to 4096, factor multiples +-1, and drawn sizes."""
    rng = np.random.default_rng(seed)
    found = [(h, w) for h in range(1, 121) for w in range(1, 121)]
    found += [(1, n) for n in range(1, 4097)] + [(n, 1) for n in range(1, 4097)]
    found += [
        (k * 28 + d, j * 28 + e) for k in range(1, 147, 5) for j in (1, 13, 146) for d in (-1, 0, 1) for e in (-1, 0, 1)
    ]
    return found + [tuple(map(int, s)) for s in rng.integers(1, 4097, (5000, 2))]


def scalar(h: int, w: int, cfg: ErnieVLConfig) -> tuple[int, int]:
    try:
        return ernie.resize_target(h, w, cfg)
    except InputValueError:
        return 0, 0


@pytest.mark.parametrize("cfg", [CFG, TIGHT], ids=["published", "tight"])
def test_vectorized_equals_scalar(cfg: ErnieVLConfig) -> None:
    found = sizes()
    h, w = (np.array(v) for v in zip(*found, strict=True))
    vh, vw = ernie.resize_targets(h, w, cfg)
    assert [scalar(a, b, cfg) for a, b in found] == list(zip(vh.tolist(), vw.tolist(), strict=True))


@pytest.mark.extra("transformers")
def test_geometry_equals_transformers() -> None:
    module = pytest.importorskip("transformers.models.ernie4_5_vl_moe.image_processing_pil_ernie4_5_vl_moe")
    processor = module.Ernie4_5_VLMoeImageProcessorPil.from_dict(published_config("ernie-4.5-vl"))
    assert processor.size == {"shortest_edge": CFG.min_pixels, "longest_edge": CFG.max_pixels}
    assert (processor.patch_size, processor.merge_size) == (CFG.patch_size, CFG.merge_size)
    for cfg in (CFG, TIGHT):
        for h, w in sizes(seed=6):
            try:
                theirs = module.smart_resize(h, w, cfg.factor, min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)
            except ValueError:
                theirs = (0, 0)
            assert scalar(h, w, cfg) == theirs, (h, w)
    for h, w in sizes(seed=7)[::97]:
        if scalar(h, w, CFG) != (0, 0):
            assert ernie.num_tokens(h, w, CFG) * 4 == processor.get_number_of_image_patches(h, w), (h, w)
