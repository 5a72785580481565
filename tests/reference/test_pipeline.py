"""The oracle end to end (semantics §3): stage-by-stage against upstream's torch steps, order, subsets, corpus.

The torch steps below restate semantics §3 in torch (interpolate -> round -> clamp,
the four-kernel composite, pad, addcmul, view/permute); they are the
*comparison*, the reference never imports torch (checked in a subprocess).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from PIL import Image

from deferlab import reference
from deferlab.reference.oracle import corpus
from deferlab.reference.oracle.background import chessboard, fill_transparent_bg
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.oracle.normalize import normalize_scale_bias, pad_bottom_right, patchify, scale_bias
from deferlab.reference.oracle.pipeline import StageTrace, preprocess, trace
from deferlab.reference.oracle.resample import classify_disagreement, tie_epsilon
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.profiles import profile

CORPUS = corpus.entries()
ROOT = Path(reference.__file__).resolve().parents[1]  # the folder holding the reference package
# Small geometry so that tiny images are resized: p=2, m=2, L=16, one side <= 64 px.
SMALL = PreprocessConfig(
    patch_size=2,
    merge_kernel_size=2,
    in_patch_limit=16,
    patch_limit_on_one_side=32,
    image_mean=(0.48145466, 0.4578275, 0.40821073),
    image_std=(0.26862954, 0.26130258, 0.27577711),
    background=BackgroundConfig(pattern="chessboard", square_size=3, gray_value=180),
)


def test_reference_never_imports_torch() -> None:
    """Importing the oracle's pipeline, gate and staging pulls in no torch (a fresh interpreter)."""
    code = "import deferlab.reference.oracle.pipeline, deferlab.reference.oracle.gate, deferlab.reference.oracle.stage, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def torch_owner_steps(resized: torch.Tensor, config: PreprocessConfig, rc) -> torch.Tensor:
    """semantics §3.4 + 3.5 in torch on CPU, after the resize: composite, pad, addcmul, patchify."""
    x = resized
    if x.shape[1] == 4:
        if config.background is None:
            x = x[:, :3]
        else:
            alpha = (x[:, 3:4] / 255.0).clamp(0.0, 1.0)
            bg = torch.from_numpy(chessboard(x.shape[2], x.shape[3], config.background))
            x = (alpha * x[:, :3] + (1.0 - alpha) * bg).clamp(0.0, 255.0).floor_()
    x = torch.nn.functional.pad(x, (0, rc.pad_width, 0, rc.pad_height), value=0.0)
    scale, bias = (torch.from_numpy(v).reshape(1, 3, 1, 1) for v in scale_bias(config.image_mean, config.image_std))
    x = torch.addcmul(bias, x, scale)
    p = config.patch_size
    b, c, h, w = x.shape
    return x.view(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(-1, c, p, p)


def torch_resize(staged: np.ndarray, rc) -> torch.Tensor:
    x = torch.from_numpy(staged).unsqueeze(0).float()
    if x.shape[-2:] == (rc.new_height, rc.new_width):
        return x
    out = torch.nn.functional.interpolate(
        x, size=(rc.new_height, rc.new_width), mode="bicubic", align_corners=False, antialias=True
    )
    return out.round_().clamp_(0.0, 255.0)


@st.composite
def small_images(draw: st.DrawFn) -> np.ndarray | Image.Image:
    """RGB / RGBA arrays and PIL images up to 40 x 40 (so SMALL resizes most of them)."""
    c = draw(st.sampled_from([1, 3, 4]))
    h, w = draw(st.integers(1, 40)), draw(st.integers(2, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arr = rng.integers(0, 256, (c, h, w), dtype=np.uint8)
    if c == 4:
        arr[3] = rng.choice([0, 0, 128, 255, 255, 17], size=(h, w))  # plenty of fully (in)visible pixels
    if draw(st.booleans()) and c != 1:
        return Image.fromarray(np.ascontiguousarray(arr.transpose(1, 2, 0)), "RGBA" if c == 4 else "RGB")
    return arr


@given(small_images())
def test_stage_by_stage_against_torch_steps(image: np.ndarray | Image.Image) -> None:
    """Resize differs from torch only by explained ties; given torch's resized pixels, the rest is bit-equal."""
    tr = trace(image, SMALL, fused=True)
    # Output width 1 hits torch CPU's own aa-interpolate defect (pinned in test_resample), not ours.
    assume(tr.resize_config.new_width > 1 or tr.resized is None)
    resized = torch_resize(tr.staged, tr.resize_config)
    if tr.resized is None:
        assert np.array_equal(resized[0].numpy(), tr.staged.astype(np.float32))
    else:
        h, w = tr.staged.shape[1:]
        eps = tie_epsilon(h, tr.resize_config.new_height, w, tr.resize_config.new_width)
        assert classify_disagreement(tr.resized, resized[0].numpy(), eps).all()
    # Downstream of the resize the oracle is exact: feed it torch's resized pixels.
    got = torch_owner_steps(resized, SMALL, tr.resize_config).numpy()
    rc = tr.resize_config
    scale, bias = scale_bias(SMALL.image_mean, SMALL.image_std)
    composited = fill_transparent_bg(resized[0].numpy(), SMALL.background)
    padded = pad_bottom_right(composited, rc.padded_height, rc.padded_width)
    ours = patchify(normalize_scale_bias(padded, scale, bias, fused=True), SMALL.patch_size)
    assert np.array_equal(got, ours)
    if tr.resized is None or np.array_equal(resized[0].numpy(), tr.resized.values):
        assert np.array_equal(got, tr.patches)


@given(small_images())
def test_trace_is_internally_consistent(image: np.ndarray | Image.Image) -> None:
    """Each recorded stage is the documented function of the previous one; shapes follow the resize config."""
    tr = trace(image, SMALL)
    rc = tr.resize_config
    assert isinstance(tr, StageTrace) and rc == resize_config(tr.staged.shape[2], tr.staged.shape[1], SMALL)
    assert (tr.resized is None) == (tr.staged.shape[1:] == (rc.new_height, rc.new_width))
    assert tr.composited.shape == (3, rc.new_height, rc.new_width) and tr.composited.dtype == np.float32
    assert np.array_equal(tr.padded, pad_bottom_right(tr.composited, rc.padded_height, rc.padded_width))
    scale, bias = scale_bias(SMALL.image_mean, SMALL.image_std)
    assert np.array_equal(tr.normalized, normalize_scale_bias(tr.padded, scale, bias))
    assert np.array_equal(tr.patches, patchify(tr.normalized, SMALL.patch_size))
    assert tr.patches.shape[0] == rc.num_patches and tr.grid_thw == rc.grid_thw


@given(st.lists(small_images(), min_size=1, max_size=5), st.data())
def test_request_order_and_any_subset(images: list, data: st.DataObject) -> None:
    """preprocess concatenates per-image patches in request order; any subset, in any order, gives its own rows."""
    pv, grids = preprocess(images, SMALL)
    counts = [int(g[1] * g[2]) for g in grids]
    offsets = np.concatenate([[0], np.cumsum(counts)])
    assert pv.shape == (offsets[-1], 3, 2, 2) and grids.dtype == np.int64
    subset = data.draw(st.permutations(range(len(images))).flatmap(lambda p: st.just(p[: max(1, len(p) // 2)])))
    sub_pv, sub_grids = preprocess([images[i] for i in subset], SMALL)
    expected = np.concatenate([pv[offsets[i] : offsets[i + 1]] for i in subset])
    assert np.array_equal(sub_pv, expected) and np.array_equal(sub_grids, grids[list(subset)])


def test_empty_request() -> None:
    """No images: (0, 3, p, p) float32 patches and (0, 3) int64 grids."""
    pv, grids = preprocess([], profile())
    assert pv.shape == (0, 3, 14, 14) and pv.dtype == np.float32
    assert grids.shape == (0, 3) and grids.dtype == np.int64


def test_rgba_without_background_drops_alpha() -> None:
    """With no background config the alpha channel is dropped, never composited (kimi-k2.5)."""
    rgba = np.zeros((4, 14, 14), np.uint8)
    rgba[:3] = 200
    tr = trace(rgba, profile("kimi-k2.5"))
    assert (tr.composited == 200).all()


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_corpus_through_kimi_k3(entry: corpus.CorpusEntry) -> None:
    """Every corpus image runs end to end under kimi-k3: grid from the NaViT rule, values in the normalized range."""
    cfg = profile("kimi-k3")
    with corpus.open_checked(entry) as image:
        pv, grids = preprocess([image], cfg, fused=True)
    rc = resize_config(image.size[0], image.size[1], cfg)
    assert grids.tolist() == [list(rc.grid_thw)]
    assert pv.shape == (rc.num_patches, 3, 14, 14)
    scale, bias = scale_bias(cfg.image_mean, cfg.image_std)
    top = float((255 * scale.astype(np.float64) + bias).max())  # exact in float64; one float32 rounding of slack
    assert (pv >= bias.min()).all() and (pv <= np.nextafter(np.float32(top), np.float32(np.inf))).all()


_NOT_FMA_EXACT = PreprocessConfig(  # a subnormal-ish bias next to normal products: the rational-table path
    patch_size=14,
    merge_kernel_size=2,
    in_patch_limit=4096,
    patch_limit_on_one_side=512,
    image_mean=(0.0, 1e-30, 0.5),
    image_std=(1.0, 1e-3, 3.0),
    background=BackgroundConfig(pattern="chessboard", square_size=8, gray_value=180),
)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("arithmetic", ["cpu", "cuda"])
@pytest.mark.parametrize(
    "cfg",
    [profile("kimi-k3").with_(in_patch_limit=4096), profile("kimi-k2.5").with_(in_patch_limit=4096), _NOT_FMA_EXACT],
)
def test_preprocess_equals_trace_on_large_images(cfg: PreprocessConfig, arithmetic: str, fused: bool) -> None:
    """preprocess (streamed, straight to patches) is bit-equal to the concatenated trace patches (stage by stage)."""
    rng = np.random.default_rng(7)
    rgba = rng.integers(0, 256, (4, 900, 1300), dtype=np.uint8)
    rgba[3] = rng.choice([0, 90, 255], size=(900, 1300))
    kept = rng.integers(0, 256, (4, 56, 84), dtype=np.uint8)  # kept at its size: composited without a resize
    images = [
        rgba,
        rng.integers(0, 256, (3, 700, 1000), dtype=np.uint8),
        kept,
        rng.integers(0, 256, (3, 1, 3000), np.uint8),
    ]
    pv, grids = preprocess(images, cfg, arithmetic=arithmetic, fused=fused)
    want = np.concatenate([trace(im, cfg, arithmetic=arithmetic, fused=fused).patches for im in images])
    assert pv.shape == want.shape and np.array_equal(pv.view(np.uint32), want.view(np.uint32))
