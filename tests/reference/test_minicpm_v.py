"""MiniCPM-V 4.6's slicing geometry restated (`reference.oracle.minicpm_v`, semantics §18.9).

Hand values for each branch (no slicing and the scale-up, the grid's slice counts, the most-rows tie, the long thin
sizes no one refuses), the near-tie fallback against the scalar rule, the family config type and its refusals, then
transformers 5.24.0 run for real: ``MiniCPMV4_6ImageProcessorPil``'s own ``get_sliced_grid``, ``find_best_resize``
and ``get_refine_size`` as its ``_preprocess`` calls them on 26,288 sizes, and its whole ``preprocess`` (the
``target_sizes`` and ``grids`` it returns) on a few images.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.oracle import minicpm_v
from deferlab.reference.system.errors import ConfigError
from deferlab.reference.system.family_configs_published import PUBLISHED
from tests.reference import family_checks as checks

GEO = minicpm_v.MiniCPMVGeometry()  # the published values: 9 slices, 448, patch 14, 16x (divisor 56)


@pytest.mark.parametrize(
    ("hw", "expected"),
    [
        ((1, 1), ((448, 448), (0, 0, 0, 0), 64)),  # not sliced: scaled up to 448 x 448
        ((448, 448), ((448, 448), (0, 0, 0, 0), 64)),  # exactly 448**2 pixels: still one piece
        ((448, 449), ((448, 448), (1, 2, 616, 336), 196)),  # n = 2: 1 x 2 (cols/rows 2 nearer 449/448 than 1/2)
        ((1080, 1920), ((336, 616), (2, 4, 448, 448), 578)),  # n = 9 -> counts 8, 9: 2 x 4
        ((4096, 4096), ((448, 448), (3, 3, 448, 448), 640)),
        ((1, 4096), ((56, 28672), (0, 0, 0, 0), 512)),  # 4096 pixels: not sliced, an extreme source
        ((896, 896), ((448, 448), (2, 2, 448, 448), 320)),  # n = 4: counts 3, 4, 5, the 2 x 2 exact
    ],
)
def test_geometry_by_hand(hw: tuple[int, int], expected: tuple) -> None:
    assert minicpm_v.geometry(*hw, GEO) == expected


def test_equal_errors_take_the_most_rows() -> None:
    """A square of 600 x 600 (n = 2, one count: 2): 1 x 2 and 2 x 1 are equally far (log 2); the rule keeps 2 x 1,
    and the vectorized form decides it through the scalar rule (the two errors are within its margin)."""
    assert minicpm_v._grid_scalar(600, 600, GEO) == (2, 1)
    _, _, rows, cols, _, _ = minicpm_v.targets(np.array([600, 601]), np.array([600, 600]), GEO)
    assert rows.tolist() == [2, 2] and cols.tolist() == [1, 1]


def test_vectorized_equals_the_scalar_rule_on_drawn_sizes() -> None:
    rng = np.random.default_rng(7)
    hs, ws = rng.integers(1, 4097, 3000), rng.integers(1, 4097, 3000)
    _, _, rows, cols, _, _ = minicpm_v.targets(hs, ws, GEO)
    for h, w, r, c in zip(hs.tolist(), ws.tolist(), rows.tolist(), cols.tolist(), strict=True):
        assert minicpm_v._grid_scalar(h, w, GEO) == (r, c), (h, w)


def test_bad_arrays_and_geometries_are_refused() -> None:
    checks.front_door_refusals(minicpm_v.geometry, minicpm_v.targets, GEO, {"max_slice_nums": 9}, "MiniCPMVGeometry")


def test_the_family_is_judged_on_geometry_with_its_own_config_type() -> None:
    from deferlab.reference.oracle.trained import Trained, config
    from deferlab.reference.system import families
    from deferlab.reference.system.family_configs import CONFIG_TYPES, MiniCPMVConfig, NormConfig, norm_of

    fam = families.family("minicpm-v-4.6")
    assert fam.scope == "geometry" and fam.claims[:3] == ("C4", "C13", "C15") and "C14" not in fam.claims
    cfg = config("minicpm-v-4.6")
    assert type(cfg) is MiniCPMVConfig and MiniCPMVConfig in CONFIG_TYPES and minicpm_v._geo(cfg) == GEO
    assert isinstance(cfg, NormConfig) and type(norm_of(cfg)) is NormConfig and norm_of(cfg).image_mean == (0.5,) * 3
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # the built type is bound in family_configs (versions' children)
    g = Trained("minicpm-v-4.6").geometry(1920, 1080, cfg)
    assert (g.width, g.height, g.grid, g.tokens) == (616, 336, (2, 4, 448, 448), 578)
    four = MiniCPMVConfig.from_preprocessor_config({**PUBLISHED["minicpm-v-4.6"], "downsample_mode": "4x"}, name="4x")
    assert minicpm_v._geo(four).divisor == 28 and minicpm_v.geometry(1, 1, four)[0] == (448, 448)
    with pytest.raises(ConfigError, match="'bad'.*max_slice_nums"):
        MiniCPMVConfig.from_preprocessor_config({**PUBLISHED["minicpm-v-4.6"], "max_slice_nums": 0}, name="bad")
    with pytest.raises(ConfigError, match="'mode'.*downsample_mode"):
        MiniCPMVConfig.from_preprocessor_config({**PUBLISHED["minicpm-v-4.6"], "downsample_mode": "8x"}, name="mode")
    with pytest.raises(ConfigError, match="'std'.*image_std"):
        MiniCPMVConfig.from_preprocessor_config({**PUBLISHED["minicpm-v-4.6"], "image_std": [0, 1, 1]}, name="std")


@pytest.mark.extra("transformers")
def test_equals_transformers_5_24_run_for_real() -> None:
    pil = pytest.importorskip("transformers.models.minicpmv4_6.image_processing_pil_minicpmv4_6")
    ip = pil.MiniCPMV4_6ImageProcessorPil()
    # 1 x n, n x 1 and n x n to 4096, multiples of 56 (and so 448) +-1 paired, 12,000 drawn
    hs, ws = checks.size_arrays(56, 31, 2000, 12000, small=False, squares=True)
    found = np.stack(minicpm_v.targets(hs, ws, GEO))
    sliced = 0
    for i, (h, w) in enumerate(zip(hs.tolist(), ws.tolist(), strict=True)):
        grid = ip.get_sliced_grid((h, w), 9, 448)
        src = ip.find_best_resize((h, w), 448, 14, "16x", allow_upscale=grid is None)
        want = (*src, 0, 0, 0, 0)
        if grid is not None:
            sliced += 1
            ref_h, ref_w = ip.get_refine_size((h, w), grid, 448, 14, "16x", allow_upscale=True)
            want = (*src, grid[0], grid[1], ref_h // grid[0], ref_w // grid[1])
        assert tuple(found[:, i].tolist()) == want, (h, w)
    assert sliced > 10000  # most drawn sizes are sliced: the grid and refine branches are exercised


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("hw", [(1, 1), (448, 449), (1080, 1920), (700, 700), (37, 3000)])
def test_the_processors_own_output_is_the_oracles(hw: tuple[int, int]) -> None:
    """Its ``preprocess`` (the order of its steps, not only the methods): ``target_sizes`` (source, then each
    slice, in patches), ``grids`` and the tokens its processor counts, ``prod(target_size) // 16`` a piece."""
    pil = pytest.importorskip("transformers.models.minicpmv4_6.image_processing_pil_minicpmv4_6")
    image = Image.fromarray(np.zeros((*hw, 3), np.uint8))  # a PIL image: a 1 x 1 array's channels are ambiguous
    out = pil.MiniCPMV4_6ImageProcessorPil()(image, return_tensors="np")
    (sh, sw), (rows, cols, ph, pw), tokens = minicpm_v.geometry(*hw, GEO)
    assert list(out["grids"][0]) == [rows, cols]
    assert out["target_sizes"].tolist() == [[sh // 14, sw // 14]] + [[ph // 14, pw // 14]] * (rows * cols)
    assert int((out["target_sizes"].prod(-1) // 16).sum()) == tokens
