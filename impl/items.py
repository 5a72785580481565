"""The multimodal item and the deferred-config types that travel from producer to consumer (semantics §5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from deferlab.reference.system.contract import GRID_THWS_KEY, IMAGE_GRID_THW_KEY


@dataclass
class MultimodalItem:
    """One image of a request: its feature, per-model data (grid, deferred config) and prompt offsets.

    Mutable on purpose: upstream's scheduler replaces ``feature`` in place
    when it moves items to a device.
    """

    feature: Any
    model_specific_data: dict[str, Any] = field(default_factory=dict)
    offsets: list[tuple[int, int]] | None = None
    modality: str = "image"


@dataclass(frozen=True)
class KimiK3DeferredPreprocessing:
    """The released (8554d9a5b+) deferred config: a frozen dataclass that always carries ``backend``."""

    backend: Literal["gpu", "cpu"]
    image_mean: list[float]
    image_std: list[float]
    transparent_bg_config: dict[str, Any] | None
    resize_config: dict[str, int]


def item_grid(item: MultimodalItem) -> torch.Tensor:
    """The item's (1, 3) grid: ``image_grid_thw``, else ``grid_thws``; exactly one grid per item."""
    msd = item.model_specific_data
    grid = msd.get(IMAGE_GRID_THW_KEY)
    if grid is None:
        grid = msd[GRID_THWS_KEY]
    grid = torch.as_tensor(grid)
    if grid.dim() != 2 or grid.shape[0] != 1:
        raise ValueError(
            "Kimi-K3 expects one vision grid per MultimodalDataItem; split aggregated encoder inputs "
            f"before get_image_feature() (got grid of shape {tuple(grid.shape)})"
        )
    return grid
