"""The texts of the Qwen2.5-VL / Qwen3-VL pixel reproducer (C14 on a Qwen column, semantics §16.2, §18.2): the
counterexample's image drawn as deferlab draws it, each engine's served call, the checkpoint's processor, and the test, joined by
`reports.repro.qwen_pixels`.

Why the trained side is transformers' PIL backend run in the file: semantics §18.1 names it (``AutoImageProcessor``
with ``backend="pil"`` resolves the checkpoint's config to ``Qwen2VLImageProcessorPil``: Pillow's resize, the patch
layout). Only its RGB step is stated (§18.2.1, three lines): the trained side is transformers 5.24.0, and the
transformers an engine pins may predate 5.21.0's compositing (SGLang 0.5.23 pins 5.19.0), so the file hands the
backend the checkpoint's RGB image and asks it for levels (rescale and normalize off: C15 judges those). The served
side is the engine's own code at its pins; its values are read back as levels through its own processor's
rescale factor, mean and std (semantics §16.5), so the test compares uint8 levels, element by element.
"""

from deferlab.reports.repro.family_texts import CONFIG_FOLDER

COMMON_IMPORTS = """
import json
import os
import tempfile
import types

import numpy as np
from PIL import Image
from transformers import AutoImageProcessor
"""

SGLANG_IMPORTS = """
from sglang.srt.multimodal.media_artifacts.base import MediaArtifactInput
from sglang.srt.multimodal.processors.base_processor import Modality
from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor
"""

VLLM_IMPORTS = """
from vllm.multimodal.parse import MultiModalDataParser
"""

# deferlab's image of a case (class, width, height, seed), restated from `properties.strategies.served.make_image`
# (its draws in its order; a test checks every class against it): the helpers a class's `_draw` calls, then each
# class's `_draw`.
HELPERS = {
    "_u8": """

def _u8(rng, shape):
    return rng.integers(0, 256, size=shape).astype(np.uint8)
""",
    "_palette": '''

def _palette(rng, mode, w, h, alpha=False):
    """An image of ``mode`` P or PA: 1-256 palette entries, indices (and alpha) drawn, then the palette's bytes."""
    entries = int(rng.integers(1, 257))
    idx = rng.integers(0, entries, size=(h, w)).astype(np.uint8)
    data = np.stack([idx, _u8(rng, (h, w))], axis=-1) if alpha else idx
    image = Image.frombytes(mode, (w, h), data.tobytes())
    image.putpalette(rng.integers(0, 256, size=3 * entries, dtype=np.uint8).tobytes())
    return image
''',
    "_key_first": '''

def _key_first(image):
    """``image`` keyed on its first pixel's value (a grey level, or an RGB colour), so the key matters."""
    first = np.asarray(image).reshape(-1, len(image.getbands()))[0]
    image.info["transparency"] = int(first[0]) if len(first) == 1 else tuple(int(v) for v in first)
    return image
''',
    "_wide": '''

def _wide(rng, w, h, lo, highs):
    """Levels of a wide mode: mostly in 8-bit range, sometimes the full range (the top drawn first)."""
    hi = int(rng.choice(highs))
    return rng.integers(lo, hi + 1, size=(h, w))
''',
}
_PARTLY = """data = _u8(rng, (h, w, 4))
    data[0, 0, 3] = rng.integers(0, 255)  # at least one pixel is not opaque
    return Image.fromarray(data, "RGBA")"""
_P_TRNS = """image = _palette(rng, "P", w, h)
    if rng.integers(0, 2):
        image.info["transparency"] = int(np.asarray(image)[0, 0])  # one transparent index, held by a pixel
    else:
        entries = len(image.getpalette() or []) // 3
        size = int(rng.integers(1, entries + 1))
        image.info["transparency"] = rng.integers(0, 256, size=size, dtype=np.uint8).tobytes()
    return image"""
DRAW = {
    "RGB": 'return Image.fromarray(_u8(rng, (h, w, 3)), "RGB")',
    "L": 'return Image.fromarray(_u8(rng, (h, w)), "L")',
    "RGBA opaque": 'data = _u8(rng, (h, w, 4))\n    data[..., 3] = 255\n    return Image.fromarray(data, "RGBA")',
    "RGBA partly transparent": _PARTLY,
    "LA": 'return Image.fromarray(_u8(rng, (h, w, 2)), "LA")',
    "P": 'return _palette(rng, "P", w, h)',
    "P with tRNS": _P_TRNS,
    "1": "return Image.fromarray(_u8(rng, (h, w)) >= 128)",
    "RGB with a stray key": 'return _key_first(Image.fromarray(_u8(rng, (h, w, 3)), "RGB"))',
    "L with a key": 'return _key_first(Image.fromarray(_u8(rng, (h, w)), "L"))',
    "I;16": 'return Image.frombytes("I;16", (w, h), _wide(rng, w, h, 0, (255, 300, 65535)).astype("<u2").tobytes())',
    "I": 'return Image.frombytes("I", (w, h), _wide(rng, w, h, -300, (255, 300, 70000)).astype("<i4").tobytes())',
    "F": "levels = _wide(rng, w, h, -10, (255, 300)) + rng.random((h, w))\n    "
    'return Image.frombytes("F", (w, h), levels.astype("<f4").tobytes())',
    "PA": 'return _palette(rng, "PA", w, h, alpha=True)',
    "RGBX": 'return Image.frombytes("RGBX", (w, h), _u8(rng, (h, w, 4)).tobytes())',
    "CMYK": 'return Image.frombytes("CMYK", (w, h), _u8(rng, (h, w, 4)).tobytes())',
    "YCbCr": 'return Image.frombytes("YCbCr", (w, h), _u8(rng, (h, w, 3)).tobytes())',
}
IMAGE = '''

def _draw(rng, w, h):
    """A ``w`` x ``h`` image of class $cls (CASE's), its pixels from ``rng``."""
    $draw


def _image():
    """The counterexample CASE = (image class, width, height, seed), drawn as deferlab draws it: NumPy's
    default_rng(seed), its draws in deferlab's order (properties.strategies.served.make_image)."""
    _, width, height, seed = CASE
    return _draw(np.random.default_rng(seed), width, height)
'''

COMMON = (
    CONFIG_FOLDER
    + '''


def _as_levels(values, ip):
    """(N, 3, T*p*p) int16: the uint8 level behind each value ``ip`` returned (N, 3*T*p*p), undoing its own
    normalize and rescale (each value is within far less than half a level of its level's)."""
    x = np.asarray(values, dtype=np.float64).reshape(len(values), 3, -1)
    if ip.do_normalize:
        x = x * np.asarray(ip.image_std).reshape(1, 3, 1) + np.asarray(ip.image_mean).reshape(1, 3, 1)
    if ip.do_rescale:
        x = x / ip.rescale_factor
    return np.rint(x).astype(np.int16)


def _checkpoint_rgb(image):
    """The checkpoint's RGB step (semantics §18.2.1, transformers' convert_to_rgb from 5.21.0): an image with a band
    named A or a transparency key is converted to RGBA and alpha-composited onto opaque white; any other is
    converted to RGB."""
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        white = Image.new("RGBA", image.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, image.convert("RGBA")).convert("RGB")
    return image.convert("RGB")


def _trained_levels(image):
    """What the checkpoint's processor gives the tower, as levels: transformers' PIL backend for CFG
    (AutoImageProcessor, backend "pil": smart_resize, Pillow's resize, the patch layout) on the checkpoint's RGB
    image, rescale and normalize off. ((N, 3, T*p*p) int16, grid (t, h, w))."""
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder(), backend="pil")
    out = ip(images=[_checkpoint_rgb(image)], return_tensors="np", do_rescale=False, do_normalize=False)
    values = np.asarray(out["pixel_values"], dtype=np.float64)
    return np.rint(values).astype(np.int16).reshape(len(values), 3, -1), [int(v) for v in out["image_grid_thw"][0]]
'''
)

SGLANG_SERVED = '''

def _served_levels(image):
    """What SGLang feeds the tower: QwenVLImageProcessor's image path, ((N, 3, T*p*p) levels, grid). LOAD_FIRST:
    the default of this family (preprocess cache off) loads each image through _load_single_item first (its RGB
    rule, discard_alpha_channel=True); then prepare_artifact_batch hands the images to the checkpoint's transformers
    image processor (AutoImageProcessor of CFG, the transformers SGLang pins, backend resolved by transformers) with
    return_tensors="pt". The processor is built as SGLang's unit tests build one (object.__new__ and the attributes
    the method reads: default server args, CPU transport, the cache off); _fast_image_processor_device answers None,
    what SGLang picks where no CUDA-alike platform is (a CUDA server passes cuda:<base_gpu_id>). The model's cast of
    the values to bfloat16 comes after and is not applied: the levels are read off the float32 values."""
    if LOAD_FIRST:
        image = QwenVLImageProcessor._load_single_item(image, Modality.IMAGE, discard_alpha_channel=True)
    proc = object.__new__(QwenVLImageProcessor)
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder())
    proc._processor, proc._tokenizer = types.SimpleNamespace(image_processor=ip), None
    proc.image_config, proc.disable_fast_image_processor, proc.mm_feature_transport = {}, False, "cpu"
    proc.mm_preprocess_cache = types.SimpleNamespace(enabled=False)
    proc._fast_image_processor_device = lambda processor: None
    snapshot = proc.snapshot_media_source(image, Modality.IMAGE)
    media = proc.decode_media_snapshot(snapshot, Modality.IMAGE)
    entry = MediaArtifactInput(snapshot.content_digest, snapshot.content_digest, Modality.IMAGE, media)
    (artifact,) = proc.prepare_artifact_batch([entry])
    grid = [int(v) for v in artifact.model_specific_data["image_grid_thw"][0]]
    return _as_levels(artifact.feature.float().numpy(), ip), grid
'''

VLLM_SERVED = '''

def _served_levels(image):
    """What vLLM feeds the tower: its request parser (MultiModalDataParser._parse_image_data: EXIF transpose, then
    transparency composited onto white with Pillow's paste), then the checkpoint's transformers image processor
    (AutoImageProcessor of CFG, the transformers vLLM pins, backend resolved by transformers) with return_tensors
    "pt"; OVERRIDES are the kwargs the release merges in on this path (its default device-normalized path turns
    rescale and normalize off and finishes them on the device, which C15 and C4 judge). ((N, 3, T*p*p), grid)."""
    parsed = MultiModalDataParser()._parse_image_data([image]).get(0)
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder(), **OVERRIDES)
    out = ip(images=[parsed], return_tensors="pt")
    grid = [int(v) for v in out["image_grid_thw"][0]]
    return _as_levels(out["pixel_values"].float().numpy(), ip), grid
'''

C14_TEST = '''

def test_${cid}_the_served_pixels_are_the_checkpoints():
    """The levels served for the counterexample must be the checkpoint's: the same grid, then every value of every
    patch at most one uint8 level off (C14's part (a), the resize arithmetic's allowance; the float ulps of the
    normalization are C15's). It prints the grids and the first differing elements, expected vs served."""
    image = _image()
    served, grid = _served_levels(image)
    trained, want = _trained_levels(image)
    print(f"grid (t, h, w): served {grid}, the checkpoint's {want}; values: served {served.shape}, the checkpoint's {trained.shape}")
    assert grid == want and served.shape == trained.shape, f"grid {grid} != the checkpoint's {want}"
    off = np.abs(served - trained)
    bad = np.argwhere(off > 1)
    for n, c, i in bad[:12]:
        print(f"patch {n} channel {c} element {i}: expected (trained) {trained[n, c, i]}, served {served[n, c, i]}")
    if len(bad):
        n, c, i = (int(v) for v in bad[0])
        raise AssertionError(
            f"{len(bad)} of {off.size} values more than 1 level off the checkpoint's ({int((off > 0).sum())} differ, "
            f"up to {int(off.max())} levels off; first patch {n} channel {c} element {i}: level {served[n, c, i]} "
            f"served, {trained[n, c, i]} trained)"
        )
'''
