"""Our own PIL mode conversions (`reference.oracle.modes`) against Pillow 13's ``convert``, bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import example, given
from PIL import Image

from deferlab.properties.strategies.images import mode_images, p_image
from deferlab.reference.oracle import corpus
from deferlab.reference.oracle.modes import DELEGATED_MODES, GREY_MODES, OWN_MODES, to_rgb, to_rgba

CORPUS = corpus.entries()
_U8_MODES = ("LA", "La", "PA", "RGB", "RGBA", "RGBa", "RGBX", "CMYK", "YCbCr", "LAB", "HSV")


def pillow(image: Image.Image, mode: str) -> np.ndarray | type[Exception]:
    """Pillow's own answer, or the exception type it raises (warnings silenced: P+bytes -> RGB warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(image.convert(mode))
        except Exception as e:  # noqa: BLE001 - we compare exception types
            return type(e)


def ours(fn, image: Image.Image) -> np.ndarray | type[Exception]:
    try:
        return fn(image)
    except Exception as e:  # noqa: BLE001
        return type(e)


def assert_same(image: Image.Image) -> None:
    for fn, mode in ((to_rgb, "RGB"), (to_rgba, "RGBA")):
        expected, got = pillow(image, mode), ours(fn, image)
        if isinstance(expected, type) or isinstance(got, type):
            assert got == expected, f"{image.mode} info={image.info} -> {mode}: Pillow {expected}, ours {got}"
        else:
            assert got.dtype == np.uint8 and got.shape == expected.shape
            assert np.array_equal(got, expected), f"{image.mode} info={image.info} -> {mode} differs"


@given(mode_images())
@example(p_image([0, 1, 2, 200], [10, 20, 30, 40, 50, 60, 70, 80, 90], trns=b"\x00\x80"))  # short alpha table
@example(p_image([0, 1, 2], [10, 20, 30, 40, 50, 60], trns=1))  # single int index
@example(p_image([0, 1, 2], [10, 20, 30, 40, 50, 60, 70, 80], "RGBA", trns=b"\x07"))  # RGBA palette + bytes
def test_own_conversions_equal_pillow(image: Image.Image) -> None:
    """to_rgb/to_rgba equal np.asarray(image.convert(...)) bit for bit, or raise the same exception type."""
    assert_same(image)


def keyed(image: Image.Image, trns: object) -> Image.Image:
    """``image`` with ``info["transparency"] = trns`` (any object: Pillow reads whatever info holds)."""
    image.info["transparency"] = trns
    return image


def grey(mode: str, values: list[int]) -> Image.Image:
    """A 1-row grey image of ``mode`` holding ``values``."""
    dtype = {"I": "<i4", "I;16B": ">u2", "F": "<f4"}.get(mode, "<u2")
    if mode == "L":
        return Image.frombytes("L", (len(values), 1), bytes(values))
    return Image.frombytes(mode, (len(values), 1), np.array(values, dtype=dtype).tobytes())


@given(mode_images(modes=GREY_MODES))
@example(keyed(grey("L", [5, 6, 5]), (5, 6, 7)))  # review bug: a tuple key keys on key[0] for RGBA, TypeError for RGB
@example(keyed(grey("I", [5, 300]), (261, 0, 0)))  # first component's low byte, after clipping
@example(keyed(grey("I;16", [5, 6]), (5,)))  # not 3 long: TypeError for RGBA, ignored for RGB
@example(keyed(grey("L", [5, 6]), (5,)))  # L -> RGB takes a 1-tuple, L -> RGBA does not
@example(keyed(grey("L", [5, 6]), None))  # None: TypeError for RGBA, fine for RGB
@example(keyed(grey("L", [5, 6]), np.int64(5)))  # numpy int: keyed for RGBA, TypeError for RGB
@example(keyed(grey("L", [5, 6]), b"\x05\x06\x07"))  # bytes: TypeError for RGBA, ignored for RGB
@example(keyed(grey("L", [5, 6]), (2**31, 0, 0)))  # past a C int: OverflowError for RGBA
@example(keyed(grey("I;16B", [5, 6]), (5, 6, 7)))  # byte-swapped 16-bit grey ignores every key
@example(keyed(grey("F", [5, 6]), "odd"))  # F ignores every key
def test_grey_modes_with_every_key_form_equal_pillow(image: Image.Image) -> None:
    """Grey modes (1, L, I, I;16*, F) with every transparency form convert (or raise) exactly as Pillow does."""
    assert_same(image)


@given(mode_images(modes=("P", "PA", "RGB")))
@example(keyed(p_image([0, 1], [5, 6, 7]), np.int64(0)))  # numpy int: ValueError for RGBA, TypeError for RGB
@example(keyed(p_image([0, 1], [5, 6, 7]), bytearray(b"\x00")))  # bytearray is not bytes for P
@example(keyed(p_image([0, 1], [5, 6, 7]), (9, 9, 9)))  # absent colour appended for RGB, ValueError for RGBA
@example(keyed(p_image([0, 1], [5, 6, 7]), (300, 0, 0)))  # cannot be appended: ValueError for RGB
@example(keyed(p_image([0, 1], [5, 6, 7]), (5, 6, 7.5)))  # non-integer component: TypeError for RGB
@example(keyed(p_image([0, 1], [5, 6, 7]), [5, 6, 7, 8]))  # non-opaque colour on an RGB palette: ValueError
@example(keyed(p_image([0, 1], [5, 6, 7]), 300))  # index past the palette: ValueError for RGBA
@example(keyed(p_image([0, 1], [5, 6, 7]), True))  # bool is an int: index 1
@example(keyed(Image.frombytes("RGB", (2, 1), bytes([5, 0, 0, 5, 6, 7])), 5))  # int key on RGB is (5, 0, 0)
def test_palette_and_rgb_with_every_key_form_equal_pillow(image: Image.Image) -> None:
    """P, PA and RGB with every transparency form convert (or raise) exactly as Pillow does."""
    assert_same(image)


def test_tuple_and_int_keys_by_hand() -> None:
    """Hand-derived key rules: grey keys on key[0]'s low byte, RGB on (k, 0, 0) for an int k."""
    assert to_rgba(keyed(grey("L", [5, 6, 5]), (5, 6, 7)))[0, :, 3].tolist() == [0, 255, 0]
    assert to_rgba(keyed(grey("I;16", [5, 300, 255]), (65535, 1, 1)))[0, :, 3].tolist() == [255, 0, 0]
    rgb = Image.frombytes("RGB", (2, 1), bytes([5, 0, 0, 5, 6, 7]))
    assert to_rgba(keyed(rgb, 261))[0, :, 3].tolist() == [0, 255]
    assert to_rgba(keyed(rgb, [5, 6, 7]))[0, :, 3].tolist() == [255, 0]
    with pytest.raises(TypeError):
        to_rgb(keyed(grey("L", [5]), (5, 6, 7)))
    with pytest.raises(TypeError):
        to_rgba(keyed(grey("L", [5]), (5, 6)))
    with pytest.raises(OverflowError):
        to_rgba(keyed(grey("I", [5]), -(2**31) - 1))
    assert to_rgb(keyed(grey("I", [5]), (5, 6))).tolist() == [[[5, 5, 5]]]  # I -> RGB never reads the key


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_corpus_first_frames_equal_pillow(entry: corpus.CorpusEntry) -> None:
    """Every corpus image's first frame converts to RGB and RGBA exactly as Pillow does."""
    with corpus.open_checked(entry) as image:
        assert_same(image)


def test_corpus_is_present() -> None:
    """The built-in corpus the parametrized tests walk lists every file it ships, and no other (68 images)."""
    shipped = sorted(p.name for p in (corpus.BUILTIN / "images").iterdir())
    assert shipped == sorted(e.name for e in corpus.read_manifest(corpus.BUILTIN)) and len(shipped) == 68


def test_hand_computed_vectors() -> None:
    """The per-pixel rules of semantics §13.5 on hand-picked values."""
    f = Image.frombytes("F", (5, 1), np.array([1.9, -0.5, 254.9, 300.0, np.nan], dtype="<f4").tobytes())
    assert to_rgb(f)[0, :, 0].tolist() == [1, 0, 254, 255, 0]  # truncation, clipping, NaN -> 0
    i16 = Image.frombytes("I;16", (3, 1), np.array([255, 256, 4660], dtype="<u2").tobytes())
    assert to_rgb(i16)[0, :, 0].tolist() == [255, 255, 255]  # saturation, not /256
    one = Image.fromarray(np.array([[True, False]]))
    assert to_rgb(one)[0, :, 0].tolist() == [255, 0]
    rgba_pm = Image.frombytes("RGBa", (3, 1), bytes([100, 50, 20, 128, 200, 0, 0, 0, 10, 10, 10, 255]))
    # 255*100//128 = 199, 255*50//128 = 99, 255*20//128 = 39; a in {0, 255} unchanged.
    assert to_rgb(rgba_pm).tolist() == [[[199, 99, 39], [200, 0, 0], [10, 10, 10]]]
    grey = Image.frombytes("L", (3, 1), bytes([5, 6, 5]))
    grey.info["transparency"] = 5
    assert to_rgba(grey)[0, :, 3].tolist() == [0, 255, 0]
    assert to_rgba(grey)[0, :, 0].tolist() == [5, 6, 5]  # keyed pixels keep their colour


def test_la_is_not_convertible() -> None:
    """La (premultiplied, lower-case a) has no Pillow 13 converter to RGB/RGBA: both Pillow and we raise."""
    la = Image.new("La", (2, 2))
    with pytest.raises(ValueError, match="La"):
        to_rgb(la)
    with pytest.raises(ValueError, match="La"):
        to_rgba(la)
    assert isinstance(pillow(la, "RGB"), type)


def test_rgbx_pad_byte_is_not_alpha() -> None:
    """RGBX -> RGBA gives alpha 255 whatever the X byte holds."""
    image = Image.frombytes("RGBX", (1, 1), bytes([1, 2, 3, 4]))
    assert to_rgba(image).tolist() == [[[1, 2, 3, 255]]]


def test_bad_inputs() -> None:
    """Non-images are a TypeError naming the type."""
    with pytest.raises(TypeError, match="PIL.Image.Image"):
        to_rgb(np.zeros((2, 2, 3), np.uint8))
    p = p_image([0], [1, 2, 3], trns=(1, 2, 3))
    with pytest.raises(ValueError, match="bytes or int"):
        to_rgba(p)


@pytest.mark.parametrize("mode", sorted(_U8_MODES))
def test_every_multiband_mode_is_covered(mode: str) -> None:
    """Each multi-band mode is either converted by us or explicitly delegated."""
    assert mode in OWN_MODES or mode in DELEGATED_MODES
