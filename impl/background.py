"""Transparent-background compositing after the resize (semantics §3.4), with torch ops as upstream.

The alpha is ``x[:, 3:4] / 255.0``: on CUDA PyTorch evaluates a tensor divided
by a Python scalar as a multiply by the reciprocal, on the CPU as a true
division; we keep the upstream expression so that device difference is real
and observable rather than hidden.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from deferlab.reference.system.config import BackgroundConfig

_SOLID = {"white": 255.0, "black": 0.0, "gray": 128.0}


def _as_dict(bg_config: Mapping[str, Any] | BackgroundConfig | None) -> Mapping[str, Any] | None:
    if isinstance(bg_config, BackgroundConfig):
        return bg_config.to_dict()
    return bg_config


def background_tensor(
    bg_config: Mapping[str, Any] | BackgroundConfig, height: int, width: int, device: torch.device | str
) -> torch.Tensor:
    """The (3, H, W) float32 background of a config dict (checkpoint keys; a missing pattern is black)."""
    cfg = _as_dict(bg_config)
    pattern = cfg.get("pattern", "black")
    if pattern == "chessboard":
        square = int(cfg.get("chessboard_square_size", 16))
        white = float(cfg.get("chessboard_white_value", 255))
        gray = float(cfg.get("chessboard_gray_value", 200))
        top_left = cfg.get("chessboard_square_on_top_left", True)
        ys = torch.arange(height, device=device).unsqueeze(1) // square
        xs = torch.arange(width, device=device).unsqueeze(0) // square
        parity = (ys + xs) % 2
        plane = torch.where(parity == (1 if top_left else 0), gray, white).to(torch.float32)
        return plane.unsqueeze(0).expand(3, height, width)
    if pattern in _SOLID:
        return torch.full((3, height, width), _SOLID[pattern], dtype=torch.float32, device=device)
    raise ValueError(f"Invalid background pattern: {pattern}")


def fill_transparent_bg(x: torch.Tensor, bg_config: Mapping[str, Any] | BackgroundConfig | None) -> torch.Tensor:
    """Composite a resized float (B, C, H, W) batch onto its background; 3-channel input passes through.

    4+ channels without a config: alpha dropped (a slice, as upstream). Else
    ``floor(clamp(a * rgb + (1 - a) * bg, 0, 255))`` as four float32 ops.
    """
    if x.shape[1] == 3:
        return x
    rgb = x[:, :3]
    cfg = _as_dict(bg_config)
    if cfg is None:
        return rgb
    bg = background_tensor(cfg, x.shape[2], x.shape[3], x.device)
    alpha = (x[:, 3:4] / 255.0).clamp(0.0, 1.0)
    return (alpha * rgb + (1.0 - alpha) * bg).clamp(0.0, 255.0).floor_()
