"""The checkpoint oracle (`reference.oracle.checkpoint`, semantics §11.5) on every PIL mode, at both fill stages:
1 and P, the grey, RGB-like, wide, colour-space and premultiplied modes, palettes and transparency keys.

Expectations are built another way than the oracle's (by hand, a chessboard drawn here, a palette looked up here,
an identity between two modes), so a wrong rule shows up as a difference, never as agreement. Split from
`test_checkpoint` (hand values, refusals, properties); their shared inputs are `checkpoint_support`'s.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.oracle import checkpoint as ck
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.profiles import profile
from tests.reference.checkpoint_support import NH, NW, RNG, SMALL, STAGES, H, W, lv, noise, reseed


@pytest.fixture(autouse=True)  # each test draws the same noise whatever ran before it, so a failure reproduces
def _reseed() -> None:
    reseed()


def board(h: int, w: int) -> np.ndarray:  # BOARD drawn by hand: top-left cell white 255, its neighbours gray 180
    y, x = np.mgrid[:h, :w]
    return np.where((y // 3 + x // 3) % 2 == 1, 180, 255).astype(np.uint8)[..., None].repeat(3, 2)


def padded(pixels: np.ndarray, h: int = 8, w: int = 12) -> np.ndarray:
    return np.pad(pixels, ((0, h - pixels.shape[0]), (0, w - pixels.shape[1]), (0, 0)))  # zeros


@pytest.mark.parametrize("stage", STAGES)
def test_one_bit_and_palette(stage: str) -> None:
    """after_resize: 1 and P are resized NEAREST (only their own values); before_resize: as their RGB conversion."""
    one = Image.fromarray(noise(H, W) > 127)
    palette = noise(256 * 3)
    p = Image.frombytes("P", (W, H), RNG.integers(0, 6, H * W, dtype=np.uint8).tobytes())
    p.putpalette(palette.tobytes())
    if stage == "after_resize":
        got = lv(one, stage)[:NH, :NW]
        assert set(np.unique(got)) <= {0, 255} and (got == got[..., :1]).all()
        colours = {tuple(c) for c in palette.reshape(-1, 3)[:6].tolist()}
        assert {tuple(c) for c in lv(p, stage)[:NH, :NW].reshape(-1, 3).tolist()} <= colours
    else:
        assert np.array_equal(lv(one, stage), lv(one.convert("RGB"), stage))
        assert np.array_equal(lv(p, stage), lv(p.convert("RGB"), stage))


@pytest.mark.parametrize("stage", STAGES)
def test_grey_modes_are_replicated(stage: str) -> None:
    """L equals the RGB image with grey in every band; LA the RGBA one (both premultiplied alike)."""
    grey, alpha = noise(H, W), noise(H, W)
    assert np.array_equal(lv(Image.fromarray(grey), stage), lv(Image.fromarray(np.stack([grey] * 3, -1)), stage))
    assert np.array_equal(lv(grey[..., None], stage), lv(Image.fromarray(grey), stage))  # a 1-channel array is L
    la = Image.merge("LA", [Image.fromarray(grey), Image.fromarray(alpha)])
    rgba = np.stack([grey, grey, grey, alpha], -1)
    assert np.array_equal(lv(la, stage), lv(Image.fromarray(rgba), stage))
    assert np.array_equal(lv(rgba, stage), lv(Image.frombytes("RGBA", (W, H), rgba.tobytes()), stage))  # 4: RGBA


@pytest.mark.parametrize("stage", STAGES)
def test_rgb_rgba_rgbx_and_a_stray_key(stage: str) -> None:
    """Opaque RGBA, RGBX, a keyed RGB and the array are the RGB image; a transparent RGBA is the board."""
    rgb = noise(H, W, 3)
    want = lv(Image.fromarray(rgb), stage)
    keyed = Image.fromarray(rgb)
    keyed.info["transparency"] = tuple(int(v) for v in rgb[0, 0])  # a colour it holds: still ignored for RGB
    assert np.array_equal(lv(keyed, stage), want)
    assert np.array_equal(lv(Image.fromarray(np.dstack([rgb, np.full((H, W), 255, np.uint8)])), stage), want)
    assert np.array_equal(lv(Image.frombytes("RGBX", (W, H), np.dstack([rgb, noise(H, W)]).tobytes()), stage), want)
    assert np.array_equal(lv(rgb, stage), want)  # the uint8 array (H, W, 3) is the RGB image
    clear = Image.fromarray(np.dstack([noise(H, W, 3), np.zeros((H, W), np.uint8)]))
    if stage == "after_resize":  # alpha 0 stays 0 through the resize: the board at the target size
        assert np.array_equal(lv(clear, stage), padded(board(NH, NW)))
    else:  # composited first: the board at the original size, then resized
        assert np.array_equal(lv(clear, stage), lv(Image.fromarray(board(H, W)), stage))


def test_rgba_is_resized_premultiplied() -> None:
    """after_resize: colour under alpha 0 never bleeds, so two images differing only there give the same levels,
    with or without a background; before_resize without one drops alpha first, and that colour is resized in."""
    rgba = noise(H, W, 4)
    rgba[..., 3] = np.where(noise(H, W) > 100, rgba[..., 3], 0)
    other = rgba.copy()
    other[rgba[..., 3] == 0, :3] = 255 - other[rgba[..., 3] == 0, :3]
    one, two = Image.fromarray(rgba), Image.fromarray(other)
    assert np.array_equal(lv(one, None), lv(one, "before_resize"))  # an unstated stage is the processor default
    assert not np.array_equal(lv(one, "after_resize"), lv(one, "before_resize"))  # and the stage matters
    assert ck.fill_stage(profile("kimi-k3")) == "after_resize"
    assert ck.fill_stage(profile("kimi-k2.5")) == "before_resize"  # K2.5's profile states no stage
    bare = SMALL.with_(background=None)
    assert np.array_equal(lv(one, "after_resize"), lv(two, "after_resize"))
    assert np.array_equal(lv(one, "after_resize", bare), lv(two, "after_resize", bare))
    assert not np.array_equal(lv(one, "before_resize", bare), lv(two, "before_resize", bare))


@pytest.mark.parametrize("stage", STAGES)
def test_wide_grey_modes(stage: str) -> None:
    """I clips, I;16 saturates, F truncates (semantics §13.5), after Pillow's resize in the native mode."""
    images = {
        "I": Image.frombytes("I", (W, H), RNG.integers(-300, 600, H * W).astype("<i4").tobytes()),
        "I;16": Image.frombytes("I;16", (W, H), RNG.integers(0, 700, H * W).astype("<u2").tobytes()),
        "F": Image.frombytes("F", (W, H), RNG.uniform(-20, 280, H * W).astype("<f4").tobytes()),
    }
    for mode, image in images.items():
        got = lv(image, stage)
        if stage == "before_resize":
            assert np.array_equal(got, lv(image.convert("RGB"), stage)), mode
            continue
        raw = np.asarray(image.resize((NW, NH), Image.Resampling.BICUBIC))  # Pillow's resize, native mode
        grey = np.clip(np.trunc(raw.astype(np.float64)), 0, 255).astype(np.uint8)  # our rule
        assert np.array_equal(got, padded(np.stack([grey] * 3, -1))), mode


@pytest.mark.parametrize("stage", STAGES)
def test_colour_spaces_and_ignored_keys(stage: str) -> None:
    """CMYK, YCbCr: solid colours with known RGB; LAB (alpha 255) is its RGB; keys Pillow does not apply: ignored."""
    for mode, value, level in (
        ("CMYK", (0, 0, 0, 0), 255),
        ("CMYK", (0, 0, 0, 255), 0),
        ("YCbCr", (200, 128, 128), 200),
    ):
        got = lv(Image.new(mode, (W, H), value), stage)
        assert np.array_equal(got, padded(np.full((NH, NW, 3), level, np.uint8))), mode
    for mode in ("CMYK", "YCbCr", "LAB", "RGBX", "F", "I;16L"):  # LAB: an "A" band, alpha 255 -> as its RGB
        image = Image.new(mode, (W, H))
        image.frombytes(noise(len(image.tobytes())).tobytes())
        keyed = image.copy()
        keyed.info["transparency"] = 0
        assert np.array_equal(lv(keyed, stage), lv(image, stage)), mode
        if stage == "before_resize":
            assert np.array_equal(lv(image, stage), lv(image.convert("RGB"), stage)), mode


@pytest.mark.parametrize("stage", STAGES)
def test_premultiplied_modes_and_refusals(stage: str) -> None:
    """La is refused (no converter in Pillow 13); RGBa is RGB unless keyed, then composited with its own alpha;
    a key form Pillow cannot apply is refused."""
    with pytest.raises(InputValueError, match=r"image \(La \d+x\d+\): the checkpoint's processor refuses it.*La"):
        lv(Image.new("La", (W, H)), stage)
    rgb = noise(H, W, 3)
    opaque = Image.frombytes("RGBa", (W, H), np.dstack([rgb, np.full((H, W), 255, np.uint8)]).tobytes())
    assert np.array_equal(lv(opaque, stage), lv(Image.fromarray(rgb), stage))
    clear = Image.frombytes("RGBa", (W, H), np.zeros((H, W, 4), np.uint8).tobytes())
    assert not lv(clear, stage).any()  # not composited: its black stays
    clear.info["transparency"] = 0
    assert np.array_equal(lv(clear, stage), lv(Image.fromarray(np.zeros((H, W, 4), np.uint8)), stage))
    p, grey = Image.new("P", (W, H)), Image.new("L", (W, H))
    p.info["transparency"], grey.info["transparency"] = (1, 2, 3), b"\x01"  # key forms Pillow cannot apply
    with pytest.raises(InputValueError, match=r"refuses it: Pillow's convert\(\"RGBA\"\) raises ValueError"):
        lv(p, stage)
    with pytest.raises(InputValueError, match=r"image \(L .*refuses it.*TypeError"):
        lv(grey, stage)


@pytest.mark.parametrize("stage", STAGES)
def test_pa_loses_its_palette_when_resized(stage: str) -> None:
    """after_resize: Pillow 13 resizes PA bicubic (not NEAREST) and the result has no palette, so every colour
    converts to black and only the bicubic-resized alpha survives (a surprise, §11.5). before_resize is its RGBA."""
    idx, alpha = RNG.integers(0, 256, (H, W), dtype=np.uint8), noise(H, W)
    palette = np.stack([np.arange(256), 255 - np.arange(256), np.full(256, 7)], -1).astype(np.uint8)
    pa = Image.merge("PA", [Image.frombytes("P", (W, H), idx.tobytes()), Image.fromarray(alpha)])
    pa.putpalette(palette.tobytes())
    if stage == "after_resize":
        assert pa.resize((NW, NH), Image.Resampling.BICUBIC).getpalette() == []
        resized_alpha = np.asarray(Image.fromarray(alpha).resize((NW, NH), Image.Resampling.BICUBIC))
        black = Image.fromarray(np.dstack([np.zeros((NH, NW, 3), np.uint8), resized_alpha]))  # 9x6: kept as is
        assert np.array_equal(lv(pa, stage), lv(black, stage))
    else:
        assert np.array_equal(lv(pa, stage), lv(pa.convert("RGBA"), stage))


@pytest.mark.parametrize("stage", STAGES)
def test_keyed_palettes(stage: str) -> None:
    """tRNS as an int (one index) and as bytes (per-index alphas); after_resize keys the NEAREST-resized indices."""
    idx = RNG.integers(0, 6, (H, W), dtype=np.uint8)
    palette = noise(6, 3)
    near = np.asarray(Image.fromarray(idx).resize((NW, NH), Image.Resampling.NEAREST))
    for key in (2, b"\x00\x40\xff\x10"):
        p = Image.frombytes("P", (W, H), idx.tobytes())
        p.putpalette(palette.tobytes())
        p.info["transparency"] = key
        got = lv(p, stage)
        if stage == "before_resize":
            assert np.array_equal(got, lv(p.convert("RGBA"), stage))
        elif isinstance(key, int):
            want = np.where((near == key)[..., None], board(NH, NW), palette[near])
            assert np.array_equal(got, padded(want))
        else:
            alphas = np.array(list(key) + [255] * 2, np.uint8)[near]
            at_target = Image.fromarray(np.dstack([palette[near], alphas]))  # already 9x6: not resized again
            assert np.array_equal(got, lv(at_target, stage))


@pytest.mark.parametrize("stage", STAGES)
def test_keyed_grey_modes(stage: str) -> None:
    """1, L, I, I;16 keyed on their solid value: the board; L keys the *resized* levels with after_resize."""
    i16 = Image.frombytes("I;16", (W, H), np.full(H * W, 7, "<u2").tobytes())
    for image in (Image.new("1", (W, H), 0), Image.new("L", (W, H), 7), Image.new("I", (W, H), 7), i16):
        image.info["transparency"] = 0 if image.mode == "1" else 7
        want = padded(board(NH, NW)) if stage == "after_resize" else lv(Image.fromarray(board(H, W)), stage)
        assert np.array_equal(lv(image, stage), want), image.mode
    grey = np.where(np.arange(W) < W // 2, 0, 100).astype(np.uint8)[None].repeat(H, 0)
    resized = np.asarray(Image.fromarray(grey).resize((NW, NH), Image.Resampling.BICUBIC))
    key = int(next(v for v in np.unique(resized) if v not in (0, 100)))  # a level only the resize makes
    keyed = Image.fromarray(grey)
    keyed.info["transparency"] = key
    if stage == "after_resize":
        want = np.where((resized == key)[..., None], board(NH, NW), resized[..., None].repeat(3, 2))
        assert np.array_equal(lv(keyed, stage), padded(want))
    else:
        assert np.array_equal(lv(keyed, stage), lv(Image.fromarray(grey), stage))
