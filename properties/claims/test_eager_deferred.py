"""Property 2: eager == deferred, BF16 bitwise on the same device, for any owner partition (claim C4).

The eager path preprocesses the whole request on the producer and ships FP32
patches; the deferred path ships uint8 pixels over the CPU transport and each
owner preprocesses only its own subset, in its own order. The owner's output
must not depend on which images it was grouped with (semantics §3.6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties import claimcheck, seam
from deferlab.properties import strategies as s
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig

POLICIES = ["PR_33921", "RELEASED", "HARDENED"]


def patch_counts(images: list[Any], config: PreprocessConfig) -> list[int]:
    """Patches per image from the reference NaViT decision on the true CHW / PIL size."""
    out = []
    for img in images:
        w, h = img.size if isinstance(img, Image.Image) else (int(img.shape[2]), int(img.shape[1]))
        rc = resize_config(w, h, config)
        out.append((rc.padded_height // config.patch_size) * (rc.padded_width // config.patch_size))
    return out


def bits(x: Any) -> np.ndarray:
    """The float32 bit patterns of a BF16 / float tensor (exact: BF16 widens losslessly)."""
    return np.ascontiguousarray(seam.to_numpy(x), dtype=np.float32).view(np.uint32)


def eager_features(
    impl: seam.Impl, policy: str, config: PreprocessConfig, images: list[Any], device: str, items: list | None = None
) -> list:
    """Per-image BF16 features of the eager path (a non-cpu transport keeps the request eager); ``items``: that
    producer's items when the caller already ran it (`test_mixed` ships them too)."""
    if items is None:
        items = impl.process(images, config, policy=policy, transport="cuda_ipc", device=device).items
    feats = impl.materialize(items, range(len(images)), config, policy=policy, device=device)
    return list(torch.as_tensor(seam.to_numpy(feats)).split(patch_counts(images, config)))


def deferred_items(impl: seam.Impl, policy: str, config: PreprocessConfig, images: list[Any]) -> list:
    """Deferred items for every image: the processor's when its gate defers, else the EPD producer's."""
    out = impl.process(images, config, policy=policy)
    flags = out.deferred if isinstance(out.deferred, list) else [out.deferred] * len(images)
    return out.items if all(flags) else impl.epd_items(images, config, policy=policy)


def check_eager_equals_deferred(
    impl: seam.Impl, policy: str, config: PreprocessConfig, images: list[Any], partition: list[list[int]], device: str
) -> None:
    """Every image's BF16 features are bit-identical whether eager or deferred to any owner subset."""
    eager = eager_features(impl, policy, config, images, device)
    rank_items = impl.deliver(deferred_items(impl, policy, config, images), len(partition), policy=policy)
    counts = patch_counts(images, config)
    for rank, owned in enumerate(partition):
        if not owned:
            continue
        feats = torch.as_tensor(
            seam.to_numpy(impl.materialize(rank_items[rank], owned, config, policy=policy, device=device))
        )
        assert feats.shape[0] == sum(counts[i] for i in owned), f"rank {rank} produced {feats.shape[0]} rows"
        for i, part in zip(owned, feats.split([counts[i] for i in owned]), strict=True):
            diff = int((bits(part) != bits(eager[i])).sum())
            assert diff == 0, f"image {i} on rank {rank} (owns {owned}): {diff} BF16 elements differ from eager"


@st.composite
def partitioned_requests(draw: st.DrawFn, *, modes: tuple[str, ...] | None = None) -> tuple:
    """(config, images, partition): small images under limits that bind, split across owners any way."""
    config = draw(s.pixel_configs())
    images = draw(s.requests(min_images=1, max_images=4, max_side=10, modes=modes))
    return config, images, draw(s.owner_partitions(len(images)))


_BG = BackgroundConfig(pattern="chessboard", square_size=2, gray_value=180)
_PINNED_CONFIG = PreprocessConfig(
    patch_size=2, merge_kernel_size=2, in_patch_limit=4, patch_limit_on_one_side=2, background=_BG
)


@pytest.mark.policies("PR_33921", "RELEASED")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(req=partitioned_requests())
@example(
    req=(
        _PINNED_CONFIG,
        [Image.new("RGBA", (7, 5), (10, 200, 30, 77)), torch.full((3, 5, 7), 9, dtype=torch.uint8)],
        [[1], [0]],
    )
)
def test_eager_equals_deferred_for_any_partition(impl, device, policy, req):
    """Deferred BF16 features equal eager ones bit for bit, however the images are split across owners."""
    config, images, partition = req
    check_eager_equals_deferred(impl, policy, config, images, partition, device)


@pytest.mark.claim("C4")
def test_claim_c4_deferred_equals_eager(impl, policy):
    """C4: deferred output is BF16-identical to eager on the same device, for any owner partition."""
    claimcheck.verify_deferred_claim(
        "C4",
        impl,
        policy,
        partitioned_requests,
        lambda req: check_eager_equals_deferred(impl, policy, *req, device="cpu"),
        evidence="checked on cpu;",
    )
