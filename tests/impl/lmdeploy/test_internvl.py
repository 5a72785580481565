"""LMDeploy 0.18.0's InternVL path run for real: imports, tile geometry against semantics §19.3's rule (deferlab's
restatement) and the model card's (the reference oracle), pixels against the card, and the sweep timing."""

from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

from deferlab.impl.lmdeploy import geometry
from deferlab.impl.loader.standins import is_standin
from deferlab.reference.oracle import internvl as card
from deferlab.reference.system.family_configs import InternVLConfig

SIZES = [(448, 448), (800, 600), (1920, 1080), (100, 2000), (4000, 3000)]
# semantics §19.3's table: (cols, rows, tiles) for max 12 (the default), 6 (detail low) and 24 (detail high).
EXPECTED = {
    12: [(1, 1, 1), (4, 3, 13), (4, 2, 9), (1, 12, 13), (4, 3, 13)],
    6: [(1, 1, 1), (3, 2, 7), (2, 1, 3), (1, 6, 7), (3, 2, 7)],
    24: [(1, 1, 1), (4, 3, 13), (5, 3, 16), (1, 20, 21), (4, 3, 13)],
}
DETAIL = {12: {}, 6: {"detail": "low"}, 24: {"detail": "high"}}


def test_the_internvl_path_imports_for_real(lmdeploy_source, internvl_path):
    module = internvl_path._internvl
    for name in ("dynamic_preprocess", "find_closest_aspect_ratio", "InternVLVisionModel", "torch"):
        assert not is_standin(getattr(module, name)), name
    assert module.dynamic_preprocess.__code__.co_filename.endswith("lmdeploy/vl/model/internvl.py")
    assert not is_standin(internvl_path._media.ImageMediaIO)
    stood = {r.module for r in lmdeploy_source.stand_ins if r.kind not in ("bare", "companion", "declared")}
    assert not {m for m in stood if m.startswith(("lmdeploy.vl.model.internvl", "lmdeploy.vl.media", "torch"))}


@pytest.mark.parametrize("max_num", sorted(EXPECTED))
def test_tiles_and_grid_equal_the_semantics_rule(internvl_path, max_num):
    rule = geometry.Rule(max_num=max_num)
    for (w, h), want in zip(SIZES, EXPECTED[max_num], strict=True):
        assert internvl_path.geometry(w, h, params=DETAIL[max_num]) == want, (w, h)
        assert geometry.tiles(w, h, rule) == want, (w, h)


def test_the_default_equals_the_card_and_detail_low_does_not(internvl_path):
    cfg = InternVLConfig()
    for w, h in SIZES:
        assert internvl_path.geometry(w, h) == card.tiles(w, h, cfg)
    differ = [
        (w, h) for w, h in SIZES if internvl_path.geometry(w, h, params={"detail": "low"}) != card.tiles(w, h, cfg)
    ]
    assert differ == [(800, 600), (1920, 1080), (100, 2000), (4000, 3000)]


def _noise(mode: str, w: int, h: int, seed: int = 0) -> Image.Image:
    bands = len(Image.new(mode, (1, 1)).getbands())
    data = np.random.default_rng(seed).integers(0, 256, (h, w, bands), dtype=np.uint8)
    return Image.fromarray(data[..., 0] if bands == 1 else data, mode)


@pytest.mark.parametrize("mode,size", [("RGB", (800, 600)), ("RGBA", (300, 500)), ("L", (90, 60)), ("P", (64, 200))])
def test_served_pixels_equal_the_card_bitwise(internvl_path, mode, size):
    image = _noise(mode, *size)
    served = internvl_path.serve(image)
    cols, rows, n = card.tiles(*size, InternVLConfig())
    assert (served.grid, served.tiles, served.thumbnail) == ((cols, rows), n, n > cols * rows)
    assert served.tokens == 256 * n
    want = card.preprocess(image, InternVLConfig())
    assert served.pixels.dtype == np.float32 and served.pixels.shape == want.shape
    assert np.array_equal(served.pixels.view(np.uint32), want.view(np.uint32))


def test_a_detail_low_request_serves_fewer_tiles(internvl_path):
    served = internvl_path.serve(_noise("RGB", 800, 600), params={"detail": "low"})
    assert (served.grid, served.tiles, served.tokens) == ((3, 2), 7, 7 * 256)


def test_sweep_lmdeploy_function_vs_restatement(internvl_path, capsys):
    """Every size 1..4096 x 1..4096 step 29 (20,164 sizes, a step no tile size divides; about 2 s of LMDeploy's own
    ``dynamic_preprocess`` on size-only images, where step 8 took 18-32 s of the test command's budget) equals the restatement and the card at max 12; the seconds of each are printed
    (the timings of semantics §19.6 are the full step-8 and 1..4096 sweeps, measured apart)."""
    sides = np.arange(1, 4097, 29)
    cols, rows, n, t_engine = internvl_path.sweep(sides, sides)
    t0 = time.perf_counter()
    rc, rr, rn = geometry.tiles_array(sides[None, :], sides[:, None], geometry.Rule())
    t_restated = time.perf_counter() - t0
    assert np.array_equal(cols, rc) and np.array_equal(rows, rr) and np.array_equal(n, rn)
    oc, orow, on = card.tiles_array(sides[None, :], sides[:, None], InternVLConfig())
    assert np.array_equal(oc, rc) and np.array_equal(orow, rr) and np.array_equal(on, rn)
    with capsys.disabled():
        print(
            f"\nC13 sweep step 29 ({n.size} sizes): lmdeploy dynamic_preprocess {t_engine:.1f} s, "
            f"restated {t_restated:.2f} s"
        )
