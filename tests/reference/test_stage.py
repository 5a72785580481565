"""Staging to uint8 CHW (semantics §3.1): the has_alpha rule, arrays, the corpus, and the front door."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from deferlab.properties.strategies.images import mode_images
from deferlab.reference.oracle import corpus
from deferlab.reference.oracle.stage import DELEGATED_MODES, has_alpha, image_size, raw_channels, to_chw_uint8

CORPUS = corpus.entries()


def upstream_staging(image: Image.Image) -> np.ndarray:
    """semantics §3.1 with Pillow's own convert: RGBA if has_alpha else RGB, HWC -> CHW."""
    alpha = image.mode != "RGB" and ("A" in image.getbands() or "transparency" in image.info)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(image.convert("RGBA" if alpha else "RGB")).transpose(2, 0, 1)


@pytest.mark.parametrize(
    ("mode", "info", "expected"),
    [
        ("RGB", {}, False),
        ("RGB", {"transparency": (1, 2, 3)}, False),  # never promoted (the PR aligned eager with this)
        ("RGBA", {}, True),
        ("LA", {}, True),
        ("PA", {}, True),
        ("La", {}, False),  # lower-case a: premultiplied, no "A" band
        ("RGBa", {}, False),
        ("LAB", {}, True),  # the a* axis is literally named "A"
        ("L", {}, False),
        ("L", {"transparency": 5}, True),
        ("P", {"transparency": 0}, True),
        ("P", {"transparency": b"\x00"}, True),
        ("I;16", {"transparency": 1}, True),
        ("CMYK", {}, False),
        ("1", {}, False),
    ],
)
def test_has_alpha_table(mode: str, info: dict, expected: bool) -> None:
    """has_alpha follows semantics §3.1 literally, band names included."""
    image = Image.new(mode, (2, 2))
    image.info.update(info)
    assert has_alpha(image) is expected
    assert raw_channels(image) == (4 if expected else 3)


@given(mode_images())
def test_pil_staging_equals_upstream_rule(image: Image.Image) -> None:
    """to_chw_uint8(PIL) equals Pillow's convert(RGBA if has_alpha else RGB) as CHW, or both raise."""
    try:
        expected = upstream_staging(image)
    except Exception as e:  # noqa: BLE001 - same exception type on both sides
        with pytest.raises(type(e)):
            to_chw_uint8(image)
        return
    got = to_chw_uint8(image)
    assert got.dtype == np.uint8 and got.flags.c_contiguous
    assert got.shape[0] == (4 if has_alpha(image) else 3)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_every_corpus_image_stages(entry: corpus.CorpusEntry) -> None:
    """Every corpus image stages to 3 or 4 channels (4 iff has_alpha), equal to the upstream rule."""
    with corpus.open_checked(entry) as image:
        got = to_chw_uint8(image)
        assert got.shape == (4 if has_alpha(image) else 3, image.size[1], image.size[0])
        assert np.array_equal(got, upstream_staging(image))


def test_la_staging_raises_like_upstream() -> None:
    """La is not has_alpha, and Pillow 13 cannot convert it to RGB: staging raises ValueError, as upstream would."""
    image = Image.new("La", (3, 2))
    assert not has_alpha(image)
    with pytest.raises(ValueError, match="La"):
        to_chw_uint8(image)
    with pytest.raises(ValueError):
        image.convert("RGB")


def test_rgba_premultiplied_stages_to_three_unpremultiplied_channels() -> None:
    """RGBa is not has_alpha: it stages to 3 channels, unpremultiplied (255*c//a), its alpha dropped."""
    image = Image.frombytes("RGBa", (2, 1), bytes([64, 32, 0, 128, 9, 9, 9, 0]))
    got = to_chw_uint8(image)
    assert got.shape == (3, 1, 2)
    assert got[:, 0, 0].tolist() == [127, 63, 0] and got[:, 0, 1].tolist() == [9, 9, 9]


def test_delegated_modes_are_the_colour_spaces() -> None:
    """Only the colour-space conversions are delegated to Pillow."""
    assert frozenset({"CMYK", "YCbCr", "LAB", "HSV"}) == DELEGATED_MODES


def test_promote_rgb_transparency_reproduces_pre_pr_rule() -> None:
    """promote_rgb_transparency=True turns RGB + colour key into RGBA (alpha 0 on the key); the default keeps RGB."""
    image = Image.frombytes("RGB", (2, 1), bytes([1, 2, 3, 4, 5, 6]))
    image.info["transparency"] = (1, 2, 3)
    assert to_chw_uint8(image).shape == (3, 1, 2)
    promoted = to_chw_uint8(image, promote_rgb_transparency=True)
    assert promoted.shape == (4, 1, 2) and promoted[3, 0].tolist() == [0, 255]


@given(
    hnp.arrays(
        np.uint8,
        st.one_of(
            hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=6),
            st.tuples(st.sampled_from([1, 3, 4]), st.integers(1, 6), st.integers(1, 6)),
        ),
    )
)
def test_array_staging(arr: np.ndarray) -> None:
    """Arrays: 2-D read as (H, W), one channel repeated to 3, 3/4 kept; a fresh C-contiguous copy."""
    got = to_chw_uint8(arr)
    chw = arr[None] if arr.ndim == 2 else arr
    assert got.shape == ((3 if chw.shape[0] == 1 else chw.shape[0]),) + chw.shape[1:]
    assert got.flags.c_contiguous and not np.shares_memory(got, arr)
    assert all(np.array_equal(got[c], chw[min(c, chw.shape[0] - 1)]) for c in range(got.shape[0]))
    assert image_size(arr) == (chw.shape[2], chw.shape[1])
    assert raw_channels(arr) == (3 if arr.ndim == 2 or arr.shape[0] == 1 else arr.shape[0])


def test_max_pixels_admits_up_to_its_count() -> None:
    """max_pixels admits exactly its count and None lifts it (the refusals are in test_front_door)."""
    assert to_chw_uint8(np.zeros((3, 10, 10), np.uint8), max_pixels=100).shape == (3, 10, 10)
    assert to_chw_uint8(np.zeros((10, 10), np.uint8), max_pixels=None).shape == (3, 10, 10)


def test_image_size_reads_chw_and_pil() -> None:
    """Width is shape[2] for CHW arrays, shape[1] for 2-D ones, .size[0] for PIL."""
    assert image_size(np.zeros((3, 5, 7), np.uint8)) == (7, 5)
    assert image_size(np.zeros((5, 7), np.uint8)) == (7, 5)
    assert image_size(Image.new("L", (7, 5))) == (7, 5)
    with pytest.raises(TypeError):
        image_size(object())


def test_sixteen_bit_grey_key_blanks_the_whole_image() -> None:
    """A 16-bit grey PNG keyed at 65535 stages fully transparent: Pillow keys on the saturated 8-bit level.

    Only 44% of ftbwn0g16.png's pixels carry the key, but every pixel saturates
    to 255 (the key's low byte) on conversion, so upstream's staging (and ours,
    which models it) makes all of them alpha 0: under kimi-k3 the picture is
    replaced by the chessboard.
    """
    with corpus.open_checked(corpus.by_name("libpng-pngsuite-ftbwn0g16.png")) as image:
        image.load()
        raw = np.asarray(image)
        staged = to_chw_uint8(image)
    assert image.mode == "I;16" and image.info["transparency"] == 65535
    assert 0 < (raw == 65535).mean() < 1
    assert staged.shape[0] == 4 and (staged[3] == 0).all()
