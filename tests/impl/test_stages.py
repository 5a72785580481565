"""impl's pipeline steps one by one: staging, resize, compositing, normalization, patchify (semantics §3.1-§3.5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from PIL import Image

from deferlab.impl.background import fill_transparent_bg
from deferlab.impl.normalize import normalization_tensors, normalize_and_patchify, patchify
from deferlab.impl.resize import resize_bicubic_if_needed, resize_sub_batch
from deferlab.impl.staging import image_dimensions, raw_channels, to_chw_uint8, to_eager_chw
from tests.impl.support import BACKGROUNDS, chw_tensors, reference_module

# --- staging (semantics §3.1) -------------------------------------------------------------------------


def _pil(mode: str, h: int = 5, w: int = 7, **info: object) -> Image.Image:
    rng = np.random.default_rng(0)
    if mode == "P":
        img = Image.fromarray(rng.integers(0, 4, size=(h, w), dtype=np.uint8), "P")
        img.putpalette(list(range(12)))
    elif mode == "L":
        img = Image.fromarray(rng.integers(0, 256, size=(h, w), dtype=np.uint8), "L")
    else:
        img = Image.fromarray(rng.integers(0, 256, size=(h, w, len(mode)), dtype=np.uint8), mode)
    img.info.update(info)
    return img


@pytest.mark.parametrize(
    ("mode", "info", "channels"),
    [
        ("RGB", {}, 3),
        ("RGB", {"transparency": (1, 2, 3)}, 3),  # a stray key never promotes RGB (the PR aligned both paths)
        ("RGBA", {}, 4),
        ("L", {}, 3),
        ("L", {"transparency": 7}, 4),
        ("LA", {}, 4),
        ("P", {}, 3),
        ("P", {"transparency": 0}, 4),
    ],
)
def test_pil_staging_channels(mode: str, info: dict, channels: int) -> None:
    """A PIL image stages to 4 channels iff it has alpha by semantics §3.1's predicate, else 3, in CHW order."""
    img = _pil(mode, **info)
    x = to_chw_uint8(img)
    assert x.dtype == torch.uint8 and tuple(x.shape) == (channels, 5, 7)
    assert raw_channels(img) == channels
    want = np.asarray(img.convert("RGBA" if channels == 4 else "RGB")).transpose(2, 0, 1)
    assert np.array_equal(x.numpy(), want)


def test_pre_pr_promotes_rgb_transparency() -> None:
    """Before the PR the eager stager promoted RGB + transparency to RGBA, keying out the colour."""
    img = Image.fromarray(np.array([[[1, 2, 3], [9, 9, 9]]], dtype=np.uint8), "RGB")
    img.info["transparency"] = (1, 2, 3)
    x = to_eager_chw(img, promote_rgb_transparency=True)
    assert tuple(x.shape) == (4, 1, 2) and x[3].tolist() == [[0, 255]]


def test_tensor_staging_rules() -> None:
    """uint8 tensors: 2-D -> (3, H, W) by repetition, 1 channel repeated, other channel counts kept unchecked."""
    g = torch.arange(6, dtype=torch.uint8).view(2, 3)
    assert torch.equal(to_chw_uint8(g), g.expand(3, 2, 3))
    assert torch.equal(to_chw_uint8(g[None]), g.expand(3, 2, 3))
    five = torch.zeros(5, 2, 3, dtype=torch.uint8)
    assert tuple(to_chw_uint8(five).shape) == (5, 2, 3)
    with pytest.raises(ValueError, match="expects raw uint8 pixels"):
        to_chw_uint8(torch.zeros(3, 2, 2))


def test_eager_stager_accepts_float_tensor() -> None:
    """SGLang test_kimi_k3_eager_preprocessing_preserves_float_tensor_support: float32 (1,4,4) -> float32 (3,4,4)."""
    x = to_eager_chw(torch.rand(1, 4, 4))
    assert x.dtype == torch.float32 and tuple(x.shape) == (3, 4, 4)


def test_dimensions_read_tensor_as_chw() -> None:
    """Tensor width = shape[2], height = shape[1]; a 2-D tensor raises IndexError (semantics §4.1 caveat)."""
    assert image_dimensions(torch.zeros(3, 5, 7, dtype=torch.uint8)) == (7, 5)
    assert image_dimensions(torch.zeros(5, 7, 3, dtype=torch.uint8)) == (3, 7)  # HWC misread
    with pytest.raises(IndexError):
        image_dimensions(torch.zeros(5, 7, dtype=torch.uint8))


# --- resize (semantics §3.3) --------------------------------------------------------------------------


def test_resize_noop_is_a_dtype_cast(device: str) -> None:
    """SGLang test_kimi_resize_is_a_dtype_only_cast_when_already_at_target: (1,3,16,12) at 16x12."""
    x = torch.randint(0, 256, (1, 3, 16, 12), dtype=torch.uint8, device=device)
    out = resize_bicubic_if_needed(x, 16, 12)
    assert out.dtype == torch.float32 and torch.equal(out, x.float())


@given(st.integers(0, 255), st.integers(2, 40), st.integers(2, 40), st.integers(1, 40), st.integers(1, 40))
def test_resize_constant_stays_constant(level: int, h: int, w: int, oh: int, ow: int) -> None:
    """Weights are normalized per output pixel, so a constant image resizes to the same constant."""
    x = torch.full((1, 3, h, w), float(level))
    assert torch.equal(resize_bicubic_if_needed(x, oh, ow), torch.full((1, 3, oh, ow), float(level)))


@given(chw_tensors(channels=(3, 4)), st.integers(1, 30), st.integers(1, 30))
def test_resize_output_is_integer_levels(x: torch.Tensor, oh: int, ow: int) -> None:
    """The resized values are integer levels in [0, 255] (round half even, then clamp)."""
    out = resize_bicubic_if_needed(x[None], oh, ow)
    assert out.dtype == torch.float32 and tuple(out.shape) == (1, x.shape[0], oh, ow)
    assert torch.equal(out, out.round()) and out.min() >= 0 and out.max() <= 255


def test_batched_resize_equals_per_image(device: str) -> None:
    """SGLang's batching test shapes: a same-shape batch resizes bitwise like each image alone (semantics §14.6)."""
    gen = torch.Generator().manual_seed(1)
    imgs = [torch.randint(0, 256, (3, 32, 24), dtype=torch.uint8, generator=gen).to(device) for _ in range(2)]
    batch = resize_sub_batch(imgs, 16, 12)
    for k, img in enumerate(imgs):
        assert torch.equal(batch[k : k + 1], resize_sub_batch([img], 16, 12))


@given(chw_tensors(channels=(3, 4), max_side=24), st.integers(1, 20), st.integers(1, 20))
@example(torch.tensor([[[95], [130]], [[194], [217]], [[207], [235]]], dtype=torch.uint8), 3, 1)
@example(
    torch.tensor([[[95, 130], [194, 217]], [[207, 235], [15, 163]], [[33, 215], [217, 130]]], dtype=torch.uint8), 3, 1
)
def test_resize_matches_reference(x: torch.Tensor, oh: int, ow: int) -> None:
    """torch aa bicubic equals the NumPy oracle, except elements the oracle classifies as rounding ties."""
    resample = reference_module("resample")
    got = resize_bicubic_if_needed(x[None], oh, ow)[0].numpy()
    ref = resample.resize_bicubic_aa(x.numpy().astype(np.float32), oh, ow)
    explained = resample.classify_disagreement(ref, got)
    assert explained.all(), np.argwhere(~explained)[:5]


def test_resize_on_device_matches_reference(device: str) -> None:
    """On each device, every resized element equals the oracle or is a classified tie, incl. width-1 outputs."""
    resample = reference_module("resample")
    rng = np.random.default_rng(11)
    for h, w, oh, ow in [(8, 1, 3, 1), (2, 2, 3, 1), (17, 11, 5, 1), (30, 20, 7, 9), (23, 31, 1, 12), (9, 9, 2, 2)]:
        x = rng.integers(0, 256, (4, h, w)).astype(np.float32)
        got = resize_bicubic_if_needed(torch.from_numpy(x)[None].to(device), oh, ow)[0].cpu().numpy()
        explained = resample.classify_disagreement(resample.resize_bicubic_aa(x, oh, ow), got)
        assert explained.all(), ((h, w, oh, ow), np.argwhere(~explained)[:5])


def test_torch_cpu_width_one_defect() -> None:
    """torch's CPU aa interpolate to output width 1 repeats the first row (why impl.resize routes it).

    Plain ``F.interpolate`` on float32 (8, 1) -> (3, 1) and (2, 2) -> (3, 1):
    every output row equals the first. If this starts failing, torch fixed it
    and the workaround in `impl.resize` can go.
    """
    for shape in ((8, 1), (2, 2)):
        x = torch.arange(shape[0] * shape[1], dtype=torch.float32).view(1, 1, *shape) * 10
        plain = torch.nn.functional.interpolate(x, size=(3, 1), mode="bicubic", align_corners=False, antialias=True)
        assert plain.flatten().unique().numel() == 1
    x = torch.arange(8, dtype=torch.float32).view(1, 1, 8, 1) * 10
    # The separable filter of semantics §13.1 by hand: scale 8/3, support 16/3, rows 8.96, 35.0, 61.04 -> 9, 35, 61.
    assert resize_bicubic_if_needed(x, 3, 1).flatten().tolist() == [9.0, 35.0, 61.0]


# --- compositing (semantics §3.4) ---------------------------------------------------------------------


def _composite_numpy(rgb: np.ndarray, a: np.ndarray, bg: np.ndarray, device: str) -> np.ndarray:
    """Independent float32 model of upstream's four ops; CUDA divides by multiplying with f32(1/255)."""
    alpha = a * np.float32(1 / 255) if device == "cuda" else a / np.float32(255)
    alpha = np.clip(alpha, np.float32(0), np.float32(1)).astype(np.float32)
    out = alpha * rgb + (np.float32(1) - alpha) * bg
    return np.floor(np.clip(out, 0, 255)).astype(np.float32)


@pytest.mark.parametrize("pattern", ["white", "black", "gray"])
def test_composite_full_grid_bitwise(pattern: str, device: str) -> None:
    """Over every (rgb, alpha) pair the composite equals the float32 model of the device's arithmetic."""
    u = np.arange(256, dtype=np.float32)
    rgb, a = np.meshgrid(u, u, indexing="ij")  # (256, 256): rgb rows, alpha columns
    x = np.stack([rgb, rgb, rgb, a])[None]
    got = fill_transparent_bg(torch.from_numpy(x).to(device), BACKGROUNDS[pattern]).cpu().numpy()
    level = {"white": 255.0, "black": 0.0, "gray": 128.0}[pattern]
    want = _composite_numpy(rgb, a, np.float32(level), device)
    assert np.array_equal(got[0, 0], want), np.argwhere(got[0, 0] != want)[:5]


def test_chessboard_phase_and_blend(device: str) -> None:
    """top_left=True: (0,0) white, (0,square) gray; transparent pixels show the background exactly."""
    bg = BACKGROUNDS["chessboard"]
    x = torch.zeros(1, 4, 7, 7, device=device)
    out = fill_transparent_bg(x, bg).cpu()
    s = bg.square_size
    assert out[0, :, 0, 0].tolist() == [255.0] * 3
    assert out[0, :, 0, s].tolist() == [180.0] * 3
    assert out[0, :, s, s].tolist() == [255.0] * 3


def test_composite_passthrough_and_drop() -> None:
    """3 channels pass through (same object); 4 channels without a config drop alpha, no blend."""
    x3 = torch.rand(2, 3, 4, 4) * 255
    assert fill_transparent_bg(x3, BACKGROUNDS["white"]) is x3
    x4 = torch.rand(2, 4, 4, 4) * 255
    assert torch.equal(fill_transparent_bg(x4, None), x4[:, :3])


def test_composite_patterns_errors() -> None:
    """An unknown pattern is a ValueError; a missing pattern key means black."""
    x = torch.zeros(1, 4, 2, 2)
    with pytest.raises(ValueError, match="Invalid background pattern"):
        fill_transparent_bg(x, {"pattern": "pink"})
    assert torch.equal(fill_transparent_bg(x, {"type": "white"}), torch.zeros(1, 3, 2, 2))


@given(chw_tensors(channels=(4,), max_side=16), st.sampled_from(["white", "black", "gray", "chessboard", "none"]))
def test_composite_matches_reference(x: torch.Tensor, bg_name: str) -> None:
    """On CPU the torch composite is bitwise the NumPy oracle's ``arithmetic="cpu"`` result."""
    background = reference_module("background")
    got = fill_transparent_bg(x[None].float(), BACKGROUNDS[bg_name])[0].numpy()
    want = background.fill_transparent_bg(x.numpy().astype(np.float32), BACKGROUNDS[bg_name], arithmetic="cpu")
    assert np.array_equal(got, np.asarray(want))


# --- normalization and patchify (semantics §3.5) ------------------------------------------------------


def test_normalization_constants() -> None:
    """mean = std = 0.5: scale is f32(1/127.5) and bias exactly -1."""
    scale, bias = normalization_tensors((0.5,) * 3, (0.5,) * 3, "cpu")
    assert scale.shape == (1, 3, 1, 1) and scale.dtype == torch.float32
    assert scale.flatten().tolist() == [float(np.float32(1 / 127.5))] * 3
    assert bias.flatten().tolist() == [-1.0] * 3


CLIP = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))


@pytest.mark.parametrize(("mean", "std"), [((0.5,) * 3, (0.5,) * 3), CLIP])
def test_addcmul_is_a_fused_multiply_add(mean: tuple, std: tuple, device: str) -> None:
    """addcmul rounds once (FMA): it equals f32(f64(x)*f64(scale) + f64(bias)) for every level 0..255."""
    scale, bias = normalization_tensors(mean, std, device)
    u = torch.arange(256, dtype=torch.float32, device=device).view(1, 1, 16, 16).expand(1, 3, 16, 16).contiguous()
    got = torch.addcmul(bias, u, scale).cpu().numpy().astype(np.float64)
    s, b = scale.cpu().double().numpy(), bias.cpu().double().numpy()
    want = (u.cpu().double().numpy() * s + b).astype(np.float32)
    assert np.array_equal(got.astype(np.float32), want)


@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_patchify_is_the_checkpoint_permutation(p: int, gh: int, gw: int, seed: int) -> None:
    """Patch layout equals the checkpoint's reshape(H/p,p,W/p,p,C).transpose(0,2,4,1,3) (semantics §14.5)."""
    x = np.random.default_rng(seed).random((3, gh * p, gw * p), dtype=np.float32)
    got = patchify(torch.from_numpy(x)[None], p)[0].numpy()
    hwc = x.transpose(1, 2, 0)
    want = hwc.reshape(gh, p, gw, p, 3).transpose(0, 2, 4, 1, 3).reshape(-1, 3, p, p)
    assert np.array_equal(got, want)


@given(chw_tensors(channels=(3,), max_side=20), st.integers(0, 7), st.integers(0, 7))
@example(torch.zeros(3, 1, 1, dtype=torch.uint8), 3, 3)
def test_padding_equals_bias(x: torch.Tensor, extra_h: int, extra_w: int) -> None:
    """Padding is zero in pixel space, so padded elements equal bias = -mean/std exactly, real ones x*scale+bias."""
    p = 4
    h, w = x.shape[1:]
    ph, pw = -(-(h + extra_h) // p) * p, -(-(w + extra_w) // p) * p
    scale, bias = normalization_tensors((0.25, 0.5, 0.75), (0.5, 0.25, 0.125), "cpu")
    out = normalize_and_patchify(x[None].float(), scale, bias, p, ph, pw)[0]
    img = out.view(ph // p, pw // p, 3, p, p).permute(2, 0, 3, 1, 4).reshape(3, ph, pw)
    b = bias.view(3, 1, 1).expand(3, ph, pw)
    mask = torch.zeros(ph, pw, dtype=torch.bool)
    mask[:h, :w] = True
    assert torch.equal(img[:, ~mask], b[:, ~mask])
    assert torch.equal(img[:, :h, :w], torch.addcmul(bias[0], x.float(), scale[0]))


@pytest.mark.parametrize(("mean", "std"), [((0.5,) * 3, (0.5,) * 3), CLIP])
def test_normalize_matches_reference(mean: tuple, std: tuple) -> None:
    """Pad + normalize + patchify equals the NumPy oracle bitwise, with the oracle's FMA (``fused=True``) form.

    torch 2.13's CPU ``addcmul`` rounds once (see `test_addcmul_is_a_fused_multiply_add`), so the
    oracle's fused form is the one that models it; its unfused default does not on this machine.
    """
    normalize = reference_module("normalize")
    x = np.random.default_rng(3).integers(0, 256, size=(3, 9, 6)).astype(np.float32)
    scale, bias = normalization_tensors(mean, std, "cpu")
    got = normalize_and_patchify(torch.from_numpy(x)[None], scale, bias, 4, 12, 8)[0].numpy()
    r_scale, r_bias = normalize.scale_bias(mean, std)
    padded = normalize.pad_bottom_right(x, 12, 8)
    want = normalize.patchify(normalize.normalize_scale_bias(padded, r_scale, r_bias, fused=True), 4)
    assert np.array_equal(got, want)
