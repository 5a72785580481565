"""C20's sides (semantics §20.8): the encoded classes, the trained side's restatement against transformers'
``load_image`` itself, and each engine's own loader on its newest release, each in a child process (one engine
and one transformers per process), against what §20.8 read in the wheels before any of them ran.

The engine checks can fail: an EXIF-6 JPEG's decoded size is swapped iff the semantics say the engine transposes,
a fully transparent pixel is white iff it composites, a truncated file is taken iff it sets
``LOAD_TRUNCATED_IMAGES``, and the set of classes that differ from the trained side is the predicted one.
"""

from __future__ import annotations

import io
import os
import pickle
from typing import Any

import numpy as np
import pytest
from PIL import Image

from deferlab.properties.engines import skip_if_unfetched
from deferlab.properties.strategies import encoded
from deferlab.reference.oracle import bytes_served
from deferlab.reference.system.errors import InputValueError
from tests.impl.children import json_child

NEWEST = {"sglang": "0.5.23", "vllm": "0.34.0", "lmdeploy": "0.18.0"}
# semantics §20.8, read in the wheels: does the loader apply the EXIF orientation, composite alpha onto white,
# take a truncated file; and the classes it then differs from the trained side on.
TRANSPOSES = {"sglang": False, "vllm": True, "lmdeploy": False}
COMPOSITES = {"sglang": False, "vllm": True, "lmdeploy": False}
TAKES_TRUNCATED = {"sglang": False, "vllm": False, "lmdeploy": True}
EXIF_TURNED = {f"JPEG EXIF {n}" for n in range(2, 9)}
ALPHA = {"P PNG tRNS", "LA PNG", "RGBA PNG"}
PREDICTED = {
    "sglang": EXIF_TURNED,
    "vllm": ALPHA,
    "lmdeploy": EXIF_TURNED | {"truncated JPEG", "truncated PNG"},
}


def child(*args: str) -> dict[str, Any]:
    return json_child("tests.impl.image_bytes_child", *args, timeout=600)


@pytest.fixture(
    scope="module",
    params=[pytest.param(n, marks=pytest.mark.extra("vllm")) if n == "vllm" else n for n in sorted(NEWEST)],
)
def measured(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    name = request.param
    spec = os.environ.get(f"DEFERLAB_{name.upper()}", NEWEST[name])
    got = child("engine", name, spec)
    if "unfetched" in got:
        skip_if_unfetched(spec, got["unfetched"], name)
    return name, got


# --- the encoded classes ------------------------------------------------------------------------------------------


def test_every_class_is_deterministic_and_opens_as_its_structure_says() -> None:
    for cls in encoded.ENCODED_CLASSES:
        data = encoded.make_bytes(cls, 23, 14, 5)
        assert data == encoded.make_bytes(cls, 23, 14, 5), cls
        assert data != encoded.make_bytes(cls, 23, 14, 6) or cls == "bomb PNG", cls
    exif6 = Image.open(io.BytesIO(encoded.make_bytes("JPEG EXIF 6", 23, 14, 0)))
    assert exif6.size == (23, 14) and exif6.getexif()[encoded.EXIF_ORIENTATION] == 6
    assert Image.open(io.BytesIO(encoded.make_bytes("CMYK JPEG", 23, 14, 0))).mode == "CMYK"
    assert Image.open(io.BytesIO(encoded.make_bytes("I;16 PNG", 23, 14, 0))).mode == "I;16"
    assert Image.open(io.BytesIO(encoded.make_bytes("P PNG tRNS", 23, 14, 0))).info["transparency"]
    assert Image.open(io.BytesIO(encoded.make_bytes("YCbCr TIFF", 23, 14, 0))).mode == "YCbCr"
    blp = Image.open(io.BytesIO(encoded.make_bytes("broken BLP", 23, 14, 0)))
    assert (blp.format, blp.size) == ("BLP", (23, 14))
    with pytest.raises(NotImplementedError, match="Unknown BLP encoding"):
        blp.load()
    ycck = encoded.make_bytes("YCCK JPEG", 23, 14, 0)
    assert ycck[ycck.find(b"Adobe") + 11] == 2  # Adobe APP14 transform 2: YCCK


@pytest.mark.parametrize("cls", ["animated GIF", "animated WebP", "APNG"])
def test_animated_frames_differ(cls: str) -> None:
    image = Image.open(io.BytesIO(encoded.make_bytes(cls, 20, 12, 3)))
    frames = []
    for k in range(image.n_frames):
        image.seek(k)
        frames.append(np.asarray(image.convert("RGB")).copy())
    assert len(frames) == 3 and not np.array_equal(frames[0], frames[1]) and not np.array_equal(frames[1], frames[2])


def test_refused_bytes_are_refused_by_pillow(monkeypatch: pytest.MonkeyPatch) -> None:
    from PIL import ImageFile

    # Pillow's default, whatever a test before set in this process (LMDeploy's import sets it True, §20.8)
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", False)
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(encoded.make_bytes("bomb PNG", 1, 1, 0)))
    for cls in ("truncated JPEG", "truncated PNG"):
        with pytest.raises(OSError, match="truncated"):
            Image.open(io.BytesIO(encoded.make_bytes(cls, 20, 12, 0))).load()


def test_a_loader_refusal_carries_the_sides_exception_as_fields() -> None:
    from deferlab.impl.image_bytes import Loader, LoaderRefused, Refusal
    from deferlab.properties.bytes_trained import decoded
    from deferlab.reference.system.video import Refused

    def run(data: bytes, kind: str) -> Any:
        raise OSError("broken: at byte 3\nsecond line")

    loader = Loader("SIDE", "side 1.0", "side.load", run, truncated=False)
    with pytest.raises(Refused) as caught:
        loader.load(b"x", "file")
    assert isinstance(caught.value, LoaderRefused) and isinstance(caught.value.__cause__, OSError)
    assert caught.value.refusal == Refusal("SIDE", "OSError", "broken: at byte 3")
    assert str(caught.value) == "SIDE refused: OSError: broken: at byte 3"  # the line signatures read
    again = pickle.loads(pickle.dumps(caught.value))
    assert again.refusal == caught.value.refusal and str(again) == str(caught.value)
    image, refusal = decoded(loader, b"x", "data-uri")
    assert image is None and refusal == caught.value.refusal


def test_bad_input_is_one_line_naming_what_is_accepted() -> None:
    with pytest.raises(InputValueError, match="unknown encoded image class 'HEIC'; accepted: RGB JPEG"):
        encoded.make_bytes("HEIC", 10, 10, 0)
    with pytest.raises(InputValueError, match="size must be positive, got 0x3"):
        encoded.make_bytes("RGB PNG", 0, 3, 0)
    from deferlab.properties.bytes_trained import restated

    with pytest.raises(InputValueError, match="kind 'url' .* accepted: data-uri, file"):
        restated().load(b"", "url")


# --- the trained side ---------------------------------------------------------------------------------------------


@pytest.mark.extra("transformers")
def test_the_restatement_is_load_image_on_every_class() -> None:
    got = child("trained")
    assert got["system"] == "transformers 5.24.0"
    assert len(got["problems"]) == len(encoded.ENCODED_CLASSES) * 4
    assert {k: v for k, v in got["problems"].items() if v} == {}


@pytest.mark.extra("transformers")
def test_the_model_card_differs_from_load_image_where_the_semantics_read() -> None:
    """CARD (qwen-vl-utils' fetch_image) beside TRAINED (§20.8): no EXIF transpose, RGBA composited onto white."""
    got = child("card")
    if "refused" in got:
        pytest.skip(got["refused"])
    assert got["system"].startswith("qwen-vl-utils ") and got["trained"] == "transformers 5.24.0"
    differ = {case.split(";")[0] for case, found in got["problems"].items() if found}
    assert differ == EXIF_TURNED | {"RGBA PNG"}
    assert got["unkept size"].startswith("CARD resizes 17x11: only multiples of 28")


# --- each engine's own loader, newest release ---------------------------------------------------------------------


def test_exif_orientation_is_applied_iff_the_semantics_say_so(measured) -> None:
    name, got = measured
    for kind in ("data-uri", "file"):
        assert got["cases"][f"JPEG EXIF 6; {kind}"]["size"] == ([11, 17] if TRANSPOSES[name] else [17, 11])
        assert got["cases"][f"JPEG EXIF 1; {kind}"]["size"] == [17, 11]


def test_transparency_is_composited_onto_white_iff_the_semantics_say_so(measured) -> None:
    name, got = measured
    for cls in ("RGBA PNG", "LA PNG"):
        corner = got["cases"][f"{cls}; file"]["corner"]  # alpha 0 there; its colour is not white
        assert (corner == [255, 255, 255]) == COMPOSITES[name], (cls, corner)


def test_truncated_files_are_taken_iff_the_semantics_say_so(measured) -> None:
    name, got = measured
    for cls in ("truncated JPEG", "truncated PNG"):
        refused = got["cases"][f"{cls}; file"]["refused"]
        assert (refused is None) == TAKES_TRUNCATED[name], refused
    assert got["flag"][0] == got["flag"][1]  # the loader's flag is set around its call only
    assert got["cases"]["bomb PNG; file"]["refused"].startswith(f"{got['label']} refused: ")


def test_the_classes_that_differ_are_the_predicted_ones(measured) -> None:
    name, got = measured
    differ = {case.split(";")[0] for case, found in got["cases"].items() if found["problem"]}
    assert differ == PREDICTED[name]
    for case, found in got["cases"].items():  # the data URI and the file agree
        other = case.replace("data-uri", "file") if case.endswith("data-uri") else case.replace("file", "data-uri")
        assert (found["problem"] is None) == (got["cases"][other]["problem"] is None), case
    print(name, got["system"], got["seconds"])


def test_the_engine_decodes_as_its_stated_rule_says(measured) -> None:
    """Where semantics §20.8 restates the engine's own decode (vLLM 0.33.0-0.34.0), the loaded release answers as
    the rule on every class and kind (image bitwise, or a refusal of the rule's type naming what it names), C20's
    ruled wording adds nothing the plain one lacks, and under each option set the refusals fall where §20.8
    expects them (cap 1 and 186, budget 747) and nowhere else."""
    name, got = measured
    if "rule" not in got:
        assert bytes_served.rule_for(got["system"]) is None
        return
    assert {case: why for case, why in got["rule"].items() if why} == {}
    for case, found in got["cases"].items():
        assert found["ruled"] == found["problem"], case
    refused = {case.split(";")[0] for case, found in got["options"].items() if isinstance(found["answer"], str)}
    assert refused == {f"{bytes_served.CAP}=1", f"{bytes_served.CAP}=186", f"{bytes_served.BUDGET}=747"}
    assert {case: found["problem"] for case, found in got["options"].items() if found["problem"]} == {}
    taken = [found["answer"] for found in got["options"].values() if not isinstance(found["answer"], str)]
    assert taken and all(answer == ["RGB", 17, 11] for answer in taken)
    # a client's own background: composited onto it (alpha 0 at the corner), as the rule says, in its own cache entry
    assert got["requests"] and all(found["problem"] is None for found in got["requests"].values()), got["requests"]
    for found in got["requests"].values():
        assert found["corner"] == [0, 0, 0] and found["images differ"] and found["keys differ"]
