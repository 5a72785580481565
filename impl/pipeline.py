"""The batched preprocessing pipeline (semantics §3.3-§3.6): group, resize, composite, pad, normalize, patchify.

Both the eager producer and the deferred owner call `run_pipeline`; they
differ only in the stager and in who runs it. Grouping follows upstream:
by target (new_h, new_w, padded_h, padded_w), then by identical source
(shape, dtype) for one interpolate call, compositing per resized sub-batch,
results back in the caller's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from PIL import Image

from deferlab.impl.background import fill_transparent_bg
from deferlab.impl.device import resolve_device
from deferlab.impl.navit import grid_thw, navit_resize_config
from deferlab.impl.normalize import normalization_tensors, normalize_and_patchify
from deferlab.impl.resize import resize_sub_batch, source_shape_batches
from deferlab.impl.staging import image_dimensions, to_chw_uint8
from deferlab.reference.system.config import PreprocessConfig, ResizeConfig
from deferlab.reference.system.errors import InputTypeError, InputValueError

ImageLike = Image.Image | torch.Tensor
Stager = Callable[[ImageLike], torch.Tensor]
PostResize = Callable[[torch.Tensor], torch.Tensor]
GroupKey = tuple[int, int, int, int]


def target_key(rc: ResizeConfig) -> GroupKey:
    """(new_h, new_w, padded_h, padded_w): images sharing it are resized and patchified together."""
    return (rc.new_height, rc.new_width, rc.new_height + rc.pad_height, rc.new_width + rc.pad_width)


def group_by_target(resize_configs: Sequence[ResizeConfig]) -> dict[GroupKey, list[int]]:
    """Image positions per target key, keys and positions in first-seen order."""
    groups: dict[GroupKey, list[int]] = {}
    for i, rc in enumerate(resize_configs):
        groups.setdefault(target_key(rc), []).append(i)
    return groups


def resize_group(staged: Sequence[torch.Tensor], out_h: int, out_w: int, post_resize: PostResize) -> torch.Tensor:
    """Resize one target group by source-shape sub-batches, composite each sub-batch, restore group order."""
    resized: list[torch.Tensor | None] = [None] * len(staged)
    for sub in source_shape_batches(staged):
        part = post_resize(resize_sub_batch([staged[j] for j in sub], out_h, out_w))
        for k, j in enumerate(sub):
            resized[j] = part[k : k + 1]
    return torch.cat(resized, dim=0)


def run_pipeline(
    images: Sequence[ImageLike],
    resize_configs: Sequence[ResizeConfig],
    scale: torch.Tensor,
    bias: torch.Tensor,
    patch_size: int,
    stage: Stager,
    post_resize: PostResize,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(pixel_values float32 (sum gh*gw, 3, p, p) in caller order, grid_thws int64 (N, 3) on the CPU)."""
    if len(images) != len(resize_configs):
        raise InputValueError(f"got {len(images)} images but {len(resize_configs)} resize configs")
    if not images:
        return torch.empty((0, 3, patch_size, patch_size), device=scale.device), torch.empty((0, 3), dtype=torch.int64)
    per_image: list[torch.Tensor | None] = [None] * len(images)
    for (new_h, new_w, padded_h, padded_w), idxs in group_by_target(resize_configs).items():
        batch = resize_group([stage(images[i]) for i in idxs], new_h, new_w, post_resize)
        patches = normalize_and_patchify(batch, scale, bias, patch_size, padded_h, padded_w)
        for k, i in enumerate(idxs):
            per_image[i] = patches[k]
    grids = torch.tensor([grid_thw(rc, patch_size) for rc in resize_configs], dtype=torch.int64)
    return torch.cat(per_image, dim=0), grids


def resize_configs_for(images: Sequence[ImageLike], config: PreprocessConfig) -> list[ResizeConfig]:
    """One NaViT decision per image, from its (width, height) read as upstream reads it."""
    return [navit_resize_config(*image_dimensions(img), config) for img in images]


def preprocess_with(
    images: Sequence[ImageLike],
    resize_configs: Sequence[ResizeConfig],
    mean: Sequence[float],
    std: Sequence[float],
    bg_config: Mapping[str, Any] | None,
    patch_size: int,
    device: torch.device,
    stage: Stager | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`run_pipeline` with normalization tensors and the compositing hook built from plain values."""
    scale, bias = normalization_tensors(mean, std, device)
    stager = stage if stage is not None else (lambda img: to_chw_uint8(img, device))
    return run_pipeline(
        images, resize_configs, scale, bias, patch_size, stager, lambda x: fill_transparent_bg(x, bg_config)
    )


def preprocess(
    images: Sequence[ImageLike], config: PreprocessConfig, device: str | torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Preprocess a request's images with the uint8 stager: (pixel_values float32, grid_thws int64).

    The torch twin of ``reference.oracle.pipeline.preprocess``; runs on ``device``
    (CUDA when present if None).
    """
    if not isinstance(config, PreprocessConfig):
        raise InputTypeError(f"config must be a reference.system.config.PreprocessConfig, got {type(config).__name__}")
    images = list(images)
    dev = resolve_device(device)
    return preprocess_with(
        images,
        resize_configs_for(images, config),
        config.image_mean,
        config.image_std,
        config.transparent_bg_config,
        config.patch_size,
        dev,
    )
