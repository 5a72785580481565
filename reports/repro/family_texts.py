"""The model families' reproducer texts (semantics §18): the trained side each states in a few lines, each engine's
call, and the tests, joined into the templates `reports.repro.families` fills.

Why the trained side is written out: a reproducer imports nothing of deferlab, so what the checkpoint computes is
stated in the file, as semantics §18 states it: transformers' normalization (§18.1: ``f32(f64(u) * rescale)``,
then ``(x - f32(mean)) / f32(std)`` in float32), the model card's InternVL grid rule (§18.4: the aspect-ratio
walk, ties to the larger grid only above half its area) and tiles, Qwen's ``smart_resize`` (§18.2). The served
side is the engine's own code, imported by path from the release the loader put in place (with the
transformers and torchvision it pins, where the path computes with them).
"""

TRAINED_LEVELS = '''

def _trained_levels():
    """The checkpoint's processor on every uint8 level (semantics §18.1, transformers' image processor backend):
    x = f32(f64(u) * RESCALE) (do_rescale; else f32(u)), then x = (x - f32(MEAN)) / f32(STD) in float32
    (do_normalize). (3, 256) float32."""
    u = np.arange(256, dtype=np.uint8)
    x = (u.astype(np.float64) * RESCALE).astype(np.float32) if DO_RESCALE else u.astype(np.float32)
    x = np.repeat(x[None, :], 3, axis=0)
    if not DO_NORMALIZE:
        return x
    return (x - np.asarray(MEAN, np.float32)[:, None]) / np.asarray(STD, np.float32)[:, None]
'''

CONFIG_FOLDER = '''
_FOLDERS = []  # the script's temporary folders, each removed when the script ends


def _checkpoint_folder(config=None):
    """A folder holding ``config`` (default CFG) as the checkpoint's preprocessor_config.json (what the release
    reads it from)."""
    _FOLDERS.append(tempfile.TemporaryDirectory(prefix="deferlab-repro-"))
    folder = _FOLDERS[-1].name
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as f:
        json.dump(CFG if config is None else config, f)
    return folder
'''

_DEVICE_LEVELS = (
    CONFIG_FOLDER
    + '''

def _device_levels(dtype):
    """What vLLM's device normalization gives every level of every channel (3, 256): build_mm_input_norm, as the
    model builds it (_load_norm_params reads the checkpoint's config; layout LAYOUT), then FusedMMInputNorm's
    forward_native (the CPU path) from uint8 into ``dtype``."""
    model_config = types.SimpleNamespace(
        model=_checkpoint_folder(NORM_CONFIG), revision=None, hf_image_processor_config=NORM_CONFIG,
        multimodal_config=types.SimpleNamespace(mm_device_do_normalize=True),
    )
    with set_current_vllm_config(types.SimpleNamespace(compilation_config=CompilationConfig())):
        norm = build_mm_input_norm(model_config, layout=LAYOUT)
    u = torch.arange(256, dtype=torch.uint8)
    x = u.reshape(1, 1, 16, 16).expand(1, 3, 16, 16) if LAYOUT == "bchw" else u.repeat(3).reshape(1, 768)
    return norm.forward_native(x.contiguous(), dtype).float().numpy().reshape(3, 256)
'''
)

VLLM_NORM_IMPORTS = """
import json
import os
import tempfile
import types

import numpy as np
import torch

from vllm.config import CompilationConfig, set_current_vllm_config
from vllm.model_executor.layers.fusion.mm_input_norm import build_mm_input_norm
"""

_BITWISE = """

def _first_difference(served, trained, what):
    differ = served.view(np.int32) != trained.view(np.int32)
    if differ.any():
        c, u = (int(i) for i in np.argwhere(differ.T)[0][::-1])
        raise AssertionError(
            f"{int(differ.sum())} of {differ.size} values differ from the checkpoint in FP32 ({what}; first level "
            f"{u} channel {c}: {float(served[c, u])!r} served, {float(trained[c, u])!r} trained)"
        )
"""

KIMI_TRAINED_LEVELS = '''

def _trained_levels():
    """The Kimi-K3 checkpoint's normalization (semantics §11.3, _normalize above) of every level: (3, 256)."""
    return _normalize(np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256)))[:, 0]
'''

C15_TEST = (
    _BITWISE
    + '''

def test_${cid}_the_served_normalization_is_the_checkpoints_in_fp32():
    """$served must give the float32 values the model was trained on, bit for bit, at every uint8 level of every
    channel (C15 in FP32; its BF16 half follows from this one)."""
    _first_difference(_served_levels(), _trained_levels(), "$family, $where")
'''
)

VLLM_C15_SERVED = """

def _served_levels():
    return _device_levels(torch.float32)
"""

SGLANG_QWEN_IMPORTS = """
import json
import math
import os
import tempfile

import numpy as np
from PIL import Image
from transformers import AutoImageProcessor

from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor  # noqa: F401 - the path under test
"""

SGLANG_QWEN_SERVED = (
    CONFIG_FOLDER
    + '''

def _served_levels():
    """What SGLang's Qwen path gives each level (3, 256): QwenVLImageProcessor.prepare_artifact_batch hands the
    images to the checkpoint's transformers image processor (AutoImageProcessor of its preprocessor_config.json,
    the transformers SGLang pins) with return_tensors="pt", on the CPU. One constant image per level: every value
    of a channel is that level's; the first patch row of each image is read (channel-major: C, T, p, p)."""
    processor = AutoImageProcessor.from_pretrained(_checkpoint_folder())
    side = FACTOR * math.ceil(math.sqrt(MIN_PIXELS) / FACTOR)
    images = [Image.new("RGB", (side, side), (u, u, u)) for u in range(256)]
    values = processor(images=images, return_tensors="pt")["pixel_values"].float().numpy()
    first = values[:: values.shape[0] // 256]
    return np.ascontiguousarray(first.reshape(256, 3, -1)[:, :, 0].T)
'''
)

VLLM_QWEN_HOST = (
    "\nfrom transformers import AutoImageProcessor\n",
    '''

def _host_levels():
    """vLLM's host-finished values (mm_device_do_normalize off): the transformers image processor vLLM builds for
    the checkpoint (AutoImageProcessor, the transformers the release pins) rescales and normalizes on the host
    (its rescale_and_normalize), float32 (3, 256)."""
    ip = AutoImageProcessor.from_pretrained(_checkpoint_folder())
    u = torch.arange(256, dtype=torch.uint8).repeat(3).reshape(1, 3, 1, 256)
    out = ip.rescale_and_normalize(u, ip.do_rescale, ip.rescale_factor, ip.do_normalize, ip.image_mean, ip.image_std)
    return out.float().numpy().reshape(3, 256)
''',
)

VLLM_KIMI_HOST = (
    "\nfrom $processor_module import $processor_class as ImageProcessor\n",
    '''

def _host_levels():
    """vLLM's host-finished values (mm_device_do_normalize off): its own Kimi-K3 image processor ($processor_class)
    built from the checkpoint's media_proc_cfg normalizes on the host through its table of the 256 levels
    (normalize_lut), float32 (3, 256)."""
    processor = ImageProcessor.from_dict(NORM_CONFIG)
    return np.ascontiguousarray(np.asarray(processor.normalize_lut, np.float32).T)
''',
)

C4_TEST = '''

def test_${cid}_device_finished_equals_host_finished_after_bf16():
    """vLLM's default path finishes the normalization on the device (FusedMMInputNorm); its host-finished path must
    give the tower the same BF16 values, at the level deferlab recorded (LEVEL), in every channel."""
    device = _device_levels(torch.bfloat16)[:, LEVEL]
    host = torch.from_numpy(np.ascontiguousarray(_host_levels()[:, LEVEL])).to(torch.bfloat16).float().numpy()
    assert (device.view(np.int32) == host.view(np.int32)).all(), (
        f"level {LEVEL}: device-finished {device.tolist()} != host-finished {host.tolist()} after BF16"
    )
'''

_CARD_GRID = '''

def _card_grid(width, height):
    """The model card's find_closest_aspect_ratio (semantics §18.4): the candidates (cols, rows) with
    MIN_NUM <= cols*rows <= MAX_NUM, built as a set and sorted by cols*rows; walking them, a strictly nearer
    w/h replaces the best, an equally near one only when width*height > 0.5 * TILE**2 * cols*rows."""
    ratios = sorted(
        {(i, j) for n in range(MIN_NUM, MAX_NUM + 1) for i in range(1, n + 1) for j in range(1, n + 1)
         if MIN_NUM <= i * j <= MAX_NUM},
        key=lambda r: r[0] * r[1],
    )
    aspect, best, best_diff = width / height, (1, 1), float("inf")
    for cols, rows in ratios:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * TILE * TILE * cols * rows:
            best = (cols, rows)
    return best


def _card_tiles(width, height):
    """The card's tile count: cols*rows, plus the thumbnail when USE_THUMBNAIL and more than one tile."""
    cols, rows = _card_grid(width, height)
    return cols * rows + (1 if USE_THUMBNAIL and cols * rows != 1 else 0)
'''

INTERNVL_C13_TEST = (
    _CARD_GRID
    + '''

def test_${cid}_the_served_tiling_is_the_cards():
    """The tiles served for an image of SIZE (width, height) must be the model card's (C13: the served grid and
    its prompt tokens, one token block per tile)."""
    served = _served_tiles(*SIZE)
    want = _card_tiles(*SIZE)
    assert served == want, (
        f"{SIZE[0]}x{SIZE[1]}: {served} tiles served, the card's {want} (grid {_card_grid(*SIZE)} cols x rows)"
    )
'''
)

SGLANG_INTERNVL_TILES = (
    "\nimport torch\n\nfrom sglang.srt.multimodal.processors.internvl import InternVLProcessor\n",
    '''

def _served_tiles(width, height):
    """SGLang's own tiling: InternVLProcessor.dynamic_preprocess, called as its request method calls it
    (image_size=TILE, max_num=MAX_NUM, use_thumbnail=True) on the normalized image tensor (3, height, width)."""
    tiles = InternVLProcessor.dynamic_preprocess(
        torch.zeros(3, height, width), image_size=TILE, max_num=MAX_NUM, use_thumbnail=USE_THUMBNAIL
    )
    return int(tiles.shape[0])
''',
)

VLLM_INTERNVL_TILES = (
    "\nfrom vllm.transformers_utils.processors.internvl import calculate_internvl_targets, "
    "get_internvl_target_ratios\n",
    '''

def _served_tiles(width, height):
    """vLLM's own tiling: calculate_internvl_targets with the ratios its InternVL processor resolves
    (get_internvl_target_ratios(MIN_NUM, MAX_NUM)), as get_num_image_tokens calls it."""
    blocks, _, _ = calculate_internvl_targets(
        orig_width=width, orig_height=height, target_ratios=get_internvl_target_ratios(MIN_NUM, MAX_NUM),
        image_size=TILE, use_thumbnail=USE_THUMBNAIL,
    )
    return int(blocks)
''',
)

QWEN_C13_IMPORTS = """
import math

from vllm.model_executor.models.qwen2_vl import smart_resize as served_smart_resize
"""

# The checkpoint processor's smart_resize as the family files state it (semantics §18.2): one text, every file
CARD_SMART_RESIZE = '''def _card_smart_resize(height, width):
    """transformers' smart_resize as the checkpoint's processor runs it (semantics §18.2): a side ratio over 200
    refused; both sides rounded to FACTOR (half to even); over MAX_PIXELS scaled down (floor), under MIN_PIXELS
    up (ceil)."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h, w = round(height / FACTOR) * FACTOR, round(width / FACTOR) * FACTOR
    if h * w > MAX_PIXELS:
        beta = math.sqrt((height * width) / MAX_PIXELS)
        h = max(FACTOR, math.floor(height / beta / FACTOR) * FACTOR)
        w = max(FACTOR, math.floor(width / beta / FACTOR) * FACTOR)
    elif h * w < MIN_PIXELS:
        beta = math.sqrt(MIN_PIXELS / (height * width))
        h, w = math.ceil(height * beta / FACTOR) * FACTOR, math.ceil(width * beta / FACTOR) * FACTOR
    return h, w
'''

QWEN_C13 = (
    """

"""
    + CARD_SMART_RESIZE
    + '''

def _served_smart_resize(height, width):
    """vLLM's _get_vision_info: smart_resize (imported by its Qwen path, from the transformers it pins) with the
    vision config's factor and the image processor's size."""
    return served_smart_resize(height=height, width=width, factor=FACTOR, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)


def _outcome(resize, width, height):
    try:
        return tuple(resize(height, width))
    except ValueError:
        return "refused"


def test_${cid}_the_served_resize_is_the_checkpoints():
    """The resize target (and so the grid and prompt tokens) served for an image of SIZE must be the checkpoint's."""
    served, want = _outcome(_served_smart_resize, *SIZE), _outcome(_card_smart_resize, *SIZE)
    assert served == want, f"{SIZE[0]}x{SIZE[1]}: served (height, width) {served}, the checkpoint's {want}"
'''
)

INTERNVL_C14 = '''

def _image():
    """An image of the recorded class and size (deferlab's own draw is not in the record): fixed random bytes
    from SEED, alpha strictly between 0 and 255 where the class has an alpha band."""
    rng = np.random.RandomState(SEED)
    height, width = SIZE[1], SIZE[0]
    if MODE == "RGBA":
        data = np.concatenate([rng.randint(0, 256, (height, width, 3)), rng.randint(1, 255, (height, width, 1))], 2)
    else:  # "LA"
        data = np.concatenate([rng.randint(0, 256, (height, width, 1)), rng.randint(1, 255, (height, width, 1))], 2)
    return Image.fromarray(data.astype(np.uint8), MODE)


def _card_levels(image):
    """The model card's load_image up to the levels (semantics §18.4): convert("RGB") (alpha dropped), the grid,
    image.resize((cols*SIZE, rows*SIZE)) (Pillow's default filter), crops row-major, the thumbnail
    image.resize((SIZE, SIZE)) when more than one tile: uint8 (tiles, 3, SIZE, SIZE)."""
    rgb = image.convert("RGB")
    cols, rows = _card_grid(*rgb.size)
    resized = rgb.resize((cols * TILE, rows * TILE))
    tiles = [resized.crop((c * TILE, r * TILE, (c + 1) * TILE, (r + 1) * TILE)) for r in range(rows) for c in range(cols)]
    if USE_THUMBNAIL and len(tiles) != 1:
        tiles.append(rgb.resize((TILE, TILE)))
    return np.stack([np.asarray(t) for t in tiles]).transpose(0, 3, 1, 2).astype(np.int16)


def _served_levels(image):
    """What vLLM feeds the tower: its request parser (MultiModalDataParser, which composites transparency onto
    white), then its own InternVLChatImageProcessor (the card's tiling, torchvision's ToTensor and Normalize with
    ImageNet's statistics); each value read back as the level it normalizes."""
    parsed = MultiModalDataParser()._parse_image_data([image]).get(0)
    processor = InternVLChatImageProcessor(
        image_size=TILE, min_dynamic_patch=MIN_NUM, max_dynamic_patch=MAX_NUM, dynamic_image_size=True,
        use_thumbnail=USE_THUMBNAIL,
    )
    values = processor(images=[parsed], return_tensors="pt")["pixel_values_flat"].double().numpy()
    mean, std = np.asarray(MEAN).reshape(1, 3, 1, 1), np.asarray(STD).reshape(1, 3, 1, 1)
    return np.rint((values * std + mean) * 255).astype(np.int16)


def test_${cid}_the_served_pixels_are_the_cards():
    """Every served value must be the card's level, at most one level off (C14's part (a); the float ulps are
    C15's)."""
    image = _image()
    served, trained = _served_levels(image), _card_levels(image)
    assert served.shape == trained.shape, f"{served.shape} served, the card's {trained.shape}"
    _at_most_one_level_off(served, trained, "card's", "tile")
'''

INTERNVL_C14_IMPORTS = """
import numpy as np
from PIL import Image

from vllm.multimodal.parse import MultiModalDataParser
from vllm.transformers_utils.processors.internvl import InternVLChatImageProcessor
"""
