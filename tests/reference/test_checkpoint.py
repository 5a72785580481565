"""The checkpoint oracle (`reference.oracle.checkpoint`, semantics §11.5): hand values, refusals, properties (every
PIL mode at both fill stages: `test_checkpoint_modes`).

Expectations are built another way than the oracle's (by hand, a chessboard drawn here, a palette looked up here,
an identity between two modes), so a wrong rule shows up as a difference, never as agreement."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties.strategies.images import mode_images, pil_images, pipeline_pil_images
from deferlab.reference.oracle import checkpoint as ck
from deferlab.reference.oracle.background import composite_into
from deferlab.reference.oracle.normalize import normalize_checkpoint, patchify
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.profiles import profile
from tests.reference.checkpoint_support import BOARD, CLIP, HALF, NH, NW, SMALL, STAGES, H, W, lv, noise, reseed


@pytest.fixture(autouse=True)  # each test draws the same noise whatever ran before it, so a failure reproduces
def _reseed() -> None:
    reseed()


def test_resize_config_and_tokens_by_hand() -> None:
    k3 = profile("kimi-k3")
    rc = ck.resize_config(640, 480, k3)  # scale 1; 640 = 22*28 + 24 -> pad 4; 480 = 17*28 + 4 -> pad 24
    assert (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height) == (640, 480, 4, 24)
    assert rc.grid_thw == (1, 36, 46) and ck.num_tokens(640, 480, k3) == 18 * 23 == 414
    # 8000x6000: s1 = sqrt(65536 / (571 * 428)) = 0.51784...; 4142 = 147*28 + 26, 3107 = 110*28 + 27
    rc = ck.resize_config(8000, 6000, k3)
    assert (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height) == (4142, 3107, 2, 1)
    assert rc.grid_thw == (1, 222, 296) and ck.num_tokens(8000, 6000, k3) == 111 * 148
    # SMALL, 40x20: s1 = sqrt(16 / (20 * 10)) = 0.28284; new 11x5, pads 1 and 3 -> 12x8, tokens 3 * 2
    rc = ck.resize_config(40, 20, SMALL)
    assert (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height) == (11, 5, 1, 3)
    assert rc.num_tokens == 6 and rc.grid_thw == (1, 4, 6)
    assert ck.num_tokens(1, 1, k3) == 1 and ck.resize_config(1, 1, k3).grid_thw == (1, 2, 2)
    fixed = k3.with_(fixed_output_tokens=64)  # F changes the token count only, not the grid
    assert ck.num_tokens(1024, 1024, fixed) == 64 and ck.resize_config(1024, 1024, fixed).grid_thw == (1, 74, 74)
    image = Image.fromarray(noise(H, W, 3))  # SMALL, 20x14 -> 9x6, padded with zeros to 12x8, grid 4x6
    out = lv(image, "after_resize")
    assert out.shape == (8, 12, 3) and out.dtype == np.uint8 and not out[NH:].any() and not out[:, NW:].any()
    pv, grids = ck.preprocess([image], SMALL)
    assert grids.tolist() == [[1, 4, 6]] and grids.dtype == np.int64 and pv.shape == (24, 3, 2, 2)


def test_composite_by_hand_truncates() -> None:
    """2x2 RGBA on a 1-px chessboard (white at (0,0) and (1,1), gray 180 elsewhere), a = A/255 in reals:

    (0,0) A 0 over 255 -> 255.  (0,1) A 128 over 180: (101*128 + 180*127)/255 = 140.35 -> 140, 190.04 -> 190,
    93.16 -> 93.  (1,0) A 200 over 180: 46.67 -> 46 and 54.51 -> 54 (rounding would give 47 and 55), 62.35 -> 62.
    (1,1) A 255 -> its colour."""
    cfg = SMALL.with_(merge_kernel_size=1, background=BackgroundConfig("chessboard", 1, 255, 180, True))
    px = np.array([[[9, 9, 9, 0], [101, 200, 7, 128]], [[10, 20, 30, 200], [1, 2, 3, 255]]], np.uint8)
    want = [[[255, 255, 255], [140, 190, 93]], [[46, 54, 62], [1, 2, 3]]]
    for stage in STAGES:  # same size: resize returns a copy, so both stages composite the same pixels
        assert lv(Image.fromarray(px), stage, cfg).tolist() == want
    # 0 under A 49 over white: 255 * 206/255 is exactly 206 in reals and in float32 (the CPU value, §3.4)
    white = cfg.with_(background=BackgroundConfig("white"))
    assert lv(Image.fromarray(np.array([[[0, 0, 0, 49]]], np.uint8)), "after_resize", white)[0, 0].tolist() == [206] * 3


def test_composite_equals_sglangs_cpu_composite_everywhere() -> None:
    """Every colour x alpha x background level: the checkpoint's float32 blend + astype equals SGLang's CPU
    composite + floor (semantics §14.7), and alpha/255 in float32 is the float64 quotient rounded to float32."""
    levels = np.arange(256, dtype=np.uint8)
    assert np.array_equal(levels / np.float32(255), (levels / 255.0).astype(np.float32))
    colour, alpha = np.meshgrid(levels, levels, indexing="ij")
    rgba = np.stack([colour, colour, colour, alpha], axis=-1)
    plain = [(BackgroundConfig(name), level) for name, level in (("white", 255), ("black", 0), ("gray", 128))]
    one_cell = [(BackgroundConfig("chessboard", 256, 200, 180, top), 180 if not top else 200) for top in (False, True)]
    for bg, level in plain + one_cell:  # a 256-px board is one cell: white 200, or gray 180 when not top-left
        ours = np.asarray(ck.composite(Image.fromarray(rgba), bg))
        got, chw = np.empty((3, 256, 256), np.float32), rgba.transpose(2, 0, 1)
        composite_into(chw[:3], chw[3:], np.full((256, 256), level, np.float32), "cpu", got)
        assert np.array_equal(ours, got.transpose(1, 2, 0).astype(np.uint8))


@pytest.mark.parametrize("stats", [HALF, CLIP], ids=["half", "clip"])
def test_normalization_of_levels(stats) -> None:
    """Solid images of 0, 127, 128, 255: §11.3 by hand, f32(f64(f32(f64(f32(u/255)) - mean)) * (1/std))."""
    mean, std = stats
    cfg = PreprocessConfig(patch_size=2, merge_kernel_size=1, image_mean=mean, image_std=std)
    for u in (0, 127, 128, 255):
        pv, _ = ck.preprocess([Image.fromarray(np.full((2, 2, 3), u, np.uint8))], cfg)
        for c in range(3):
            x = np.float32(float(np.float32(u / 255.0)) - mean[c])  # u/255 and - mean in doubles, stored f32
            x = np.float32(float(x) * (1.0 / std[c]))
            assert (pv[:, c].view(np.uint32) == x.view(np.uint32)).all(), (u, c)
    table = ck.normalization_table(cfg)
    every = np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256))
    assert np.array_equal(table.view(np.uint32), normalize_checkpoint(every, mean, std)[:, 0].view(np.uint32))
    if mean[0] == 0.5:
        assert table[:, 0].tolist() == [-1.0] * 3 and table[:, 255].tolist() == [1.0] * 3


BAD_INPUTS = [
    (np.zeros((4, 4, 3), np.float32), InputValueError, r"images\[1\] is a NumPy array of dtype float32; accepted"),
    (np.zeros((4, 4, 2), np.uint8), InputValueError, r"images\[1\] has shape \(4, 4, 2\); accepted: .*\{1, 3, 4\}"),
    (np.zeros((4, 4), np.uint8), InputValueError, r"images\[1\] has shape \(4, 4\) \(add a channel axis"),
    (np.zeros((0, 4, 3), np.uint8), InputValueError, r"images\[1\] is empty \(4x0\)"),
    (Image.new("RGB", (0, 3)), InputValueError, r"images\[1\] is empty \(0x3\)"),
    ("cat.png", InputTypeError, r"images\[1\] is a str; accepted: a PIL.Image.Image"),
    ([[1, 2, 3]], InputTypeError, r"images\[1\] is a list"),
]


@pytest.mark.parametrize(("bad", "error", "match"), BAD_INPUTS, ids=lambda v: getattr(v, "__name__", None))
def test_bad_inputs_are_refused_before_any_pixel_work(bad, error, match) -> None:
    no_work = mock.patch.object(Image.Image, "resize", side_effect=AssertionError("pixel work started"))
    with no_work, pytest.raises(error, match=match):
        ck.preprocess([noise(4, 4, 3), bad], SMALL)


def test_bad_configs_and_requests() -> None:
    image = noise(4, 4, 3)
    for call in (
        lambda: ck.preprocess([image], SMALL.to_media_proc_cfg()),
        lambda: ck.levels(image, "kimi-k3"),
        lambda: ck.resize_config(4, 4, None),
        lambda: ck.num_tokens(4, 4, {}),
    ):
        with pytest.raises(InputTypeError, match=r"cfg must be a PreprocessConfig"):
            call()
    with pytest.raises(InputTypeError, match=r"images must be a sequence"):
        ck.preprocess(image, SMALL)
    with pytest.raises(InputValueError, match=r"image has 16 pixels \(4x4\), over max_pixels=15"):
        ck.levels(image, SMALL.with_(max_pixels=15))
    pv, grids = ck.preprocess([], SMALL)
    assert pv.shape == (0, 3, 2, 2) and pv.dtype == np.float32 and grids.shape == (0, 3) and grids.dtype == np.int64


configs = st.tuples(st.sampled_from((*STAGES, None)), st.sampled_from([HALF, CLIP])).map(
    lambda t: SMALL.with_(fill_stage=t[0], image_mean=t[1][0], image_std=t[1][1])
)


@given(st.lists(pipeline_pil_images(max_side=40), min_size=1, max_size=4), configs)
def test_preprocess_is_per_image_levels_normalized(batch: list, cfg: PreprocessConfig) -> None:
    """Concatenated per-image results; each is normalize_checkpoint(levels) laid out by patchify, bit for bit
    (so the table is exact); the table inverts back to the levels; padding is level 0; grids from resize_config."""
    pv, grids = ck.preprocess(batch, cfg)
    table = ck.normalization_table(cfg)
    assert (np.diff(table.astype(np.float64), axis=1) > 0).all()  # strictly increasing: invertible
    start = 0
    for image, grid in zip(batch, grids, strict=True):
        rc = ck.resize_config(image.size[0], image.size[1], cfg)
        assert tuple(grid) == rc.grid_thw
        levels = ck.levels(image, cfg)
        assert not levels[rc.new_height :].any() and not levels[:, rc.new_width :].any()
        rows = pv[start : start + rc.num_patches]
        direct = patchify(normalize_checkpoint(levels.transpose(2, 0, 1), cfg.image_mean, cfg.image_std), 2)
        assert np.array_equal(rows.view(np.uint32), direct.view(np.uint32))
        chw = np.stack([np.searchsorted(table[c], rows[:, c]) for c in range(3)], axis=1)  # (n, 3, p, p)
        back = chw.reshape(*rc.grid_thw[1:], 3, 2, 2).transpose(0, 3, 1, 4, 2).reshape(levels.shape)
        assert np.array_equal(back, levels)
        alone, alone_grid = ck.preprocess([image], cfg)
        assert np.array_equal(alone.view(np.uint32), rows.view(np.uint32)) and np.array_equal(alone_grid[0], grid)
        start += rc.num_patches
    assert start == len(pv)


@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 2**32 - 1), st.booleans())
@example(1, 1, 0, True)
@example(40, 1, 0, True)
def test_stages_agree_on_opaque_images(w: int, h: int, seed: int, as_rgba: bool) -> None:
    """Opaque RGB (and RGBA with alpha 255) images: the composite changes nothing, so the stages agree bitwise."""
    rgb = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    image = Image.fromarray(np.dstack([rgb, np.full((h, w), 255, np.uint8)]) if as_rgba else rgb)
    assert np.array_equal(lv(image, "after_resize"), lv(image, "before_resize"))
    assert np.array_equal(lv(image, "after_resize"), lv(rgb, "after_resize"))


@pytest.mark.filterwarnings("ignore:Palette images with Transparency expressed in bytes")
@given(st.one_of(pil_images(max_side=12), mode_images()), st.sampled_from(STAGES), st.booleans())
def test_every_mode_and_key_gives_levels_or_our_refusal(image: Image.Image, stage: str, with_bg: bool) -> None:
    """Any mode with any transparency key: uint8 levels of the padded size, or deferlab's refusal, nothing else."""
    cfg = SMALL.with_(fill_stage=stage, background=BOARD if with_bg else None)
    try:
        out = ck.levels(image, cfg)
    except InputValueError as e:
        assert "the checkpoint's processor refuses it" in str(e)
        return
    rc = ck.resize_config(image.size[0], image.size[1], cfg)
    assert out.dtype == np.uint8 and out.shape == (rc.padded_height, rc.padded_width, 3)
