"""Producer side of the deferred contract (semantics §5): what each start path writes into an item.

Kept apart from `impl.consumer` on purpose, as upstream: the non-EPD processor
and the EPD encoder write the config independently, and a property checks
that every key the consumer reads was written by every producer path. Which
form each path writes is the policy's (``policy.contract``,
``policy.epd_contract``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from deferlab.impl.items import KimiK3DeferredPreprocessing, MultimodalItem
from deferlab.impl.navit import grid_thw
from deferlab.impl.staging import ImageLikeT, to_chw_uint8
from deferlab.reference.system.config import PreprocessConfig, ResizeConfig
from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY, IMAGE_GRID_THW_KEY
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.policies import ContractForm, Policy

DeferredConfig = dict[str, Any] | KimiK3DeferredPreprocessing


def deferred_config(
    config: PreprocessConfig, rc: ResizeConfig, form: ContractForm, backend: str = "gpu"
) -> DeferredConfig:
    """The deferred config in one contract form.

    ``pr-dict``: the PR's plain dict (no backend). ``epd-dict``: 418975ba6's EPD
    dict, adding ``backend`` and ``feature_layout``. ``dataclass``: the frozen
    `KimiK3DeferredPreprocessing`.
    """
    mean, std, bg = list(config.image_mean), list(config.image_std), config.transparent_bg_config
    if form == "pr-dict":
        return {"image_mean": mean, "image_std": std, "transparent_bg_config": bg, "resize_config": rc.to_dict()}
    if form == "epd-dict":
        return {
            "image_mean": mean,
            "image_std": std,
            "transparent_bg_config": bg,
            "resize_config": rc.to_dict(),
            "backend": backend,
            "feature_layout": "chw" if backend == "gpu" else "raw",
        }
    if form == "dataclass":
        return KimiK3DeferredPreprocessing(
            backend=backend, image_mean=mean, image_std=std, transparent_bg_config=bg, resize_config=rc.to_dict()
        )
    raise InputValueError(f"unknown contract form {form!r}; known: pr-dict, epd-dict, dataclass")


def deferred_item(
    feature: Any, rc: ResizeConfig, config: PreprocessConfig, form: ContractForm, backend: str = "gpu"
) -> MultimodalItem:
    """One deferred item: the raw feature, its int64 [[1, gh, gw]] grid and the deferred config."""
    grid = torch.tensor([grid_thw(rc, config.patch_size)], dtype=torch.int64)
    msd = {IMAGE_GRID_THW_KEY: grid, DEFERRED_PREPROCESSING_KEY: deferred_config(config, rc, form, backend)}
    return MultimodalItem(feature=feature, model_specific_data=msd)


def build_deferred_items(
    images: Sequence[ImageLikeT], resize_configs: Sequence[ResizeConfig], config: PreprocessConfig, policy: Policy
) -> list[MultimodalItem]:
    """Non-EPD producer (the processor): uint8 CHW CPU features, contract form ``policy.contract``.

    The feature is made contiguous on the CPU, as upstream's ``.cpu()`` after
    hashing leaves a CPU tensor to ship.
    """
    return [
        deferred_item(to_chw_uint8(img).cpu().contiguous(), rc, config, policy.contract)
        for img, rc in zip(images, resize_configs, strict=True)
    ]


def encoder_media(media: Sequence[Any]) -> list[Any]:
    """The images of an EPD encoder request: a dict media item must be ``{"type": "image", "image": ...}``.

    Why: the encoder is handed media items as well as bare images; one of another type (a video) or
    without its image is refused with a ValueError naming it, never read as an image (semantics §17.2).
    """
    images = []
    for item in media:
        if isinstance(item, dict):
            if item.get("type") != "image" or "image" not in item:
                raise ValueError(f"Unsupported Kimi-K3 encoder media item: {item}")
            item = item["image"]
        images.append(item)
    return images


def build_epd_items(
    images: Sequence[ImageLikeT],
    resize_configs: Sequence[ResizeConfig],
    config: PreprocessConfig,
    policy: Policy,
    backend: str = "gpu",
) -> list[MultimodalItem]:
    """EPD producer (encoder side), contract form ``policy.epd_contract``.

    ``backend="gpu"`` stages uint8 CHW features; ``"cpu"`` keeps the raw
    decoded image (PIL or tensor) as upstream's EPD CPU path does.
    """
    if backend not in ("gpu", "cpu"):
        raise InputValueError(f"backend must be 'gpu' or 'cpu', got {backend!r}")
    items = []
    for img, rc in zip(images, resize_configs, strict=True):
        feature = to_chw_uint8(img).cpu().contiguous() if backend == "gpu" else img
        items.append(deferred_item(feature, rc, config, policy.epd_contract, backend))
    return items


def eager_item(patches: torch.Tensor, grid: torch.Tensor) -> MultimodalItem:
    """One eager item: the image's float32 patches and its grid, no deferred config."""
    return MultimodalItem(feature=patches, model_specific_data={IMAGE_GRID_THW_KEY: grid.reshape(1, 3).clone()})
