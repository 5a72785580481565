"""The transformers families' normalization of each level (`reference.oracle.family_norm`, semantics §18.1).

Hand values first (exact binary fractions, or a float32 expression written out), then every family's profile
bitwise against the rescale and normalize of the processor class its config names, run for real."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from deferlab.reference.oracle import family_norm as fn
from deferlab.reference.oracle import internvl
from deferlab.reference.system.errors import InputTypeError
from deferlab.reference.system.family_configs import (
    CLIP_MEAN,
    CLIP_STD,
    HALF,
    PROFILES,
    NormConfig,
    base_class,
    norm_of,
    processor_class,
    published_config,
)

F32 = np.float32


def bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def test_half_stats_by_hand() -> None:
    t = fn.checkpoint_levels(NormConfig(HALF, HALF))
    assert t.shape == (256, 3) and t.dtype == np.float32
    assert (t[0] == -1.0).all() and (t[255] == 1.0).all()
    # level 127: f32(127 * f64(1/255)) = 0.49803922 (float32); minus 0.5 is exact, divided by 0.5 doubles it
    x127 = F32(0.4980392158031463623046875)
    assert F32(127 * (1 / 255)) == x127
    assert (bits(t[127]) == bits(F32(2) * x127 - F32(1))).all() and t[127, 0] == F32(-0.0039215684)
    assert (t[128] == F32(2) * F32(128 * (1 / 255)) - F32(1)).all()


def test_clip_level_zero_is_minus_mean_over_std_in_float32() -> None:
    t = fn.checkpoint_levels(NormConfig(CLIP_MEAN, CLIP_STD))
    expected = [F32(-F32(m)) / F32(s) for m, s in zip(CLIP_MEAN, CLIP_STD, strict=True)]  # 0.0 - m is exact
    assert (bits(t[0]) == bits(np.array(expected, dtype=np.float32))).all()
    assert t[0, 0] == F32(-1.7922626) and t[255, 2] == F32(2.145897)


def test_gemma4_rescales_only() -> None:
    cfg = NormConfig((0.0,) * 3, (1.0,) * 3, do_normalize=False)
    t = fn.checkpoint_levels(cfg)
    assert t[255, 0] == 1.0 and t[0, 0] == 0.0 and t[51, 1] == F32(0.2)  # 51/255 = 0.2 exactly before the cast
    assert (t[:, 0] == t[:, 2]).all()
    assert (t[:, 0] == (np.arange(256) * (1 / 255)).astype(np.float32)).all()


def test_no_rescale_normalizes_levels_and_neither_casts() -> None:
    t = fn.checkpoint_levels(NormConfig(HALF, HALF, do_rescale=False))
    assert t[255, 0] == 509.0 and t[0, 0] == -1.0 and t[1, 1] == 1.0
    raw = fn.checkpoint_levels(NormConfig(HALF, HALF, do_rescale=False, do_normalize=False))
    assert (raw == np.arange(256, dtype=np.float32)[:, None]).all() and raw.dtype == np.float32


def test_channels_follow_the_mean() -> None:
    one = NormConfig((0.25,), (0.5,))
    assert one.channels == 1 and fn.checkpoint_levels(one).shape == (256, 1)
    assert fn.checkpoint_levels(one)[255, 0] == 1.5


def test_bf16_rounds_level_127_down_one_step() -> None:
    t = fn.bf16(fn.checkpoint_levels(NormConfig(HALF, HALF)))
    assert t.dtype == np.float32 and t[127, 0] == -0.003936767578125 and t[255, 0] == 1.0
    assert (bits(t) & 0xFFFF == 0).all()  # BF16 values: the low half of every float32 pattern is zero


def test_refuses_another_config_type() -> None:
    with pytest.raises(InputTypeError, match="cfg must be a NormConfig"):
        fn.checkpoint_levels({"image_mean": HALF})


# Each class a profile names -> the module of its PIL backend in transformers 5.24.0.
PIL_MODULES = {
    "Qwen2VLImageProcessor": "qwen2_vl.image_processing_pil_qwen2_vl",
    "Glm4vImageProcessor": "glm4v.image_processing_pil_glm4v",
    "PixtralImageProcessor": "pixtral.image_processing_pil_pixtral",
    "Gemma3ImageProcessor": "gemma3.image_processing_pil_gemma3",
    "Gemma4ImageProcessor": "gemma4.image_processing_pil_gemma4",
    "GotOcr2ImageProcessor": "got_ocr2.image_processing_pil_got_ocr2",
    "PaddleOCRVLImageProcessor": "paddleocr_vl.image_processing_pil_paddleocr_vl",
    "MiniCPMV4_6ImageProcessor": "minicpmv4_6.image_processing_pil_minicpmv4_6",
    "Ernie4_5_VLMoeImageProcessor": "ernie4_5_vl_moe.image_processing_pil_ernie4_5_vl_moe",
}


def pil_processor(name: str, cfg: dict):
    module = importlib.import_module(f"transformers.models.{PIL_MODULES[name]}")
    return getattr(module, f"{name}Pil").from_dict(cfg)


def transformers_table(processor) -> np.ndarray:
    """Every level through the processor's own rescale and normalize, as its _preprocess calls them."""
    image = np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256)).copy()  # (C, H, W)
    if processor.do_rescale:
        image = processor.rescale(image, processor.rescale_factor)
    if processor.do_normalize:
        image = processor.normalize(image, processor.image_mean, processor.image_std)
    return np.asarray(image, dtype=np.float32)[:, 0, :].T


# The families whose checkpoints preprocess with their own code, ToTensor then Normalize (semantics §18.9).
TORCHVISION_ORDER = ("nemotron-vl", "nemotron-parse", "nano-nemotron-vl", "step3-vl")
# A family whose published config names its architecture, with the transformers class its statistics are (§18.9).
PROCESSOR_OF = {"mimo-v2.5": "Qwen2VLImageProcessor"}


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("name", [n for n in PROFILES if n not in ("internvl", *TORCHVISION_ORDER)])
def test_every_profile_matches_transformers_bitwise(name: str) -> None:
    cfg = published_config(name)
    processor = pil_processor(PROCESSOR_OF.get(name) or base_class(processor_class(cfg)), cfg)
    ours = fn.checkpoint_levels(norm_of(PROFILES[name][0]))
    theirs = transformers_table(processor)
    assert theirs.dtype == np.float32 and (bits(ours) == bits(theirs)).all()
    assert (bits(fn.bf16(ours)) == bits(fn.bf16(theirs))).all()


@pytest.mark.extra("transformers")
def test_internvl_card_table_equals_got_ocr2_with_imagenet_stats() -> None:
    """The card's ToTensor order (f32(u)/255 in float32) and transformers' rescale (f32(f64(u) * (1/255)))
    agree at every level, so InternVL-hf's processor normalizes as the card does (semantics §18.3)."""
    cfg = PROFILES["internvl"][0]
    got = pil_processor("GotOcr2ImageProcessor", {"image_mean": list(cfg.image_mean), "image_std": list(cfg.image_std)})
    card = internvl.normalize_levels(cfg)
    assert (bits(card) == bits(transformers_table(got))).all()
    assert (bits(card) == bits(fn.checkpoint_levels(norm_of(cfg)))).all()


@pytest.mark.parametrize("name", TORCHVISION_ORDER)
def test_the_remote_code_order_equals_the_table(name: str) -> None:
    """ToTensor's float32 ``div(255)`` then Normalize's float32 ``sub(mean)``, ``div(std)`` (torch's operations, as
    torchvision runs them) give the trained table bitwise at every level, so §18.1's table is these families'."""
    torch = pytest.importorskip("torch")
    cfg = norm_of(PROFILES[name][0])
    u = torch.arange(256, dtype=torch.uint8).reshape(1, 256).expand(3, 256)
    x = u.to(torch.float32).div(255)
    x = x.sub(torch.tensor(cfg.image_mean, dtype=torch.float32)[:, None])
    x = x.div(torch.tensor(cfg.image_std, dtype=torch.float32)[:, None])
    assert (bits(x.T.numpy()) == bits(fn.checkpoint_levels(cfg))).all()
