"""The stated parse of a handed-over Pillow image (semantics §20.8): each step on an image built to show it, the
release split for an RGB image with a transparency key, and `differs` seeing a one-value departure."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.oracle import parsed_served


def _rgba() -> Image.Image:
    a = np.zeros((3, 4, 4), np.uint8)
    a[..., 0], a[..., 3] = 200, [[0, 255, 128, 0]] * 3  # red, alpha 0 / 255 / 128 / 0 by column
    return Image.fromarray(a, "RGBA")


def test_transparency_is_composited_onto_white_through_the_alpha_band():
    got = np.asarray(parsed_served.vllm_parse(_rgba(), "0.34.0"))
    assert got.shape == (3, 4, 3)
    assert got[0, 0].tolist() == [255, 255, 255] and got[0, 1].tolist() == [200, 0, 0]  # alpha 0 white, 255 kept
    assert got[0, 2, 0] == 227 and got[0, 2, 1] == 127  # alpha 128: Pillow's paste blend of 200 / 0 over 255


def test_an_rgb_image_with_a_key_is_kept_before_0_33_0_and_composited_from_it():
    image = Image.fromarray(np.full((2, 2, 3), 7, np.uint8), "RGB")
    image.info["transparency"] = (7, 7, 7)
    assert np.asarray(parsed_served.vllm_parse(image, "0.32.0")).max() == 7
    assert np.asarray(parsed_served.vllm_parse(image, "0.33.0")).min() == 255  # every pixel keyed: all white


def test_the_exif_orientation_is_applied_and_other_modes_converted():
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 clockwise to display
    Image.new("L", (5, 2), 9).save(buf, "JPEG", exif=exif)
    got = parsed_served.vllm_parse(Image.open(buf), "0.34.0")
    assert (got.mode, got.size) == ("RGB", (2, 5))


@pytest.mark.parametrize(
    "system", ["SGLang 0.5.23", "sglang-0.5.23", "vLLM 0.26.0", "vllm-0.34.0@abc", "lmdeploy-0.18.0", ""]
)
def test_no_rule_is_stated_outside_vllms_read_releases(system):
    assert parsed_served.rule_for(system) is None


def test_differs_names_a_one_value_departure_and_a_mode_change():
    rule = parsed_served.rule_for("vLLM 0.34.0")
    assert rule is not None
    want = rule(_rgba())
    assert parsed_served.differs(want.copy(), want) is None
    off = np.asarray(want).copy()
    off[2, 3, 1] -= 1  # a background of 254 in one channel
    found = parsed_served.differs(Image.fromarray(off, "RGB"), want)
    assert found is not None and found.startswith("1 values") and "x=3, y=2" in found
    assert "where the rule gives RGB" in (parsed_served.differs(want.convert("L"), want) or "")
