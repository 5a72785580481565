"""`impl.sglang.families.glm4v`: SGLang's GLM-4V image path for GLM-4.1V, judged on normalization (C15).

What is checked against what: the levels the path gives (SGLang's own ``_load_single_item``, then the release's
transformers ``Glm4vImageProcessor``) against the arithmetic semantics §18.9 states for the torchvision backend's
fused ``rescale_and_normalize``, written here in NumPy: ``(f32(u) - f32(f32(m) * 255)) / f32(f32(s) * 255)``, with
the published CLIP statistics and with drawn ones (they must reach the processor); the counts against §18.9's table
(537 / 768 in FP32, 0 after BF16); the processor is the pin's torchvision backend; bad input refused in one line.
The module imports transformers and torchvision, so the path runs in a child that loads SGLang with its companions;
0.5.17 (transformers 5.12.1, no ``smart_rgb_conversion``) and the newest release (5.19.0, with it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.impl.sglang.support import default_spec, run_child

CHILD = """
import json, sys
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from deferlab.reference.system.family_configs import NormConfig
from tests.impl.sglang.support import JSON_MARK
from tests.impl.sglang.test_glm4v import made_rgba

source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config("glm-4.1v"), fam.Trained("glm-4.1v")
path = family_path(source, "glm-4.1v", dtype="float32")
half = NormConfig(image_mean=(0.5,) * 3, image_std=(0.5,) * 3)
ip = path.image_processor(cfg)
out = {"version": source.version, "levels": path.levels(cfg).tolist(), "half": path.levels(half).tolist(),
       "problem": fam.normalization_problem(path, cfg, want), "provenance": path.provenance(),
       "ip": [type(ip).__module__, type(ip).__name__],
       "smart_rgb": bool(getattr(path.module.Glm4vImageProcessor, "smart_rgb_conversion", False))}
# C20's loaders (semantics §20.8): the family's own class's, and the base class's every other family takes
from deferlab.impl.sglang.image_bytes import image_loaders
from deferlab.properties.strategies import encoded
import numpy as np
glm, base = image_loaders(source, "glm-4.1v")[0], image_loaders(source)[0]
out["loaders"] = [glm.function, base.function, glm.provenance().get("requests", "")]
import io
def png(image):
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
cases = [(cls, encoded.make_bytes(cls, 17, 11, 0))
         for cls in ("RGBA PNG", "LA PNG", "P PNG tRNS", "JPEG EXIF 6", "RGB PNG", "CMYK JPEG")]
cases += [("bright border", png(made_rgba(True))), ("clear border", png(made_rgba(False)))]
out["decoded"] = {}
for cls, data in cases:
    out["decoded"][cls] = {side: [im.mode, list(im.size), np.asarray(im).tolist()]
                           for side, im in (("glm", glm.load(data, "file")), ("base", base.load(data, "file")))}
for name, call in (("dtype", lambda: family_path(source, "glm-4.1v", dtype="float16")),
                   ("width", lambda: path.geometry(0, 10, cfg))):
    try:
        call()
        out[name] = "accepted"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
print(JSON_MARK + json.dumps(out))
"""


def made_rgba(bright: bool) -> Any:
    """A 17 x 11 RGBA image whose border picks §20.8's other backgrounds: ``bright``, an opaque (200, 190, 180)
    border round a fully transparent centre (mean 190 > 128: (32, 32, 32)); else a fully transparent border round
    an opaque (20, 40, 60) centre (no opaque edge pixel: white)."""
    from PIL import Image

    a = np.zeros((11, 17, 4), np.uint8)
    if bright:
        a[...] = (200, 190, 180, 255)
        a[3:8, 4:13] = (9, 9, 9, 0)
    else:
        a[3:8, 4:13] = (20, 40, 60, 255)
    return Image.fromarray(a, "RGBA")


CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    spec = default_spec() if request.param == "newest" else request.param
    return run_child(CHILD, spec, spec=spec, timeout=900)


def stated(mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """§18.9's fused form of the torchvision backend: (3, 256) float32."""
    scale = np.float32(1.0 / (1 / 255))
    m = np.asarray(mean, np.float32) * scale
    s = np.asarray(std, np.float32) * scale
    u = np.arange(256, dtype=np.float32)[None, :]
    return (u - m[:, None]) / s[:, None]


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.extra("transformers")
def test_levels_are_the_fused_torchvision_normalization(served):
    got = np.asarray(served["levels"], dtype=np.float32)
    assert got.shape == (3, 256) and np.array_equal(bits(got), bits(stated(CLIP_MEAN, CLIP_STD)))


@pytest.mark.extra("transformers")
def test_the_configs_statistics_reach_the_processor(served):
    got = np.asarray(served["half"], dtype=np.float32)
    assert np.array_equal(bits(got), bits(stated((0.5,) * 3, (0.5,) * 3)))
    assert not np.array_equal(got, np.asarray(served["levels"], dtype=np.float32))


@pytest.mark.extra("transformers")
def test_c15_counts_are_semantics_18_9s(served):
    counts = "537 of 768 values differ from the checkpoint in FP32, first level 1, 0 of 768 after BF16"
    assert counts in served["problem"]


@pytest.mark.extra("transformers")
def test_it_runs_the_pins_torchvision_processor_and_sglangs_own_loader(served):
    assert served["ip"] == ["transformers.models.glm4v.image_processing_glm4v", "Glm4vImageProcessor"]
    assert "Glm4vImageProcessor._load_single_item (own" in served["provenance"]["load"]
    # smart_rgb_conversion (semantics §18.9, §20.8): from 0.5.20 only (read in every cached wheel)
    assert served["smart_rgb"] == (tuple(int(p) for p in served["version"].split(".")[:3]) >= (0, 5, 20))


@pytest.mark.extra("transformers")
def test_bad_input_is_refused_in_one_line(served):
    assert served["dtype"].startswith("InputValueError: dtype: 'float16'; accepted: 'bfloat16'")
    assert served["width"].startswith("InputValueError: width") and "\n" not in served["width"]


def _rgba(cls: str) -> np.ndarray:
    """The class's bytes decoded to RGBA by Pillow alone (17 x 11, seed 0): what the loaders start from; the two
    made images as `support.made_rgba` makes them."""
    import io

    from PIL import Image

    from deferlab.properties.strategies import encoded

    if cls.endswith("border"):
        return np.asarray(made_rgba(cls == "bright border"))
    return np.asarray(Image.open(io.BytesIO(encoded.make_bytes(cls, 17, 11, 0))).convert("RGBA"))


def _smart_background(rgba: np.ndarray) -> tuple[int, int, int]:
    """§20.8's border rule, in NumPy: the pixels with alpha over 128 at every ``max(1, w // 20)``-th column of the
    top and bottom rows and every ``max(1, h // 20)``-th row of the left and right columns; their mean brightness
    over 128 -> (32, 32, 32), else (240, 240, 240); none -> white."""
    h, w = rgba.shape[:2]
    xs, ys = range(0, w, max(1, w // 20)), range(0, h, max(1, h // 20))
    edge = [rgba[y, x] for x in xs for y in (0, h - 1)] + [rgba[y, x] for y in ys for x in (0, w - 1)]
    opaque = [p[:3] for p in edge if p[3] > 128]
    if not opaque:
        return (255, 255, 255)
    return (32, 32, 32) if float(np.mean(np.asarray(opaque, np.float64))) > 128 else (240, 240, 240)


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("cls", ["RGBA PNG", "LA PNG", "P PNG tRNS", "bright border", "clear border"])
def test_c20_glm_loader_composites_onto_the_border_background_from_0_5_20(served, cls):
    """GLM-4.1V's C20 loader is its class's own `_load_single_item`: from 0.5.20 (``smart_rgb_conversion``) a
    transparent image is composited onto §20.8's border-chosen background (fully opaque pixels keep their colour,
    fully transparent ones are the background), where the base class drops alpha; before, the two are one. The
    encoded classes' borders pick (240, 240, 240); the two made images pick (32, 32, 32) (a bright opaque border)
    and white (a fully transparent border)."""
    glm, base = served["decoded"][cls]["glm"], served["decoded"][cls]["base"]
    assert served["loaders"][0].endswith("glm4v.Glm4vImageProcessor._load_single_item")
    assert served["loaders"][1].endswith("base_processor.BaseMultimodalProcessor._load_single_item")
    smart = tuple(int(p) for p in served["version"].split(".")[:3]) >= (0, 5, 20)
    assert f"smart_rgb_conversion = {smart}" in served["loaders"][2]
    if not smart:
        assert glm == base
        return
    rgba = _rgba(cls)
    got, alpha = np.asarray(glm[2], np.uint8), rgba[..., 3]
    assert glm[:2] == ["RGB", [17, 11]] and (alpha < 255).any()
    assert np.array_equal(got[alpha == 255], rgba[..., :3][alpha == 255])
    assert (got[alpha == 0] == np.asarray(_smart_background(rgba), np.uint8)).all()
    assert glm != base


@pytest.mark.extra("transformers")
def test_c20_glm_loader_transposes_exif_from_0_5_20_and_converts_the_rest_as_the_base(served):
    """EXIF orientation 6 (a 90-degree turn): transposed (11 x 17) by the family's loader from 0.5.20, as stored
    (17 x 11) before and by the base loader; an opaque RGB PNG and a CMYK JPEG are the base's decode."""
    smart = tuple(int(p) for p in served["version"].split(".")[:3]) >= (0, 5, 20)
    exif = served["decoded"]["JPEG EXIF 6"]
    assert exif["base"][1] == [17, 11]
    assert exif["glm"][1] == ([11, 17] if smart else [17, 11])
    for cls in ("RGB PNG", "CMYK JPEG"):
        assert served["decoded"][cls]["glm"] == served["decoded"][cls]["base"]
