"""impl's own NaViT resize decision (semantics §3.2), written from the semantics, not shared with the reference.

Kept separate from ``reference.oracle.navit`` on purpose: the two are independent
implementations of the same formula, so a property comparing them can fail.
"""

from __future__ import annotations

import math

from deferlab.reference.system.config import PreprocessConfig, ResizeConfig


def navit_resize_config(width: int, height: int, config: PreprocessConfig) -> ResizeConfig:
    """Target size, bottom/right padding and token count for a ``width`` x ``height`` image."""
    p, m = config.patch_size, config.merge_kernel_size
    side = config.patch_limit_on_one_side
    s1 = math.sqrt(config.in_patch_limit / (max(1.0, width // p) * max(1.0, height // p)))
    scale = min(1.0, s1, side * p / width, side * p / height)
    new_w = min(max(1, int(width * scale)), side * p)
    new_h = min(max(1, int(height * scale)), side * p)
    factor = m * p
    pad_w = (factor - new_w % factor) % factor
    pad_h = (factor - new_h % factor) % factor
    tokens = config.fixed_output_tokens
    if tokens is None:
        tokens = ((new_h + pad_h) // factor) * ((new_w + pad_w) // factor)
    return ResizeConfig(new_w, new_h, pad_w, pad_h, tokens, patch_size=p)


def grid_thw(rc: ResizeConfig, patch_size: int) -> tuple[int, int, int]:
    """(1, padded_h // p, padded_w // p), as ``_grid_thw_from_resize_config``."""
    return (1, (rc.new_height + rc.pad_height) // patch_size, (rc.new_width + rc.pad_width) // patch_size)
