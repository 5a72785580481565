"""The 3-D ``smart_resize`` of transformers' Qwen3-VL and GLM-4.1V video processors, restated (semantics §20.4).

Why a module of its own: the two processors' rules are the same (read side by side in transformers 5.24.0) at
their own factors (32 and 28), and both families' restatements (`reference.oracle.video`, `video_glm`) call it;
here neither imports the other.
"""

from __future__ import annotations

import math

from deferlab.reference.system.video import Refused


def _ratio_check(height: float, width: float) -> None:
    """Both smart_resizes refuse an aspect ratio over 200 (semantics §20.4 "Per-frame size")."""
    if max(height, width) / min(height, width) > 200:
        raise Refused(f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}")


def hf_resize_3d(
    frames: int, height: int, width: int, tf: int, factor: int, min_pixels: float, max_pixels: float
) -> tuple[int, int]:
    """transformers' Qwen3-VL video ``smart_resize`` (semantics §20.4): the budget is over round(frames / tf) * tf
    frames; fewer than ``tf`` frames is refused; a frame smaller than ``factor`` is scaled up first."""
    if frames < tf:
        raise Refused(f"t:{frames} must be larger than temporal_factor:{tf} (ValueError in smart_resize)")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    _ratio_check(height, width)
    h, w = round(height / factor) * factor, round(width / factor) * factor
    t = round(frames / tf) * tf
    if t * h * w > max_pixels:
        beta = math.sqrt((frames * height * width) / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif t * h * w < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w
