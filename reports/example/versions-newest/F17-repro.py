# deferlab reproducer (format 1): claim C14 on vllm-0.34.0
# Claim: C14: For every image class the checkpoint accepts (and uint8 arrays), the served pixel values equal the
#   checkpoint's, every differing element explained: at most 1 uint8 level off, and within the C15 allowance of
#   the checkpoint's normalization of the served level.
# System: vllm-0.34.0 (vllm 0.34.0, commit -)
# Spec: 0.34.0
# Flaw: the served pixels of an image are more than one level off the checkpoint processor's
# Recorded failure: AssertionError: [RGB with a stray key] 1x1: vllm-0.34.0 (device-normalized): 3 of 2352 values
#   unexplained (3 differ; up to 125 levels off and 0 ulps; first patch 0 channel 0 (0, 0): level 255 served, 217
#   trained)
# Counterexample: deferlab's minimal counterexample, from versions.json: ServedCase.make('RGB with a stray key',
#   1, 1, seed=0, few=False, geometry=None) = PIL.Image(mode='RGB', size=(1, 1), info={'transparency': (217, 163,
#   130)}, data=bytes.fromhex('d9a382'))
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --vllm SPEC (deferlab's
#   loader: no vLLM dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F17 (C14 on vllm-0.34.0): the served pixels of an image are more than one level off the checkpoint processor's."""

import math

import numpy as np
from PIL import Image

from vllm.multimodal.parse import MultiModalDataParser
from vllm.transformers_utils.processors.kimi_k3 import KimiK3Processor
from vllm.transformers_utils.processors.kimi_k25_vision_fused import KimiK25FusedVisionProcessor as ImageProcessor

# The checkpoint's media_proc_cfg (its preprocessor_config.json): deferlab's 'kimi-k3' profile, with the case's geometry
CFG = {
    'temporal_merge_kernel_size': 1,
    'in_patch_limit_each_frame': None,
    'in_patch_limit_video': None,
    'patch_size': 14,
    'merge_kernel_size': 2,
    'in_patch_limit': 65536,
    'patch_limit_on_one_side': 512,
    'fixed_output_tokens': None,
    'image_mean': [0.5, 0.5, 0.5],
    'image_std': [0.5, 0.5, 0.5],
    'transparent_bg_config': {
        'pattern': 'chessboard',
        'chessboard_square_size': 8,
        'chessboard_white_value': 255,
        'chessboard_gray_value': 180,
        'chessboard_square_on_top_left': True,
    },
    'transparent_bg_fill_stage': 'after_resize',
    'max_pixels': 178956970,
}
# The image (class 'RGB with a stray key' of semantics §16.3):
MODE, SIZE, INFO = 'RGB', (1, 1), {'transparency': (217, 163, 130)}
DATA = bytes.fromhex('d9a382')
PALETTE = None


def _image():
    """The counterexample, rebuilt byte for byte (its mode, size, data, palette and transparency key)."""
    image = Image.frombytes(MODE, SIZE, DATA)
    if PALETTE is not None:
        image.putpalette(PALETTE)
    image.info.update(INFO)
    return image


def _resize(width, height):
    """The checkpoint's resize decision (semantics §3.2): (new_w, new_h, pad_w, pad_h). Scale down (never up) to
    the patch limits, then pad bottom/right to whole merged patches."""
    p, m, side = CFG["patch_size"], CFG["merge_kernel_size"], CFG["patch_limit_on_one_side"]
    s1 = math.sqrt(CFG["in_patch_limit"] / (max(1.0, width // p) * max(1.0, height // p)))
    scale = min(1.0, s1, side * p / width, side * p / height)
    new_w, new_h = min(max(1, int(width * scale)), side * p), min(max(1, int(height * scale)), side * p)
    return new_w, new_h, -new_w % (m * p), -new_h % (m * p)


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


def _normalize(levels):
    """The checkpoint's normalization (semantics §11.3) of uint8 levels (..., 3, H, W): x / 255 in float64 stored
    as float32, then x -= mean and x *= 1 / std with float64 operands, each result stored back as float32."""
    mean = np.asarray(CFG["image_mean"], dtype=np.float64).reshape(3, 1, 1)
    inv_std = (1.0 / np.asarray(CFG["image_std"], dtype=np.float64)).reshape(3, 1, 1)
    x = (levels.astype(np.float64) / 255.0).astype(np.float32)
    x = (x - mean).astype(np.float32)
    return (x * inv_std).astype(np.float32)


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


def _serve(image):
    """What vLLM feeds the vision tower for ``image``: its request parser (MultiModalDataParser, which every
    request's images go through), then KimiK3Processor around the image processor vLLM's Kimi-K3 path serves
    with (KimiK25FusedVisionProcessor), built from the media_proc_cfg as vLLM's processor cache builds it."""
    parsed = MultiModalDataParser()._parse_image_data([image]).get(0)
    processor = ImageProcessor.from_dict({"media_proc_cfg": dict(CFG)})
    out = KimiK3Processor(image_processor=processor, tokenizer=None)(images=[parsed])
    return np.asarray(out["pixel_values"], dtype=np.float32), np.asarray(out["grid_thws"]).tolist()


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


def test_c14_the_served_pixels_are_the_checkpoints():
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
