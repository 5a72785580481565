"""The served-vs-trained reproducer texts (C13, C14; vLLM's C15): the checkpoint's processor written out, each
engine's serving call, and the tests, joined into the templates `reports.repro.served` fills.

Why the checkpoint's processor is written out: a reproducer imports nothing of deferlab, and no engine ships
the checkpoint's remote-code processor, so the expected values are computed in the file from what semantics
§3.2, §11.1 and §11.3 state of it (`tests/reports/test_repro_served.py` checks it against the oracle).
"""

_RESIZE = '''

def _resize(width, height):
    """The checkpoint's resize decision (semantics §3.2): (new_w, new_h, pad_w, pad_h). Scale down (never up) to
    the patch limits, then pad bottom/right to whole merged patches."""
    p, m, side = CFG["patch_size"], CFG["merge_kernel_size"], CFG["patch_limit_on_one_side"]
    s1 = math.sqrt(CFG["in_patch_limit"] / (max(1.0, width // p) * max(1.0, height // p)))
    scale = min(1.0, s1, side * p / width, side * p / height)
    new_w, new_h = min(max(1, int(width * scale)), side * p), min(max(1, int(height * scale)), side * p)
    return new_w, new_h, -new_w % (m * p), -new_h % (m * p)
'''

_NORMALIZE = '''

def _normalize(levels):
    """The checkpoint's normalization (semantics §11.3) of uint8 levels (..., 3, H, W): x / 255 in float64 stored
    as float32, then x -= mean and x *= 1 / std with float64 operands, each result stored back as float32."""
    mean = np.asarray(CFG["image_mean"], dtype=np.float64).reshape(3, 1, 1)
    inv_std = (1.0 / np.asarray(CFG["image_std"], dtype=np.float64)).reshape(3, 1, 1)
    x = (levels.astype(np.float64) / 255.0).astype(np.float32)
    x = (x - mean).astype(np.float32)
    return (x * inv_std).astype(np.float32)
'''

_CHECKPOINT = (
    _RESIZE
    + '''

def _background(height, width):
    """The background level of each pixel for the config's transparent_bg_config (a plain colour or a chessboard)."""
    bg = CFG["transparent_bg_config"]
    if bg["pattern"] != "chessboard":
        return np.full((height, width), {"white": 255, "black": 0, "gray": 128}[bg["pattern"]], dtype=np.uint8)
    y, x = np.mgrid[0:height, 0:width]
    size = bg["chessboard_square_size"]
    gray = (y // size + x // size) % 2 == (1 if bg["chessboard_square_on_top_left"] else 0)
    return np.where(gray, bg["chessboard_gray_value"], bg["chessboard_white_value"]).astype(np.uint8)


def _composite(image):
    """The checkpoint's background fill (semantics §11.1): an RGB image as it is (a transparency key ignored); an
    image with neither an alpha band nor a key converted to RGB; any other converted to RGBA and blended
    a * rgb + (1 - a) * background in float32 (a = alpha / 255), truncated to uint8."""
    if CFG["transparent_bg_config"] is None:
        return image.convert("RGB")
    if image.mode == "RGB":
        return image
    if "A" not in image.getbands() and "transparency" not in image.info:
        return image.convert("RGB")
    rgba = np.asarray(image.convert("RGBA"))
    a = rgba[..., 3:4].astype(np.float32) / np.float32(255.0)
    blended = a * rgba[..., :3]
    blended += np.multiply(1 - a, _background(*rgba.shape[:2])[..., None], dtype=np.float32)
    return Image.fromarray(blended.astype(np.uint8))


def _checkpoint_levels(image):
    """uint8 (padded_h, padded_w, 3): what the checkpoint's processor normalizes. A uint8 array is read as Pillow
    reads it (1, 3, 4 channels: L, RGB, RGBA); then Pillow's bicubic resize to the §3.2 target (in the image's own
    mode) and the background fill, in the configured order, and zero padding bottom/right."""
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image[..., 0] if image.shape[2] == 1 else image)
    new_w, new_h, pad_w, pad_h = _resize(*image.size)
    if CFG["transparent_bg_fill_stage"] == "after_resize":
        rgb = _composite(image.resize((new_w, new_h), Image.Resampling.BICUBIC))
    else:  # "before_resize", the processor's own default
        rgb = _composite(image).resize((new_w, new_h), Image.Resampling.BICUBIC)
    out = np.zeros((new_h + pad_h, new_w + pad_w, 3), dtype=np.uint8)
    out[:new_h, :new_w] = np.asarray(rgb)
    return out
'''
    + _NORMALIZE
    + '''

def _patches(hwc):
    """(H, W, 3) -> (N, 3, p, p): patches in row-major grid order, channels first, as the vision tower reads them."""
    p = CFG["patch_size"]
    h, w, c = hwc.shape
    return hwc.reshape(h // p, p, w // p, p, c).transpose(0, 2, 4, 1, 3).reshape(-1, c, p, p)


def _served_levels(values):
    """The uint8 level behind each served value (N, 3, p, p): the nearest of the checkpoint's 256 values of its
    channel (a served normalization differs from those by a few ulps, far less than a level)."""
    table = _normalize(np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256)))[:, 0].astype(np.float64)
    levels = np.empty(values.shape, dtype=np.int16)
    for c in range(3):
        levels[:, c] = np.searchsorted((table[c, 1:] + table[c, :-1]) / 2, values[:, c])
    return levels
'''
)

_IMAGE_PIL = '''

def _image():
    """The counterexample, rebuilt byte for byte (its mode, size, data, palette and transparency key)."""
    image = Image.frombytes(MODE, SIZE, DATA)
    if PALETTE is not None:
        image.putpalette(PALETTE)
    image.info.update(INFO)
    return image
'''

_IMAGE_ARRAY = '''

def _image():
    """The counterexample: a uint8 NumPy array (height, width, channels), as a client may send it."""
    return np.array(VALUES, dtype=np.uint8)
'''

SGLANG_SERVE = '''

def _serve(image):
    """What SGLang feeds the vision tower for ``image``: its owner pipeline _gpu_preprocess_images with the hooks
    KimiK3ForConditionalGeneration.get_image_feature passes (to_chw_uint8, fill_transparent_bg), SGLang's own
    resize decision and normalization, run on the CPU (the eager producer, KimiK3GPUProcessorWrapper's
    prepare_image_features, runs the same pipeline staging to CUDA)."""
    width, height = _get_image_dimensions(image)
    rc = navit_resize_config(width, height, *(CFG[k] for k in GEOMETRY))
    scale, bias = normalization_tensors(list(CFG["image_mean"]), list(CFG["image_std"]), "cpu")
    bg = CFG["transparent_bg_config"]
    values, grids = _gpu_preprocess_images(
        [image], [rc], scale, bias, CFG["patch_size"], to_chw=functools.partial(to_chw_uint8, device="cpu"),
        post_resize=lambda x: fill_transparent_bg(x, bg),
    )
    return values.float().numpy(), grids.tolist()
'''

SGLANG_IMPORTS = """
import functools
import math

import numpy as np
from PIL import Image

from sglang.srt.multimodal.kimi_k3_image_processing import fill_transparent_bg, normalization_tensors, to_chw_uint8
from sglang.srt.multimodal.processors.kimi_k25 import (
    _get_image_dimensions,
    _gpu_preprocess_images,
    navit_resize_config,
)
"""

VLLM_SERVE = '''

def _serve(image):
    """What vLLM feeds the vision tower for ``image``: its request parser (MultiModalDataParser, which every
    request's images go through), then KimiK3Processor around the image processor vLLM's Kimi-K3 path serves
    with ($processor_class), built from the media_proc_cfg as vLLM's processor cache builds it."""
    parsed = MultiModalDataParser()._parse_image_data([image]).get(0)
    processor = ImageProcessor.from_dict({"media_proc_cfg": dict(CFG)})
    out = KimiK3Processor(image_processor=processor, tokenizer=None)(images=[parsed])
    return np.asarray(out["pixel_values"], dtype=np.float32), np.asarray(out["grid_thws"]).tolist()
'''

VLLM_IMPORTS = """
import math

import numpy as np
from PIL import Image

from vllm.multimodal.parse import MultiModalDataParser
from vllm.transformers_utils.processors.kimi_k3 import KimiK3Processor
from $processor_module import $processor_class as ImageProcessor
"""

VLLM_REMOTE_SERVE = '''

def _serve(image):
    """What vLLM feeds the vision tower for ``image``: this vLLM serves Kimi-K3 with the checkpoint's own
    remote-code processor (no wheel ships it), so the tower gets that processor (_checkpoint_levels, _normalize
    above) on what vLLM's request parser (MultiModalDataParser, which every request's images go through) hands it."""
    parsed = MultiModalDataParser()._parse_image_data([image]).get(0)
    levels = _checkpoint_levels(parsed)
    p = CFG["patch_size"]
    return _normalize(_patches(levels)), [[1, levels.shape[0] // p, levels.shape[1] // p]]
'''

VLLM_REMOTE_IMPORTS = """
import math

import numpy as np
from PIL import Image

from vllm.multimodal.parse import MultiModalDataParser
"""

ONE_LEVEL = '''

def _at_most_one_level_off(served, trained, whose, unit):
    """Raise naming how many values are more than one uint8 level off ``whose`` and the first of them."""
    off = np.abs(served - trained)
    bad = off > 1
    if bad.any():
        n, c, y, x = (int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{int(bad.sum())} of {off.size} values more than 1 level off the {whose} (up to {int(off.max())} "
            f"levels; first {unit} {n} channel {c} ({y}, {x}): level {served[n, c, y, x]} served, "
            f"{trained[n, c, y, x]} trained)"
        )
'''

C14_TEST = '''

def test_${cid}_the_served_pixels_are_the_checkpoints():
    """The values served for the image must be the checkpoint's, each at most one uint8 level off (C14's part (a);
    the float ulps of the normalization are C15's). It passes once this image is served like the checkpoint serves
    it; C14 itself asks that of every image class."""
    image = _image()
    hwc = _checkpoint_levels(image)
    trained = _patches(hwc).astype(np.int16)
    grid = [[1, hwc.shape[0] // CFG["patch_size"], hwc.shape[1] // CFG["patch_size"]]]
    values, served_grid = _serve(image)
    assert served_grid == grid and values.shape == trained.shape, (
        f"grid {served_grid} {values.shape} != checkpoint's {grid} {trained.shape}"
    )
    _at_most_one_level_off(_served_levels(values), trained, "checkpoint's", "patch")
'''

C13_TEST = '''

def test_${cid}_the_served_geometry_is_the_checkpoints():
    """The resize target, padding and prompt tokens served for an image of SIZE must be the checkpoint's."""
    new_w, new_h, pad_w, pad_h = _resize(*SIZE)
    factor = CFG["merge_kernel_size"] * CFG["patch_size"]
    tokens = CFG["fixed_output_tokens"]
    if tokens is None:
        tokens = ((new_h + pad_h) // factor) * ((new_w + pad_w) // factor)
    want = {"new_width": new_w, "new_height": new_h, "pad_width": pad_w, "pad_height": pad_h, "num_tokens": tokens}
    got = {k: int(v) for k, v in _served_geometry(*SIZE).items() if k in want}
    assert got == want, f"{SIZE[0]}x{SIZE[1]}: served {got}, checkpoint's {want}"
'''

SGLANG_GEOMETRY_IMPORTS = """
import math

from sglang.srt.multimodal.processors.kimi_k25 import navit_resize_config
"""

VLLM_GEOMETRY_IMPORTS = """
import math

from $processor_module import $processor_class as ImageProcessor
"""

SGLANG_GEOMETRY = '''

def _served_geometry(width, height):
    """SGLang's resize decision (navit_resize_config, what its processor expands the prompt with)."""
    return navit_resize_config(width, height, *(CFG[k] for k in GEOMETRY))
'''

VLLM_GEOMETRY = '''

class _Size:
    """An image's size and nothing else: all get_resize_config reads (a 16384 px side needs no pixels)."""

    def __init__(self, width, height):
        self.size = (width, height)


def _served_geometry(width, height):
    """vLLM's resize decision: its image processor's get_resize_config (what media_tokens_calculator returns)."""
    processor = ImageProcessor.from_dict({"media_proc_cfg": dict(CFG)})
    return processor.get_resize_config({"type": "image", "image": _Size(width, height)})
'''

VLLM_C15_TEST = (
    _NORMALIZE
    + '''

def test_${cid}_the_served_values_are_the_checkpoints_in_fp32():
    """vLLM's normalization must give the float32 values the model was trained on, bit for bit, at every uint8
    level of every channel (a 16x16 image of the 256 levels, one patch, served unresized)."""
    levels = np.tile(np.arange(256, dtype=np.uint8), (3, 1)).reshape(3, 16, 16)  # every uint8 level
    values, grid = _serve(Image.fromarray(np.ascontiguousarray(levels.transpose(1, 2, 0)), "RGB"))
    assert grid == [[1, 1, 1]] and values.shape == (1, 3, 16, 16), f"the levels image came back {values.shape}, {grid}"
    served, trained = values[0], _normalize(levels)
    differ = int((served.view(np.int32) != trained.view(np.int32)).any(axis=0).sum())
    mean, std = tuple(CFG["image_mean"]), tuple(CFG["image_std"])
    assert differ == 0, f"{differ} of 256 levels differ from the checkpoint in FP32 (mean {mean}, std {std})"
'''
)

C14 = "$imports\n$consts" + _CHECKPOINT + "$serve" + ONE_LEVEL + C14_TEST
C13 = "$imports\n$consts" + _RESIZE + "$geometry" + C13_TEST
VLLM_C15 = "$imports\n$consts" + "$serve" + VLLM_C15_TEST
