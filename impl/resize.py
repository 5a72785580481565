"""Antialiased bicubic resize (semantics §3.3) and the per-source-shape sub-batching of semantics §3.6."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def resize_bicubic_if_needed(x: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    """Resize a (B, C, H, W) batch to (out_h, out_w) in float32: aa bicubic, round half even, clamp.

    Already at the target size: a dtype-only cast, no rounding and no clamp
    (upstream's shortcut; the values are integer levels already).
    """
    x = x.float()
    if tuple(x.shape[-2:]) == (out_h, out_w):
        return x
    if x.device.type == "cpu" and out_w == 1:
        out = _cpu_single_column(x, out_h)
    else:
        out = F.interpolate(x, size=(out_h, out_w), **_AA_BICUBIC)
    return out.round_().clamp_(0.0, 255.0)


_AA_BICUBIC = {"mode": "bicubic", "align_corners": False, "antialias": True}


def _cpu_single_column(x: torch.Tensor, out_h: int) -> torch.Tensor:
    """Resize to width 1 on the CPU as two separable passes, the height pass on a duplicated column.

    torch 2.13's CPU antialiased interpolate returns the first output row for
    every row whenever the output width is 1 and the height changes (found by
    ``test_resize_matches_reference``; pinned in ``test_torch_cpu_width_one_defect``).
    The filter is separable (width pass first, into float32, as torch does it),
    so running the width pass alone, then the height pass on a column
    duplicated to width 2 (kept unchanged, hence untouched) and taking one
    column computes the same filter.
    """
    b, c, h, w = x.shape
    if w != 1:
        x = F.interpolate(x, size=(h, 1), **_AA_BICUBIC)
    if h == out_h:
        return x
    wide = x.expand(b, c, h, 2).contiguous()
    return F.interpolate(wide, size=(out_h, 2), **_AA_BICUBIC)[..., :1].contiguous()


def source_shape_batches(images: Sequence[torch.Tensor]) -> list[list[int]]:
    """Positions of ``images`` grouped by identical (shape, dtype), in first-seen order."""
    groups: dict[tuple[tuple[int, ...], torch.dtype], list[int]] = {}
    for i, img in enumerate(images):
        groups.setdefault((tuple(img.shape), img.dtype), []).append(i)
    return list(groups.values())


def resize_sub_batch(images: Sequence[torch.Tensor], out_h: int, out_w: int) -> torch.Tensor:
    """Resize same-shape CHW images as one (k, C, H, W) batch (one interpolate call)."""
    batch = images[0].unsqueeze(0) if len(images) == 1 else torch.stack(list(images), dim=0)
    return resize_bicubic_if_needed(batch, out_h, out_w)
