"""impl end to end: grouping invariance, empty input, and eager == deferred in BF16 across owner ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from deferlab.impl.model import get_image_features
from deferlab.impl.pipeline import preprocess
from deferlab.impl.processor import Processor
from deferlab.impl.resize import resize_bicubic_if_needed
from deferlab.impl.transport import deliver
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.policies import PR_33921, PRE_PR, RELEASED, Policy
from tests.impl.support import (
    BACKGROUNDS,
    bf16_bits,
    corpus_image,
    images,
    reference_module,
    small_config,
)

# A config under which small images both get resized and still defer (raw <= processed bytes).
DEFER_CFG = small_config(in_patch_limit=32, patch_limit_on_one_side=8)


def _split(pv: torch.Tensor, grids: torch.Tensor) -> list[torch.Tensor]:
    return list(pv.split([int(g[1] * g[2]) for g in grids]))


@given(st.lists(images(), min_size=1, max_size=5), st.sampled_from(sorted(BACKGROUNDS)), st.randoms())
def test_output_does_not_depend_on_grouping(imgs: list, bg_name: str, rnd) -> None:
    """Each image's patches are bitwise the same alone, in the whole request, or in a shuffled request."""
    cfg = small_config(background=BACKGROUNDS[bg_name])
    pv, grids = preprocess(imgs, cfg, device="cpu")
    whole = _split(pv, grids)
    order = list(range(len(imgs)))
    rnd.shuffle(order)
    pv_s, grids_s = preprocess([imgs[i] for i in order], cfg, device="cpu")
    for k, i in enumerate(order):
        assert torch.equal(_split(pv_s, grids_s)[k], whole[i])
        assert torch.equal(grids_s[k], grids[i])
    for i, img in enumerate(imgs):
        alone, g = preprocess([img], cfg, device="cpu")
        assert torch.equal(alone, whole[i]) and torch.equal(g[0], grids[i])


def test_empty_request(device: str) -> None:
    """No images: (0, 3, p, p) pixel values and (0, 3) int64 grids."""
    pv, grids = preprocess([], small_config(), device=device)
    assert tuple(pv.shape) == (0, 3, 4, 4) and pv.dtype == torch.float32
    assert tuple(grids.shape) == (0, 3) and grids.dtype == torch.int64


def test_sglang_batching_case(device: str) -> None:
    """SGLang's batching test: (3,32,24) x2 + (3,28,20) to one 16x12 target equal their per-image results."""
    cfg = PreprocessConfig(patch_size=4, merge_kernel_size=2, in_patch_limit=12, patch_limit_on_one_side=64)
    gen = torch.Generator().manual_seed(7)
    imgs = [torch.randint(0, 256, s, dtype=torch.uint8, generator=gen) for s in ((3, 32, 24), (3, 32, 24), (3, 28, 20))]
    pv, grids = preprocess(imgs, cfg, device=device)
    for img, part in zip(imgs, _split(pv, grids), strict=True):
        assert torch.equal(preprocess([img], cfg, device=device)[0], part)


def _rgba(h: int, w: int, seed: int) -> Image.Image:
    arr = np.random.default_rng(seed).integers(0, 256, size=(h, w, 4), dtype=np.uint8)
    arr[: h // 2, :, 3] = 0  # a fully transparent half and a random-alpha half
    return Image.fromarray(arr, "RGBA")


def _rgb(h: int, w: int, seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8), "RGB")


def _gray(h: int, w: int, seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, size=(h, w), dtype=np.uint8), "L")


CASES = {
    "rgb": lambda: [_rgb(37, 29, 1)],
    "grayscale-L": lambda: [_gray(33, 40, 2)],
    "grayscale-tensor": lambda: [torch.from_numpy(np.random.default_rng(3).integers(0, 256, (1, 30, 35), np.uint8))],
    "palette-alpha": lambda: [corpus_image("libpng-pngsuite-ftbbn3p08.png")],
    "palette-trns-single": lambda: [corpus_image("pillow-p_trns_single.png").resize((40, 40))],
    "la": lambda: [corpus_image("libpng-pngsuite-basn4a08.png")],
    "rgba": lambda: [_rgba(36, 31, 4)],
}


def _eager_vs_deferred(imgs: list, cfg: PreprocessConfig, ranks: int, policy: Policy, device: str = "cpu") -> None:
    eager = Processor(cfg, policy=policy, cuda_available=False, device=device).process(imgs)
    deferred = Processor(cfg, policy=policy, cuda_available=True, device=device).process(imgs)
    assert eager.deferred in (False, [False] * len(imgs))
    assert deferred.deferred in (True, [True] * len(imgs)), "precondition: the gate must defer these images"
    e_items = deliver(eager.items, "cpu", ranks, policy).rank_items[0]
    d_items = deliver(deferred.items, "cpu", ranks, policy).rank_items[0]
    e = get_image_features(e_items, ranks, config=cfg, device=device, policy=policy)
    d = get_image_features(d_items, ranks, config=cfg, device=device, policy=policy)
    assert e.features.dtype == d.features.dtype == torch.bfloat16
    assert torch.equal(bf16_bits(e.features), bf16_bits(d.features))
    assert sum(r.log.images_preprocessed for r in d.ranks) == len(imgs)  # each image preprocessed once, by its owner
    assert all(r.log.images_preprocessed == len(r.owned) for r in d.ranks)


@pytest.mark.parametrize("bg_name", sorted(BACKGROUNDS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_eager_equals_deferred_single_image(case: str, bg_name: str) -> None:
    """One image, every background: the owner's deferred BF16 features equal the eager ones bitwise."""
    _eager_vs_deferred(CASES[case](), DEFER_CFG.with_(background=BACKGROUNDS[bg_name]), 1, PR_33921)


@pytest.mark.parametrize("policy", [PR_33921, RELEASED], ids=lambda p: p.name)
@pytest.mark.parametrize("ranks", [2, 3])
def test_eager_equals_deferred_multi_image_across_owners(ranks: int, policy: Policy, device: str) -> None:
    """A 6-image mixed-mode request split over 2 and 3 owner ranks: BF16 bitwise equal to the eager path."""
    imgs = [CASES[c]()[0] for c in ("rgb", "rgba", "grayscale-L", "palette-alpha", "la", "grayscale-tensor")]
    _eager_vs_deferred(imgs, DEFER_CFG, ranks, policy, device)


def test_device_matches_cpu_up_to_explained_elements(device: str) -> None:
    """The device pipeline equals the CPU one except composite elements where CUDA's reciprocal alpha moves
    the floor by one level and resize elements within float noise of a .5 tie (semantics §3.3, §3.4)."""
    imgs = [CASES[c]()[0] for c in ("rgb", "rgba", "grayscale-L", "palette-alpha", "la")]
    cfg = DEFER_CFG
    cpu_pv, cpu_g = preprocess(imgs, cfg, device="cpu")
    dev_pv, dev_g = preprocess(imgs, cfg, device=device)
    assert torch.equal(cpu_g, dev_g)
    diff = (cpu_pv != dev_pv.cpu()).sum().item()
    if device == "cpu":
        assert diff == 0
    else:
        # one pixel level is scale = 1/127.5 after normalization: every difference must be exactly one level
        levels = ((cpu_pv - dev_pv.cpu()).abs() * 127.5).round()
        assert set(levels[cpu_pv != dev_pv.cpu()].unique().tolist()) <= {1.0}, "only one-level differences"


@given(st.lists(images(), min_size=1, max_size=4), st.integers(1, 3))
def test_eager_equals_deferred_generated(imgs: list, ranks: int) -> None:
    """For any small request the gate defers, owner-side features equal the eager ones bitwise (BF16)."""
    cfg = DEFER_CFG
    deferred = Processor(cfg, cuda_available=True, device="cpu").process(imgs)
    if not deferred.deferred:
        return  # the byte rule kept it eager: nothing deferred to compare (the gate has its own suite)
    _eager_vs_deferred(imgs, cfg, ranks, PR_33921)


def test_matches_reference_pipeline_without_resize() -> None:
    """Images already at their target size: impl's FP32 pixel values equal the NumPy oracle's bitwise.

    ``fused=True``: torch 2.13's CPU addcmul is an FMA (test_impl_stages::test_addcmul_is_a_fused_multiply_add).
    """
    pipeline = reference_module("pipeline")
    cfg = small_config(in_patch_limit=4096, patch_limit_on_one_side=64)
    imgs = [_rgb(9, 13, 5), _rgba(12, 7, 6), _gray(5, 5, 7)]
    pv, grids = preprocess(imgs, cfg, device="cpu")
    ref_pv, ref_grids = pipeline.preprocess(imgs, cfg, arithmetic="cpu", fused=True)
    assert np.array_equal(grids.numpy(), np.asarray(ref_grids))
    assert np.array_equal(pv.numpy(), np.asarray(ref_pv))


def _check_against_reference(imgs: list, cfg: PreprocessConfig, device: str) -> None:
    """Grids equal; each image's patches equal the oracle's, or differ only through resize elements the oracle
    classifies as ties: then the oracle's own downstream steps on impl's resized values reproduce impl bitwise."""
    pipeline = reference_module("pipeline")
    resample = reference_module("resample")
    background = reference_module("background")
    normalize = reference_module("normalize")
    arithmetic = "cuda" if device == "cuda" else "cpu"  # semantics §3.4: CUDA divides by multiplying with 1/255
    pv, grids = preprocess(imgs, cfg, device=device)
    ref_pv, ref_grids = pipeline.preprocess(imgs, cfg, arithmetic=arithmetic, fused=True)
    assert np.array_equal(grids.numpy(), np.asarray(ref_grids))
    scale, bias = normalize.scale_bias(cfg.image_mean, cfg.image_std)
    for img, mine in zip(imgs, _split(pv.cpu(), grids), strict=True):
        tr = pipeline.trace(img, cfg, arithmetic=arithmetic, fused=True)
        if np.array_equal(mine.numpy(), tr.patches):
            continue
        assert tr.resized is not None, "no resize happened, so nothing may differ"
        rc = tr.resize_config
        staged = torch.from_numpy(tr.staged)[None].to(device)
        resized = resize_bicubic_if_needed(staged, rc.new_height, rc.new_width)[0].cpu().numpy()
        assert resample.classify_disagreement(tr.resized, resized).all()
        comp = background.fill_transparent_bg(resized, cfg.background, arithmetic=arithmetic)
        padded = normalize.pad_bottom_right(comp, rc.padded_height, rc.padded_width)
        redo = normalize.patchify(normalize.normalize_scale_bias(padded, scale, bias, fused=True), cfg.patch_size)
        assert np.array_equal(mine.numpy(), redo)


@given(st.lists(images(), min_size=1, max_size=3), st.sampled_from(sorted(BACKGROUNDS)))
def test_matches_reference_pipeline(imgs: list, bg_name: str) -> None:
    """On the CPU, every pixel value equals the oracle's or traces back to a classified resize tie."""
    _check_against_reference(imgs, small_config(background=BACKGROUNDS[bg_name]), "cpu")


@pytest.mark.parametrize("bg_name", sorted(BACKGROUNDS))
def test_matches_reference_pipeline_on_device(bg_name: str, device: str) -> None:
    """On each device (the oracle modelling its composite arithmetic), the same holds for a fixed mixed request."""
    imgs = [CASES[c]()[0] for c in ("rgb", "rgba", "grayscale-L", "palette-alpha", "la", "grayscale-tensor")]
    _check_against_reference(imgs, small_config(background=BACKGROUNDS[bg_name]), device)


def test_the_promotion_knob_composites_rgb_transparency_and_no_policy_uses_it() -> None:
    """``promote_rgb_transparency=True`` keys out an RGB image's transparency colour (composited over the
    background), the rule claim C2 guards against; every policy, PRE_PR included, leaves it off and equals the
    same pixels with no key at all (no K3 commit ever promoted: semantics §3.1)."""
    img = corpus_image("libpng-pngsuite-ftbrn2c08.png")
    assert img.mode == "RGB" and "transparency" in img.info
    cfg = DEFER_CFG.with_(background=BACKGROUNDS["white"])
    promoted = Processor(cfg, cuda_available=False, device="cpu", promote_rgb_transparency=True).process([img])
    keyed = img.convert("RGBA")  # PIL's own colour-key conversion, what a promoting stager would produce
    assert torch.equal(
        promoted.items[0].feature, Processor(cfg, cuda_available=False, device="cpu").process([keyed]).items[0].feature
    )
    plain = Image.fromarray(np.asarray(img.convert("RGB")), "RGB")
    want = Processor(cfg, cuda_available=False, device="cpu").process([plain]).items[0].feature
    for policy in (PRE_PR, PR_33921):
        got = Processor(cfg, policy=policy, cuda_available=False, device="cpu").process([img]).items[0].feature
        assert torch.equal(got, want), policy.name
    assert not torch.equal(promoted.items[0].feature, want)
