"""impl's deferral gate (semantics §4): SGLang's own cases, ties, the byte rule, per-image gating, NaViT parity."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.impl.gate import defer_decisions, payload_bytes, should_defer
from deferlab.impl.model import get_image_features
from deferlab.impl.navit import navit_resize_config
from deferlab.impl.processor import Processor
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.policies import HARDENED, INTERIM_3D3194F, PR_33921, PRE_PR, RELEASED, Policy
from deferlab.reference.system.profiles import profile
from tests.impl.support import K3, images, pil_images, reference_module, small_config

L1 = profile("sglang-gate-test-l1")


def u8(*shape: int) -> torch.Tensor:
    return torch.zeros(shape, dtype=torch.uint8)


@pytest.mark.parametrize(
    ("images", "config", "transport", "expected"),
    [
        ([u8(3, 32, 32)], K3, "cpu", True),  # raw 3072 <= processed 3*56*56*4 = 37632
        ([u8(3, 1024, 1024)], L1, "cpu", False),  # in_patch_limit 1: 28x28 padded, raw 3,145,728 > 9,408
        ([torch.zeros(3, 32, 32)], K3, "cpu", False),  # float32 tensor
        ([], K3, "cpu", False),  # empty request
        ([u8(3, 32, 32)], K3, "cuda_ipc", False),
        ([u8(3, 32, 32)], K3, "fabric", False),  # only the tests' bypass keeps fabric eager (semantics §4.2)
    ],
    ids=["3x32x32-defers", "in_patch_limit-1", "float32", "empty", "cuda_ipc", "fabric"],
)
def test_sglang_gate_cases(images: list, config: PreprocessConfig, transport: str, expected: bool) -> None:
    """SGLang's test_kimi_k25.py gate cases (semantics §4.2) give exactly the upstream answers."""
    assert should_defer(images, config, transport, cuda_available=True) is expected


def test_no_cuda_never_defers() -> None:
    """Without CUDA the gate is closed whatever the sizes."""
    assert should_defer([u8(3, 32, 32)], K3, "cpu", cuda_available=False) is False


def test_ties_defer() -> None:
    """raw == processed defers: a 2x2 RGB image resized to 1x1 under p=1, m=1, L=1 (12 bytes each way)."""
    cfg = PreprocessConfig(patch_size=1, merge_kernel_size=1, in_patch_limit=1, patch_limit_on_one_side=8)
    assert payload_bytes([u8(3, 2, 2)], cfg) == (12, 12)
    assert should_defer([u8(3, 2, 2)], cfg, "cpu", True) is True
    assert payload_bytes([u8(4, 2, 2)], cfg) == (16, 12)
    assert should_defer([u8(4, 2, 2)], cfg, "cpu", True) is False


def test_channel_counting() -> None:
    """RGBA PIL counts 4, L counts 3, a (1,H,W) tensor counts 3 (semantics §4.3)."""
    from PIL import Image

    cfg = K3
    assert payload_bytes([Image.new("RGBA", (5, 4))], cfg)[0] == 80
    assert payload_bytes([Image.new("L", (5, 4))], cfg)[0] == 60
    assert payload_bytes([Image.new("P", (5, 4))], cfg)[0] == 60
    assert payload_bytes([u8(1, 4, 5)], cfg)[0] == 60


def test_2d_tensor_raises_index_error_in_gate() -> None:
    """A 2-D uint8 tensor raises IndexError reading shape[2], before the dim()==2 branch (semantics §4.3)."""
    with pytest.raises(IndexError):
        should_defer([u8(32, 32)], K3, "cpu", cuda_available=True)


@given(st.integers(1, 4000), st.integers(1, 4000))
@example(8000, 6000)
@example(10000, 100)
def test_navit_matches_reference(width: int, height: int) -> None:
    """impl's own NaViT decision equals the reference's for every size (two independent codings of semantics §3.2)."""
    assert navit_resize_config(width, height, K3) == resize_config(width, height, K3)


@given(st.lists(images(), min_size=1, max_size=4))
def test_byte_rule(imgs: list) -> None:
    """Per request: defer iff sum(channels*w*h) <= sum(3*padded_w*padded_h*4), sizes from the reference NaViT."""
    cfg = small_config()
    raw = processed = 0
    for img in imgs:
        w, h = (img.shape[2], img.shape[1]) if isinstance(img, torch.Tensor) else img.size
        c = (3 if img.shape[0] == 1 else img.shape[0]) if isinstance(img, torch.Tensor) else None
        if c is None:
            c = 4 if img.mode != "RGB" and ("A" in img.getbands() or "transparency" in img.info) else 3
        rc = resize_config(w, h, cfg)
        raw += c * w * h
        processed += 12 * rc.padded_width * rc.padded_height
    assert should_defer(imgs, cfg, "cpu", True) is (raw <= processed)


@given(st.lists(images(), min_size=0, max_size=4), st.sampled_from(["cpu", "cuda_ipc", "fabric"]), st.booleans())
def test_gate_matches_reference(imgs: list, transport: str, cuda: bool) -> None:
    """impl's gate answers as the reference gate, per request and per image."""
    gate = reference_module("gate")
    cfg = small_config()
    assert should_defer(imgs, cfg, transport, cuda) == gate.should_defer(imgs, cfg, transport, cuda)
    per = defer_decisions(imgs, cfg, policy=RELEASED, transport=transport, cuda_available=cuda)
    assert per == gate.should_defer_per_image(imgs, cfg, transport, cuda)


def test_per_image_gating_splits_a_request() -> None:
    """Per-image gating (3d3194f6c+) defers the small image of a request the PR's one decision keeps eager."""
    cfg = small_config()
    small, huge = u8(3, 8, 8), u8(3, 64, 64)  # huge: 12288 raw bytes vs 3*24*24*4 = 6912 processed
    assert defer_decisions([small, huge], cfg, policy=PR_33921) == [False, False]
    assert defer_decisions([small, huge], cfg, policy=RELEASED) == [True, False]
    out = Processor(cfg, policy=RELEASED, cuda_available=True, device="cpu").process([small, huge])
    assert out.deferred == [True, False]
    assert out.items[0].feature.dtype == torch.uint8 and out.items[1].feature.dtype == torch.float32
    # The mixed request materializes across 2 owners exactly as the all-eager one (released consumer).
    eager = Processor(cfg, policy=RELEASED, cuda_available=False, device="cpu").process([small, huge])
    got = get_image_features(out.items, 2, config=cfg, device="cpu", policy=RELEASED)
    want = get_image_features(eager.items, 2, config=cfg, device="cpu", policy=RELEASED)
    assert torch.equal(got.features.view(torch.int16), want.features.view(torch.int16))


@pytest.mark.parametrize("policy", [PR_33921, PRE_PR, INTERIM_3D3194F, RELEASED, HARDENED], ids=lambda p: p.name)
@given(img=pil_images(max_side=20))
def test_processor_follows_its_gate(policy: Policy, img) -> None:
    """Processor.deferred is the policy's gate answer; PRE_PR never defers."""
    cfg = small_config()
    out = Processor(cfg, policy=policy, cuda_available=True, device="cpu").process([img])
    want = defer_decisions([img], cfg, policy=policy)
    assert (out.deferred if policy.gate_per_image else [out.deferred]) == want
    if policy is PRE_PR:
        assert want == [False]
