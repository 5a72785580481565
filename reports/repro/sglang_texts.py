"""SGLang's reproducer texts (C3, C10, C11, C12, C15 and the owner grid check of C4-C7): standalone pytest code
with ``$placeholders`` that `reports.repro.templates` fills from a recorded counterexample.

Why apart from the fitting: these are the files an upstream maintainer reads, kept as they will read them;
the code that decides whether a counterexample fits one, and with which values, is `reports.repro.templates`.
"""

_GATE_PROCESSOR = '''
def _processor(**geometry):
    """A KimiK3ImageProcessor as SGLang's tests build one: object.__new__ and the attributes the gate reads."""
    proc = object.__new__(kimi_k3.KimiK3ImageProcessor)
    proc.mm_feature_transport = "cpu"  # the deferred path exists only under CPU transport
    proc._processor = types.SimpleNamespace(preprocess_config=types.SimpleNamespace(**geometry))
    return proc
'''

C3 = '''
import torch

from sglang.srt.multimodal.kimi_k3_image_processing import normalization_tensors
from sglang.srt.multimodal.processors.kimi_k25 import normalize_and_patchify

MEAN = $mean
STD = $std


def test_${cid}_scale_bias_equals_the_eager_formula_in_fp32():
    """x * scale + bias (normalization_tensors) must equal (x / 255 - mean) / std bit for bit at every level."""
    levels = torch.arange(256, dtype=torch.float32).repeat(3, 1).reshape(1, 3, 16, 16)  # every uint8 level
    scale, bias = normalization_tensors(list(MEAN), list(STD), "cpu")
    got = normalize_and_patchify(levels, scale, bias, 16, 16, 16)[0][0]  # one 16x16 patch: (3, 16, 16)
    mean = torch.tensor(MEAN, dtype=torch.float32).view(3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float32).view(3, 1, 1)
    eager = (levels[0] / 255.0 - mean) / std  # the eager formula, every op in float32
    differ = int((got.view(torch.int32) != eager.view(torch.int32)).any(dim=0).sum())
    assert differ == 0, f"{differ} of 256 levels differ in FP32 (mean {MEAN}, std {STD})"
'''

C15 = '''
import numpy as np
import torch

from sglang.srt.multimodal.kimi_k3_image_processing import normalization_tensors
from sglang.srt.multimodal.processors.kimi_k25 import normalize_and_patchify

MEAN = $mean
STD = $std


def _checkpoint(levels):
    """What the checkpoint's own image processor feeds the vision tower for uint8 ``levels`` (3, H, W): x / 255
    in float64 stored as float32, then x -= mean and x *= 1 / std with float64 mean and 1 / std arrays, each
    result stored back into the float32 x."""
    x = (levels.astype(np.float64) / 255.0).astype(np.float32)
    x = (x - np.asarray(MEAN, dtype=np.float64).reshape(3, 1, 1)).astype(np.float32)
    return (x * (1.0 / np.asarray(STD, dtype=np.float64)).reshape(3, 1, 1)).astype(np.float32)


def test_${cid}_the_served_values_are_the_checkpoints_in_fp32():
    """SGLang's normalization (normalization_tensors, normalize_and_patchify) must give the float32 values the
    model was trained on, bit for bit, at every uint8 level of every channel."""
    levels = np.tile(np.arange(256, dtype=np.uint8), (3, 1)).reshape(3, 16, 16)  # every uint8 level
    scale, bias = normalization_tensors(list(MEAN), list(STD), "cpu")
    pixels = torch.from_numpy(levels.astype(np.float32)).unsqueeze(0)
    served = normalize_and_patchify(pixels, scale, bias, 16, 16, 16)[0][0].numpy()  # one 16x16 patch: (3, 16, 16)
    trained = _checkpoint(levels)
    differ = int((served.view(np.int32) != trained.view(np.int32)).any(axis=0).sum())
    assert differ == 0, f"{differ} of 256 levels differ from the checkpoint in FP32 (mean {MEAN}, std {STD})"
'''

C10 = (
    """
import types

import torch

import sglang.srt.multimodal.processors.kimi_k3 as kimi_k3

GEOMETRY = $geometry
SHAPES = $shapes  # (channels, width, height) of the request's images
"""
    + _GATE_PROCESSOR
    + '''

def _image(channels, width, height):
    """A CHW uint8 tensor of that size allocating one byte (the gate reads only shape and dtype)."""
    return torch.zeros((1, 1, 1), dtype=torch.uint8).expand(channels, height, width)


def test_${cid}_an_image_is_deferred_iff_it_alone_would_be(monkeypatch):
    """The request path (KimiK3ImageProcessor._process_mm_data_uncached) asks the gate once for all of a
    request's images; each image's decision must still be the one it gets alone."""
    monkeypatch.setattr(kimi_k3, "is_cuda", lambda: True)  # the gate defers only on a CUDA server
    proc = _processor(**GEOMETRY)
    images = [_image(*shape) for shape in SHAPES]
    together = [proc._should_defer_gpu_preprocessing(images)] * len(images)
    alone = [proc._should_defer_gpu_preprocessing([image]) for image in images]
    assert together == alone, f"in the request {together}, alone {alone}"
'''
)

C11 = (
    """
import types

import torch

import sglang.srt.multimodal.processors.kimi_k3 as kimi_k3
from sglang.srt.multimodal.kimi_k3_image_processing import to_chw_uint8

GEOMETRY = $geometry
SHAPE = $shape  # a raw uint8 array as a client may send it ($layout: width $width, height $height)
"""
    + _GATE_PROCESSOR
    + '''

def test_${cid}_the_gate_measures_or_refuses_what_it_admits(monkeypatch):
    """The gate admits any uint8 tensor; it must decide (and then stage the true size) or refuse it clearly."""
    monkeypatch.setattr(kimi_k3, "is_cuda", lambda: True)  # the gate defers only on a CUDA server
    image = torch.zeros(SHAPE, dtype=torch.uint8)
    try:
        defer = _processor(**GEOMETRY)._should_defer_gpu_preprocessing([image])
    except (ValueError, TypeError):
        return  # a clear refusal of the input is fine
    assert isinstance(defer, bool)
    if defer:
        staged = to_chw_uint8(image)
        assert tuple(staged.shape[1:]) == ($height, $width), f"staged {tuple(staged.shape)}"
'''
)

C12 = '''
import numpy as np
import torch
from PIL import Image

from sglang.srt.multimodal.kimi_k3_image_processing import fill_transparent_bg, to_chw_uint8

MODE, SIZE, DATA, PALETTE = $mode, $size, $data, $palette
BACKGROUND = $background  # the checkpoint's transparent_bg_config


def _background(height, width):
    """The background level of each pixel for BACKGROUND (white, black, gray or a chessboard)."""
    bg = BACKGROUND
    if bg["pattern"] != "chessboard":
        return np.full((height, width), {"white": 255, "black": 0, "gray": 128}[bg["pattern"]], dtype=np.float32)
    y, x = np.mgrid[0:height, 0:width]
    gray = (y // bg["chessboard_square_size"] + x // bg["chessboard_square_size"]) % 2 == (
        1 if bg["chessboard_square_on_top_left"] else 0
    )
    return np.where(gray, bg["chessboard_gray_value"], bg["chessboard_white_value"]).astype(np.float32)


def test_${cid}_fully_transparent_pixels_end_on_the_background():
    """Staging (to_chw_uint8) then compositing (fill_transparent_bg) must put every pixel whose alpha is 0
    (as Pillow reads the image) on the background."""
    image = Image.frombytes(MODE, SIZE, DATA)
    if PALETTE is not None:
        image.putpalette(PALETTE)
    alpha = np.asarray(image.convert("RGBA"))[..., 3]
    x = to_chw_uint8(image, device="cpu").to(torch.float32).unsqueeze(0)
    got = fill_transparent_bg(x, BACKGROUND)[0].numpy()  # (3, H, W)
    clear = alpha == 0
    assert clear.any()
    want = _background(*alpha.shape)
    assert (got[:, clear] == want[clear]).all(), f"{MODE}: transparent pixels became {got[:, clear].T.tolist()}"
'''

OWNER_GRID = '''
import types

import torch

import sglang.srt.models.kimi_k3 as kimi_k3_model
import sglang.srt.multimodal.mm_utils as mm_utils
from sglang.srt.managers.schedule_batch import Modality, MultimodalDataItem
from sglang.srt.multimodal.kimi_k3_image_processing import DEFERRED_PREPROCESSING_KEY, KimiK3DeferredPreprocessing
from sglang.srt.multimodal.processors.kimi_k25 import _grid_thw_from_resize_config, navit_resize_config

GEOMETRY = $geometry
SIZES = $sizes  # (width, height) of the request's images, all deferred
OWNER = $owner  # the images one vision-DP owner materializes: not 0..k-1


def _item(width, height):
    """A deferred item as the producer makes it: raw CHW uint8 pixels and the owner's parameters."""
    rc = navit_resize_config(width, height, **GEOMETRY)
    grid = _grid_thw_from_resize_config(rc, GEOMETRY["patch_size"])
    config = KimiK3DeferredPreprocessing("gpu", [0.5] * 3, [0.5] * 3, None, rc)
    return MultimodalDataItem(
        modality=Modality.IMAGE,
        feature=torch.zeros((3, height, width), dtype=torch.uint8),
        model_specific_data={"image_grid_thw": torch.tensor([grid]), DEFERRED_PREPROCESSING_KEY: config},
    )


def _owner_loader(items, monkeypatch):
    """The loader get_image_feature hands the DP runner, captured as SGLang's consumer tests capture it."""
    model = object.__new__(kimi_k3_model.KimiK3ForConditionalGeneration)
    torch.nn.Module.__init__(model)
    proj = types.SimpleNamespace(weight=torch.empty(0, dtype=torch.bfloat16))
    model.vision_tower = types.SimpleNamespace(
        device=torch.device("cpu"), patch_size=GEOMETRY["patch_size"], patch_embed=types.SimpleNamespace(proj=proj)
    )
    model.use_data_parallel, model.mm_projector, model._encoder_image_processor = True, (lambda x: x), None
    seen = {}
    monkeypatch.setattr(mm_utils, "run_dp_sharded_mrope_vision_model", lambda *a, **kw: seen.update(kw))
    parallel = types.SimpleNamespace(tp_size=1, attn_tp_size=1, tp_rank=0, attn_tp_rank=0)
    monkeypatch.setattr(kimi_k3_model, "get_parallel", lambda: parallel, raising=False)
    monkeypatch.setattr(kimi_k3_model, "configured_tp_size", lambda: 1, raising=False)
    model.get_image_feature(items)
    return seen["load_local_pixel_values"]


def test_${cid}_an_owner_materializes_any_subset_of_the_images(monkeypatch):
    """Each vision-DP owner materializes its own images, whatever their positions in the request."""
    items = [_item(w, h) for w, h in SIZES]
    features = _owner_loader(items, monkeypatch)(list(OWNER))
    patches = sum(int(items[i].model_specific_data["image_grid_thw"].prod()) for i in OWNER)
    assert features.shape[0] == patches, f"owner of images {OWNER}: {tuple(features.shape)}, {patches} patches"
'''
