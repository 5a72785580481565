"""The deferral gate (semantics §4, ``_should_defer_gpu_preprocessing``), reproduced exactly.

Including its flaws: a tensor is read as CHW (a 2-D tensor raises IndexError
in the dimension lookup before the "2-D counts 3 channels" branch can run),
and a float tensor is simply not deferred.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from PIL import Image

from deferlab.impl.navit import navit_resize_config
from deferlab.impl.staging import ImageLikeT, image_dimensions, raw_channels
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.policies import PR_33921, Policy, get_policy

FLOAT32_BYTES = 4


def is_deferrable_input(image: object) -> bool:
    """A PIL image or a uint8 tensor; anything else keeps the request eager."""
    return isinstance(image, Image.Image) or (isinstance(image, torch.Tensor) and image.dtype == torch.uint8)


def payload_bytes(images: Sequence[ImageLikeT], config: PreprocessConfig) -> tuple[int, int]:
    """(raw uint8 bytes at the original size, processed FP32 bytes at the padded size), summed."""
    raw = processed = 0
    for image in images:
        width, height = image_dimensions(image)
        rc = navit_resize_config(width, height, config)
        raw += raw_channels(image) * width * height
        processed += 3 * (rc.new_width + rc.pad_width) * (rc.new_height + rc.pad_height) * FLOAT32_BYTES
    return raw, processed


def should_defer(images: Sequence[object], config: PreprocessConfig, transport: str, cuda_available: bool) -> bool:
    """One decision for the request: defer iff transport is cpu, CUDA is there and raw <= processed bytes."""
    if not images or transport != "cpu" or not cuda_available:
        return False
    if not all(is_deferrable_input(img) for img in images):
        return False
    raw, processed = payload_bytes(images, config)  # type: ignore[arg-type]
    return raw <= processed


def should_defer_per_image(
    images: Sequence[object], config: PreprocessConfig, transport: str, cuda_available: bool
) -> list[bool]:
    """3d3194f6c+: the same gate called with one image at a time."""
    return [should_defer([img], config, transport, cuda_available) for img in images]


def defer_decisions(
    images: Sequence[object],
    config: PreprocessConfig,
    *,
    policy: Policy | str = PR_33921,
    transport: str = "cpu",
    cuda_available: bool = True,
    gate_path: str | None = None,
) -> list[bool]:
    """One decision per image at the ``policy``'s call site ``gate_path`` (None: its default one): the
    request-wide answer repeated, or per image (the 3d3194f6c+ artifact path)."""
    policy = get_policy(policy)
    _, per_image = policy.gate_path(gate_path)
    if not policy.defer_enabled:
        return [False] * len(images)
    if per_image:
        return should_defer_per_image(images, config, transport, cuda_available)
    return [should_defer(images, config, transport, cuda_available)] * len(images)
