"""vLLM's decode as semantics §20.8 restates it (`reference.oracle.bytes_served`), checked without vLLM: where it
agrees with the trained side's decode and where it parts, its limits and their boundaries, its refusal types per
release, and that `differs` sees each way a served answer can leave the rule (each a mutant the image campaign
of issue 31 left alive before C20 read vLLM against its rule)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from deferlab.impl.image_bytes import Refusal
from deferlab.properties.strategies import encoded
from deferlab.reference.oracle import bytes_served as bs

ALPHA = {"P PNG tRNS", "LA PNG", "RGBA PNG"}
REFUSED = {"truncated JPEG", "truncated PNG", "bomb PNG", "broken BLP"}


def _trained(data: bytes) -> Image.Image:
    return ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")


@pytest.mark.parametrize("cls", encoded.ENCODED_CLASSES)
def test_the_rule_parts_from_the_trained_decode_only_where_the_semantics_say(cls: str) -> None:
    data = encoded.make_bytes(cls, 17, 11, 3)
    said = bs.vllm_decode(data, "0.34.0")
    if cls in REFUSED:
        assert said.image is None and said.refusal == "ValueError"
        assert said.names == ("Failed to load image",)
        return
    assert said.image is not None and said.image.mode == "RGB"
    same = np.array_equal(np.asarray(said.image), np.asarray(_trained(data)))
    assert same == (cls not in ALPHA), cls
    if cls in ("LA PNG", "RGBA PNG"):  # the alpha-0 band is the leftmost third: white there
        assert said.image.getpixel((0, 0)) == (255, 255, 255)


def test_the_release_decides_which_errors_become_value_errors() -> None:
    for cls, raw in (("broken BLP", "BLPFormatError"), ("bomb PNG", "DecompressionBombError")):
        data = encoded.make_bytes(cls, 17, 11, 0)
        assert bs.vllm_decode(data, "0.34.0").refusal == "ValueError"
        assert bs.vllm_decode(data, "0.33.0").refusal == raw
    data = encoded.make_bytes("truncated PNG", 17, 11, 0)
    assert bs.vllm_decode(data, "0.33.0").refusal == "ValueError"  # an OSError, caught in both


@pytest.mark.parametrize(
    ("options", "refused"),
    [({bs.CAP: -1}, None), ({bs.CAP: 0}, None), ({bs.CAP: 1}, ("17x11", "187 pixels", "1")),
     ({bs.CAP: 186}, ("17x11", "187 pixels", "186")),
     ({bs.CAP: 187}, None), ({bs.BUDGET: -1}, None), ({bs.BUDGET: 0}, None),
     ({bs.BUDGET: 747}, ("=747", "(748 bytes)")), ({bs.BUDGET: 748}, None)],
)  # fmt: skip
def test_the_limits_refuse_exactly_past_their_boundary(options: dict[str, int], refused: tuple | None) -> None:
    data = encoded.make_bytes(*bs.OPTION_CASE)
    said = bs.vllm_decode(data, "0.34.0", options)
    if refused is None:
        assert said.refusal is None and said.image.size == (17, 11)
    else:
        assert said.refusal == "ValueError" and said.names == refused
    assert options in bs.OPTIONS


def _refusal(error_type: str, message: str) -> Refusal:
    return Refusal("VLLM", error_type, message)


def test_differs_sees_every_way_of_leaving_the_rule() -> None:
    rgba = encoded.make_bytes("RGBA PNG", 17, 11, 0)
    said = bs.vllm_decode(rgba, "0.34.0")
    assert bs.differs(said, said.image, None) is None
    four = Image.open(io.BytesIO(rgba))
    other = Image.new("RGB", four.size, (255, 255, 255))
    other.paste(four, mask=four.getchannel("B"))  # another band as the mask
    assert "other values" in bs.differs(said, other, None)
    assert bs.differs(said, None, _refusal("ValueError", "x")) == "the rule takes it"
    truncated = bs.vllm_decode(encoded.make_bytes("truncated PNG", 17, 11, 0), "0.34.0")
    assert bs.differs(truncated, None, _refusal("ValueError", "Failed to load image: truncated")) is None
    assert bs.differs(truncated, None, _refusal("OSError", "image file is truncated")) is not None
    assert bs.differs(truncated, said.image, None) is not None
    capped = bs.vllm_decode(encoded.make_bytes(*bs.OPTION_CASE), "0.34.0", {bs.CAP: 186})
    text = "Image dimensions 17x11 (187 pixels) exceed the maximum of 186 pixels."
    assert bs.differs(capped, None, _refusal("ValueError", text)) is None
    assert bs.differs(capped, None, _refusal("ValueError", text.replace("(187 pixels)", "(28 pixels)"))) is not None
    assert bs.differs(capped, None, _refusal("OverflowError", text)) is not None  # its names, another type
    assert bs.differs(said, said.image.convert("L"), None) is not None


def test_a_refusal_is_read_by_its_fields_and_renders_its_one_line() -> None:
    refusal = Refusal("VLLM", "ValueError", "Failed to load image: a: b")
    assert str(refusal) == "VLLM refused: ValueError: Failed to load image: a: b"
    truncated = bs.vllm_decode(encoded.make_bytes("truncated PNG", 17, 11, 0), "0.34.0")
    assert bs.differs(truncated, None, refusal) is None
    # a label holding the line's separator: the type is the field's, not the text after " refused: "
    odd = Refusal("A refused: OSError", "ValueError", "Failed to load image")
    assert bs.differs(truncated, None, odd) is None
    assert bs.differs(truncated, None, Refusal("VLLM", "ValueErrorX", "Failed to load image")) is not None


def test_the_stated_releases_are_read_off_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bs.stated() == "vLLM 0.33.0-0.34.0"
    monkeypatch.setitem(bs.CAUGHT, "0.35.0", bs.CAUGHT["0.34.0"])
    assert bs.stated() == "vLLM 0.33.0-0.35.0"
    assert bs.rule_for("vllm 0.35.0") is not None
    monkeypatch.setitem(bs.CAUGHT, "0.9.0", bs.CAUGHT["0.33.0"])  # numeric order, not the text's
    assert bs.stated() == "vLLM 0.9.0-0.35.0"
    monkeypatch.setattr(bs, "CAUGHT", {"0.34.0": bs.CAUGHT["0.34.0"]})
    assert bs.stated() == "vLLM 0.34.0"


def test_a_rule_is_found_only_for_the_releases_it_states() -> None:
    assert bs.rule_for("vllm 0.34.0") is not None and bs.rule_for("vllm 0.33.0") is not None
    assert bs.rule_for("vllm 0.32.0") is None and bs.rule_for("sglang 0.5.23") is None
    assert bs.rule_for("vllm 0.34.0")(encoded.make_bytes("RGB PNG", 13, 9, 1)).image.size == (13, 9)


def test_a_requests_background_is_the_one_composited_onto() -> None:
    data = encoded.make_bytes(*bs.REQUEST_CASE)
    for request in bs.REQUESTS:
        said = bs.vllm_decode(data, "0.34.0", None, request)
        assert said.image.getpixel((0, 0)) == tuple(request[bs.BACKGROUND])
        assert bs.split(request) == ({}, request)
    assert bs.vllm_decode(data, "0.34.0").image.getpixel((0, 0)) == (255, 255, 255)
    assert bs.split({bs.CAP: 1, bs.BACKGROUND: (1, 2, 3)}) == ({bs.CAP: 1}, {bs.BACKGROUND: (1, 2, 3)})


@pytest.mark.parametrize("cls", ["truncated JPEG", "truncated PNG"])
def test_the_rule_runs_with_vllms_pillow_flags_whatever_this_process_holds(cls: str) -> None:
    """LMDeploy's import sets Pillow's process-global ``LOAD_TRUNCATED_IMAGES`` (semantics §20.8); a test process
    that loaded it must not change what the rule says vLLM gives: a truncated file is still refused, and the flag
    is left as it was found (found by the stop-40 suite, whose workers had loaded LMDeploy)."""
    from PIL import ImageFile

    data, before = encoded.make_bytes(cls, 17, 11, 0), ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = True
    try:
        said = bs.vllm_decode(data, "0.34.0")
        assert said.image is None and said.refusal == "ValueError"
        assert ImageFile.LOAD_TRUNCATED_IMAGES is True
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = before
