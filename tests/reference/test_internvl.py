"""InternVL's model-card preprocessing restated (`reference.oracle.internvl`, semantics §18.3).

Hand values for the grid rule and its exact ties (448x448, 896x448, 1344x448, 800x800, 1000x1000, 3000x1000),
the tile layout on images drawn by hand, the vectorized form against the scalar one (boundaries, drawn sizes,
the exhaustive 4096 x 4096 sweep, timed), then transformers' InternVL-hf processor (``GotOcr2ImageProcessorPil``)
run for real: the grid on tie and drawn sizes, pixels bitwise where the two rules agree (no alpha), and the
card's alpha-dropping conversion where they differ."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties.strategies.images import pil_images
from deferlab.reference.oracle import internvl as iv
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import IMAGENET_MEAN, IMAGENET_STD, InternVLConfig, family_profile

CARD = family_profile("internvl")
TINY = InternVLConfig(image_size=4)  # 4-pixel tiles: the layout can be read by eye
SMALL = InternVLConfig(image_size=28)  # pixel comparisons with transformers stay small


def test_target_ratios_are_the_card_candidates_by_tile_count() -> None:
    ratios = iv.target_ratios(1, 12)
    assert len(ratios) == 35 and set(ratios) == {(i, j) for i in range(1, 13) for j in range(1, 13) if i * j <= 12}
    counts = [i * j for i, j in ratios]
    assert counts == sorted(counts) and ratios[0] == (1, 1)
    assert set(iv.target_ratios(2, 4)) == {(1, 2), (2, 1), (1, 3), (3, 1), (1, 4), (2, 2), (4, 1)}
    with pytest.raises(InputValueError, match="min_num must be <= max_num, got 5 > 4"):
        iv.target_ratios(5, 4)


@pytest.mark.parametrize(
    ("wh", "expected"),
    [
        ((448, 448), (1, 1, 1)),  # tie with 2x2: 200704 is not > 0.5 * 448**2 * 4 = 401408
        ((224, 224), (1, 1, 1)),
        ((800, 800), (2, 2, 5)),  # 640000 > 401408 takes 2x2; not > 903168 for 3x3
        ((1000, 1000), (3, 3, 10)),  # over both thresholds
        ((896, 448), (2, 1, 3)),  # tie with 4x2: 401408 is not > 802816
        ((1344, 448), (3, 1, 4)),  # tie with 6x2: 602112 is not > 1204224
        ((3000, 1000), (6, 2, 13)),  # the same tie, area 3000000 > 1204224
        ((500, 1000), (1, 2, 3)),
        ((640, 480), (4, 3, 13)),  # 4/3 exactly, no tie within 12 tiles
        ((1920, 1080), (4, 2, 9)),  # 2x1 (diff 0.222) tied by 4x2, area 2073600 > 802816
        ((1, 1), (1, 1, 1)),
        ((4096, 1), (12, 1, 13)),
    ],
)
def test_tiles_by_hand(wh: tuple[int, int], expected: tuple[int, int, int]) -> None:
    assert iv.tiles(*wh, CARD) == expected
    got = iv.tiles_array(np.array([wh[0]]), np.array([wh[1]]), CARD)
    assert tuple(int(a[0]) for a in got) == expected


@pytest.mark.parametrize("wh", [(8, 9), (9, 8)])
def test_an_area_equal_to_the_threshold_does_not_replace(wh: tuple[int, int]) -> None:
    """4-pixel tiles: 1x1, 2x2 and 3x3 tie; area 72 > 0.5 * 16 * 4 = 32 takes 2x2, but 72 is not > 72 for 3x3."""
    assert iv.tiles(*wh, TINY) == (2, 2, 5)
    assert tuple(int(a[0]) for a in iv.tiles_array(np.array([wh[0]]), np.array([wh[1]]), TINY)) == (2, 2, 5)


def test_thumbnail_and_dynamic_switches() -> None:
    assert iv.tiles(800, 800, InternVLConfig(use_thumbnail=False)) == (2, 2, 4)
    one = InternVLConfig(dynamic_image_size=False)
    assert iv.tiles(4000, 1000, one) == (1, 1, 1) and iv.tiles_array(np.array([4000]), np.array([9]), one)[2][0] == 1
    assert iv.closest_ratio(4000, 1000, InternVLConfig(min_num=2, max_num=2)) == (2, 1)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: iv.tiles(0, 5, CARD), InputValueError, "width must be an int >= 1, got 0"),
        (lambda: iv.tiles(5, 5, {}), InputTypeError, "cfg must be an InternVLConfig"),
        (lambda: iv.tiles_array(np.array([1.5]), np.array([1]), CARD), InputValueError, "widths must be an integer"),
        (lambda: iv.preprocess(np.zeros((4, 4, 3), np.uint8), CARD), InputTypeError, "image must be a PIL"),
        (lambda: iv.preprocess(Image.new("RGB", (3, 0)), CARD), InputValueError, "image is empty"),
        (lambda: iv.preprocess(Image.new("La", (2, 2)), TINY), InputValueError, r"convert\('RGB'\) refuses it"),
    ],
)
def test_front_door_refusals(call, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def boundary_sizes(cfg: InternVLConfig) -> list[int]:
    """Sides where ties happen (multiples of the tile and of its half) and small sides, for both axes."""
    s = cfg.image_size
    return sorted({k * s // 2 + d for k in range(1, 13) for d in (-1, 0, 1)} | set(range(1, 30)) | {4096})


@pytest.mark.parametrize("cfg", [CARD, SMALL, InternVLConfig(max_num=6, use_thumbnail=False)])
def test_vectorized_equals_scalar_on_boundaries(cfg: InternVLConfig) -> None:
    sides = np.array(boundary_sizes(cfg))
    cols, rows, n = iv.tiles_array(sides[None, :], sides[:, None], cfg)
    for i, h in enumerate(sides.tolist()):
        for j, w in enumerate(sides.tolist()):
            assert (cols[i, j], rows[i, j], n[i, j]) == iv.tiles(w, h, cfg), (w, h)


@given(w=st.integers(1, 1 << 20), h=st.integers(1, 1 << 20), max_num=st.integers(1, 40))
@example(w=448, h=448, max_num=12).via("FACTS B2: the card keeps one tile")
@example(w=1344, h=448, max_num=12).via("FACTS B2: 3x1, not 6x2")
def test_vectorized_equals_scalar_on_drawn_sizes(w: int, h: int, max_num: int) -> None:
    cfg = InternVLConfig(max_num=max_num)
    got = iv.tiles_array(np.array(w), np.array(h), cfg)
    assert tuple(int(a) for a in got) == iv.tiles(w, h, cfg)


@pytest.mark.slow
def test_exhaustive_sweep_is_fast_and_agrees() -> None:
    """Every width x height in 1..4096 in well under 60 s; drawn cells equal to the scalar form. The rule
    measures distance in w/h, so it is not transpose-symmetric: 7x2 (3.5) ties 3x1 and 4x1 and keeps 3x1,
    2x7 (0.286) is nearer 1x4 than 1x3; 534675 sizes take a grid other than their transpose's."""
    widths, rows = np.arange(1, 4097)[None, :], 256
    start = time.perf_counter()
    parts = [iv.tiles_array(widths, np.arange(a, a + rows)[:, None], CARD) for a in range(1, 4097, rows)]
    elapsed = time.perf_counter() - start
    assert elapsed < 60, f"{elapsed:.1f} s"
    cols, grid_rows = (np.concatenate([p[k] for p in parts]) for k in (0, 1))
    assert int((cols != grid_rows.T).sum()) == 534675
    assert iv.closest_ratio(7, 2, CARD) == (3, 1) and iv.closest_ratio(2, 7, CARD) == (1, 4)
    rng = np.random.default_rng(18)
    for w, h in rng.integers(1, 4097, (300, 2)).tolist():
        assert (cols[h - 1, w - 1], grid_rows[h - 1, w - 1]) == iv.closest_ratio(w, h, CARD), (w, h)


def test_normalize_levels_by_hand() -> None:
    t = iv.normalize_levels(CARD)
    f32 = np.float32
    expected0 = [f32(-f32(m)) / f32(s) for m, s in zip(IMAGENET_MEAN, IMAGENET_STD, strict=True)]
    assert t.dtype == np.float32 and t.shape == (256, 3) and (t[0] == np.array(expected0, dtype=np.float32)).all()
    assert t[255, 0] == (f32(1) - f32(0.485)) / f32(0.229)  # 255/255 is exactly 1
    assert t[51, 1] == (f32(0.2) - f32(0.456)) / f32(0.224)  # f32(51) / f32(255) = f32(0.2)


def test_preprocess_tiles_row_major_then_thumbnail() -> None:
    """An 8x4 image of two flat halves, 4-pixel tiles: ratio 2 -> 2x1 (the 4x2 tie needs area > 64), so the
    8x4 canvas is the image itself (Pillow returns a copy); two tiles left to right, then a 4x4 thumbnail."""
    left, right = (10, 20, 30), (200, 100, 50)
    image = Image.new("RGB", (8, 4), left)
    image.paste(right, (4, 0, 8, 4))
    out = iv.preprocess(image, TINY)
    table = iv.normalize_levels(TINY)
    assert out.shape == (3, 3, 4, 4) and out.dtype == np.float32
    for c in range(3):
        assert (out[0, c] == table[left[c], c]).all() and (out[1, c] == table[right[c], c]).all()
    thumb = np.asarray(image.resize((4, 4)))  # the card's thumbnail: Pillow's default filter
    assert all((out[2, c] == table[thumb[..., c], c]).all() for c in range(3))


def test_one_tile_has_no_thumbnail_and_alpha_is_dropped() -> None:
    rgba = Image.new("RGBA", (4, 4), (90, 60, 30, 0))  # fully transparent: the card keeps the colour
    out = iv.preprocess(rgba, TINY)
    table = iv.normalize_levels(TINY)
    assert out.shape == (1, 3, 4, 4)
    assert all((out[0, c] == table[(90, 60, 30)[c], c]).all() for c in range(3))


# --- transformers' InternVL-hf processor run for real ----------------------------------------------------


@pytest.fixture(scope="module")
def got():
    from transformers.models.got_ocr2 import image_processing_pil_got_ocr2 as module

    return module


def got_processor(got, cfg: InternVLConfig):
    return got.GotOcr2ImageProcessorPil(
        size={"height": cfg.image_size, "width": cfg.image_size},
        crop_to_patches=True,  # what InternVLProcessor turns on
        min_patches=cfg.min_num,
        max_patches=cfg.max_num,
        image_mean=list(cfg.image_mean),
        image_std=list(cfg.image_std),
    )


@pytest.mark.extra("transformers")
def test_grid_equals_got_ocr2_on_ties_and_boundaries(got) -> None:
    """GotOcr2 lists candidates width-major before sorting by count, the card iterates a set: the orders
    differ, the grids do not (no tie between two grids of one tile count is ever the best)."""
    assert [r for r in got.get_all_supported_aspect_ratios(1, 12)] != iv.target_ratios(1, 12)
    sides = boundary_sizes(CARD)
    for w in sides:
        for h in sides:
            assert got.get_optimal_tiled_canvas((h, w), (448, 448), 1, 12) == iv.closest_ratio(w, h, CARD), (w, h)


@pytest.mark.extra("transformers")
@given(w=st.integers(1, 8000), h=st.integers(1, 8000), max_num=st.integers(1, 24))
@example(w=448, h=448, max_num=12)
def test_grid_equals_got_ocr2_on_drawn_sizes(got, w: int, h: int, max_num: int) -> None:
    got.get_optimal_tiled_canvas.cache_clear()
    canvas = got.get_optimal_tiled_canvas((h, w), (448, 448), 1, max_num)
    assert canvas == iv.closest_ratio(w, h, InternVLConfig(max_num=max_num))


def got_pixels(got, image: Image.Image, cfg: InternVLConfig) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return got_processor(got, cfg)(image, return_tensors="np")["pixel_values"]


def card_rgb(image: Image.Image) -> Image.Image:
    """The card's conversion, rebuilt from its pixels (no key left for transformers to composite)."""
    return Image.fromarray(np.asarray(image.convert("RGB")))


NO_ALPHA = ("RGB", "L", "P", "1", "I;16", "I", "F", "CMYK", "YCbCr", "RGBX", "HSV", "LAB")


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("mode", NO_ALPHA)
def test_pixels_equal_got_ocr2_in_every_mode_without_alpha(got, mode: str) -> None:
    """LAB counts: its band named A (the a* axis) sends it through transformers' composite at alpha 255."""
    size = (37, 23)
    data = np.random.default_rng(len(mode)).integers(0, 256, len(Image.new(mode, size).tobytes()), dtype=np.uint8)
    image = Image.frombytes(mode, size, data.tobytes())
    if mode == "F":  # arbitrary float32 bytes hold NaNs and huge values; levels in 0..255 instead
        image = Image.fromarray(np.asarray(image.convert("L"), dtype=np.float32), "F")
    ours = iv.preprocess(image, SMALL)
    assert (ours.view(np.uint32) == got_pixels(got, image, SMALL).view(np.uint32)).all()


@pytest.mark.extra("transformers")
@given(image=pil_images(modes=NO_ALPHA, max_side=40, transparency=False))
def test_pixels_equal_got_ocr2_where_the_rules_agree(got, image: Image.Image) -> None:
    """No alpha band, no key: both convert to RGB the same way, tile the same grid, resize BICUBIC, rescale
    (equal to ToTensor at every level) and normalize in float32: bitwise equal."""
    ours = iv.preprocess(image, SMALL)
    theirs = got_pixels(got, image, SMALL)
    assert ours.shape == theirs.shape and (ours.view(np.uint32) == theirs.view(np.uint32)).all()


@pytest.mark.extra("transformers")
def test_alpha_is_where_the_card_differs(got) -> None:
    """A partly transparent RGBA image: GotOcr2 (transformers 5.24) composites onto white, the card drops
    alpha. Fed the card's RGB conversion, GotOcr2 gives the card's values bitwise."""
    rng = np.random.default_rng(18)
    rgba = Image.fromarray(rng.integers(0, 256, (30, 50, 4), dtype=np.uint8))
    p_trns = Image.fromarray(rng.integers(0, 256, (30, 50, 3), dtype=np.uint8)).convert("P")
    p_trns.info["transparency"] = int(np.asarray(p_trns)[0, 0])
    for image in (rgba, rgba.convert("LA"), p_trns):
        ours = iv.preprocess(image, SMALL)
        assert not (ours == got_pixels(got, image, SMALL)).all(), image.mode
        assert (ours.view(np.uint32) == got_pixels(got, card_rgb(image), SMALL).view(np.uint32)).all(), image.mode
