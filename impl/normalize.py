"""Zero pad, scale/bias normalization and NaViT patchify (semantics §3.5), the torch fallback form.

Upstream runs a Triton kernel on contiguous CUDA input and this torch form
(``F.pad`` + ``addcmul`` + permute) everywhere else; deferlab only has the
torch form, on every device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def normalization_tensors(
    mean: Sequence[float], std: Sequence[float], device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, bias), each float32 (1, 3, 1, 1): ``1 / (255 std)`` and ``-mean / std`` in Python floats."""
    scale = [1.0 / (255.0 * float(s)) for s in std]
    bias = [-float(m) / float(s) for m, s in zip(mean, std, strict=True)]
    shape = (1, len(scale), 1, 1)
    return (
        torch.tensor(scale, dtype=torch.float32, device=device).view(shape),
        torch.tensor(bias, dtype=torch.float32, device=device).view(shape),
    )


def pad_bottom_right(x: torch.Tensor, padded_h: int, padded_w: int) -> torch.Tensor:
    """Zero-pad a (B, C, H, W) batch at the bottom and right, in pixel space (before normalizing)."""
    pad_h, pad_w = padded_h - x.shape[-2], padded_w - x.shape[-1]
    if pad_h < 0 or pad_w < 0:
        raise ValueError(f"image {tuple(x.shape[-2:])} is larger than its padded size {(padded_h, padded_w)}")
    if pad_h == 0 and pad_w == 0:
        return x
    return F.pad(x, (0, pad_w, 0, pad_h), value=0.0)


def normalize(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``addcmul(bias, x, scale)``: one multiply-add per element in float32."""
    return torch.addcmul(bias, x, scale)


def patchify(x: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, gh*p, gw*p) to (B, gh*gw, C, p, p): grid row-major, then channel, row, column."""
    b, c, h, w = x.shape
    p = patch_size
    gh, gw = h // p, w // p
    return x.reshape(b, c, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c, p, p)


def normalize_and_patchify(
    x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, patch_size: int, padded_h: int, padded_w: int
) -> torch.Tensor:
    """Pad, normalize, patchify a resized float (B, 3, H, W) batch to (B, gh*gw, 3, p, p)."""
    return patchify(normalize(pad_bottom_right(x, padded_h, padded_w), scale, bias), patch_size)
