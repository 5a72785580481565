"""The reproducer templates: per claim and engine, a standalone pytest test calling the engine's own functions.

Why templates and not generated code: a reproducer goes to an upstream
maintainer, so it must be short, read as a test they would write, and import
nothing of deferlab. Each template is plain text with ``$placeholders``
(`string.Template`), filled from the claim's recorded minimal counterexample
by its ``fit`` function; ``fit`` returns None when the counterexample or the
recorded failure is not the one the template reproduces (then no file is
written, and the caller says so). Nothing here is an engine's code: a
template only *calls* it, the way the engine's own unit tests build its
objects (``object.__new__`` and the few attributes a method reads). SGLang's
C9 template is `reports.repro.ipc`'s; the served-vs-trained ones (C13, C14,
vLLM's C15) are `reports.repro.served`'s; `templates` gives an engine's set.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from string import Template
from typing import Any

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


@dataclass(frozen=True)
class Template_:
    """A claim's template: ``fit(counterexample, failure, row)`` gives the placeholders (None: does not apply);
    ``row`` is the whole verdict row (its provenance says, e.g., which image processor vLLM served with)."""

    text: str
    fit: Callable[..., dict[str, Any] | None]
    what: str  # the flaw it reproduces, for the header


def _literal(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def _ints(text: str, names: tuple[str, ...]) -> dict[str, int | None] | None:
    out: dict[str, int | None] = {}
    for name in names:
        m = re.search(rf"\b{name}=(\d+|None)\b", text)
        if m is None:
            return None
        out[name] = None if m.group(1) == "None" else int(m.group(1))
    return out


GEOMETRY = ("patch_size", "merge_kernel_size", "in_patch_limit", "patch_limit_on_one_side", "fixed_output_tokens")
K3_GEOMETRY = {"patch_size": 14, "merge_kernel_size": 2, "in_patch_limit": 16384, "patch_limit_on_one_side": 512,
               "fixed_output_tokens": None}  # fmt: skip


def fit_c3(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    stats = _literal(ce)
    if "levels differ in FP32" not in failure or not (isinstance(stats, list | tuple) and len(stats) == 2):
        return None
    mean, std = (tuple(float(v) for v in part) for part in stats)
    return {"mean": repr(mean), "std": repr(std)}


def fit_c15(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """C15's counterexample is the (mean, std) pair whose levels differ; only the FP32 difference is reproduced
    (a difference after the BF16 cast reads the same in this test, which compares FP32)."""
    stats = _literal(ce)
    if "levels differ from the checkpoint in FP32" not in failure or not (
        isinstance(stats, list | tuple) and len(stats) == 2
    ):
        return None
    mean, std = (tuple(float(v) for v in part) for part in stats)
    return {"mean": repr(mean), "std": repr(std)}


def fit_c10(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    if "call site 'request'" not in failure or not isinstance(ce, list) or len(ce) not in (2, 3):
        return None
    if len(ce) == 3 and ce[2] != "request":  # a counterexample that names its call site: only the request path's
        return None
    geometry, shapes = _ints(str(ce[0]), GEOMETRY), ce[1]
    if geometry is None or not all(isinstance(s, list | tuple) and len(s) == 3 for s in shapes):
        return None
    return {"geometry": repr(geometry), "shapes": repr([tuple(int(v) for v in s) for s in shapes])}


def fit_c11(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    m = re.fullmatch(r"ArrayImage\(torch \(([\d, ]+)\) torch\.uint8, layout=(\w+), w=(\d+), h=(\d+), c=\d+\)", str(ce))
    if m is None or not failure.startswith(("IndexError", "RuntimeError", "AssertionError")):
        return None
    shape = tuple(int(v) for v in m.group(1).replace(" ", "").split(",") if v)
    return {"geometry": repr(K3_GEOMETRY), "shape": repr(shape), "layout": m.group(2), "width": m.group(3),
            "height": m.group(4)}  # fmt: skip


_PIL = re.compile(
    r"PIL\.Image\(mode='([^']+)', size=\((\d+), (\d+)\), info=(\{.*?\}), data=bytes\.fromhex\('([0-9a-f]*)'\)"
    r"(?:, palette=bytes\.fromhex\('([0-9a-f]*)'\))?\)"
)


def fit_c12(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    if "fully transparent pixel is not background" not in failure or not isinstance(ce, list) or len(ce) != 2:
        return None
    m = _PIL.fullmatch(str(ce[0]))
    bg = re.fullmatch(r"BackgroundConfig\((.*)\)", str(ce[1]))
    if m is None or bg is None or _literal(m.group(4)):  # an image with info (a key) needs more than frombytes
        return None
    fields = dict(re.findall(r"(\w+)=('[^']*'|\w+)", bg.group(1)))
    background = {
        "pattern": _literal(fields["pattern"]),
        "chessboard_square_size": int(fields["square_size"]),
        "chessboard_white_value": int(fields["white_value"]),
        "chessboard_gray_value": int(fields["gray_value"]),
        "chessboard_square_on_top_left": fields["square_on_top_left"] == "True",
    }
    palette = f"bytes.fromhex({m.group(6)!r})" if m.group(6) is not None else "None"
    return {"mode": repr(m.group(1)), "size": repr((int(m.group(2)), int(m.group(3)))),
            "data": f"bytes.fromhex({m.group(5)!r})", "palette": palette, "background": repr(background)}  # fmt: skip


def _sizes(text: str) -> list[tuple[int, int]]:
    """(width, height) of every image in a counterexample: PIL sizes, CHW tensor shapes, in order."""
    found = re.finditer(r"size=\((\d+), (\d+)\)|shape=\(\d+, (\d+), (\d+)\)", text)
    return [(int(m[1]), int(m[2])) if m[1] else (int(m[4]), int(m[3])) for m in found]


def fit_owner_grid(ce: Any, failure: str, row: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    if "produced wrong grids" not in failure:
        return None
    text = str(ce)
    sizes = _sizes(text)
    if len(sizes) < 2:
        return None
    geometry = _ints(text, GEOMETRY) or {**K3_GEOMETRY, "patch_size": 1, "merge_kernel_size": 1}
    last = ce[-1] if isinstance(ce, list) and ce else None  # an owner partition, where the claim drew one
    owners = [o for o in last if isinstance(o, list)] if isinstance(last, list) else []
    owner = next((o for o in owners if o and o != list(range(len(o)))), [len(sizes) - 1])
    return {"geometry": repr(geometry), "sizes": repr(sizes), "owner": repr(owner)}


TEMPLATES: dict[str, Template_] = {
    "C3": Template_(C3, fit_c3, "scale/bias normalization differs from the eager formula in FP32"),
    "C10": Template_(C10, fit_c10, "the request path decides for all of a request's images at once"),
    "C11": Template_(C11, fit_c11, "the gate admits a raw array it cannot measure"),
    "C12": Template_(C12, fit_c12, "a fully transparent pixel does not end on the background"),
    "C15": Template_(C15, fit_c15, "the served normalization differs from the checkpoint's float32 values"),
    **{
        cid: Template_(OWNER_GRID, fit_owner_grid, "an owner whose images are not 0..k-1 fails its grid check")
        for cid in ("C4", "C5", "C6", "C7")
    },
}
ENGINES = ("sglang", "vllm")


@functools.cache
def templates(engine: str) -> dict[str, Template_]:
    """Claim -> template for ``engine`` (SGLang's: `TEMPLATES` plus C9, C13, C14; vLLM's: C13, C14, C15)."""
    from deferlab.reports.repro import ipc as repro_ipc
    from deferlab.reports.repro import served as repro_served

    served = "the served pixels of an image are more than one level off the checkpoint processor's"
    geometry = "the served resize target, padding or prompt tokens differ from the checkpoint's"
    if engine == "sglang":
        return {
            **TEMPLATES,
            "C9": Template_(
                repro_ipc.C9,
                repro_ipc.fit_c9,
                "a CUDA IPC feature-pool slot never frees once every rank is done (acknowledgement counts)",
            ),
            "C13": Template_(repro_served.C13, repro_served.fit_c13, geometry),
            "C14": Template_(repro_served.C14, repro_served.fit_c14, served),
        }
    if engine == "vllm":
        return {
            "C13": Template_(repro_served.C13, functools.partial(repro_served.fit_c13, engine="vllm"), geometry),
            "C14": Template_(repro_served.C14, functools.partial(repro_served.fit_c14, engine="vllm"), served),
            "C15": Template_(repro_served.VLLM_C15, repro_served.fit_vllm_c15, TEMPLATES["C15"].what),
        }
    raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")


def render(
    cid: str, counterexample: Any, failure: str, *, engine: str = "sglang", row: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """(the test's code, what it reproduces) for claim ``cid`` on ``engine``, or None when no template fits."""
    template = templates(engine).get(cid)
    values = template.fit(counterexample, failure, row or {}) if template else None
    if template is None or values is None:
        return None
    return Template(template.text).substitute(values, cid=cid.lower()).lstrip("\n"), template.what
