"""Staging a decoded image to a uint8 CHW tensor (semantics §3.1), as upstream does it.

Two stagers exist upstream and both are reproduced, because they disagree:
`to_chw_uint8` (deferred producer and owner; rejects non-uint8 tensors) and
`to_eager_chw` (the eager tokenizer path, ``_k3_to_cuda_chw``; no dtype check,
so float tensors flow through). Tensors are read as CHW whatever their real
layout: that is the upstream behaviour the properties must be able to see.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

DeviceLike = str | torch.device | None
ImageLikeT = Image.Image | torch.Tensor


def has_alpha(image: Image.Image, *, promote_rgb_transparency: bool = False) -> bool:
    """SGLang's (and the checkpoint's) alpha predicate for a PIL image.

    ``promote_rgb_transparency`` reproduces the pre-PR eager path, which also
    promoted an RGB image carrying a ``transparency`` key to RGBA.
    """
    if image.mode == "RGB" and not promote_rgb_transparency:
        return False
    return "A" in image.getbands() or "transparency" in image.info


def pil_to_chw_uint8(image: Image.Image, *, promote_rgb_transparency: bool = False) -> torch.Tensor:
    """Convert with PIL's own ``convert`` to RGB or RGBA and view it as CHW (non-contiguous, like upstream)."""
    mode = "RGBA" if has_alpha(image, promote_rgb_transparency=promote_rgb_transparency) else "RGB"
    arr = np.array(image.convert(mode), dtype=np.uint8, copy=True)
    return torch.from_numpy(arr).permute(2, 0, 1)


def _expand_channels(x: torch.Tensor) -> torch.Tensor:
    """2-D becomes (1, H, W); one channel is repeated to three. No other channel check (upstream)."""
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if x.shape[0] == 1:
        x = x.repeat(3, 1, 1)
    return x


def to_chw_uint8(
    image: Image.Image | torch.Tensor, device: DeviceLike = None, *, promote_rgb_transparency: bool = False
) -> torch.Tensor:
    """The deferred stager: uint8 CHW, 3 or 4 channels for PIL input; optional single move to ``device``."""
    if isinstance(image, Image.Image):
        x = pil_to_chw_uint8(image, promote_rgb_transparency=promote_rgb_transparency)
    elif isinstance(image, torch.Tensor):
        x = image
    else:
        raise TypeError(f"image must be a PIL.Image.Image or a torch.Tensor, got {type(image).__name__}")
    if x.dtype != torch.uint8:
        raise ValueError(f"Kimi-K3 preprocessing expects raw uint8 pixels, got {x.dtype}")
    x = _expand_channels(x)
    if device is not None:
        x = x.to(device)
    return x


def to_eager_chw(
    image: Image.Image | torch.Tensor, device: DeviceLike = None, *, promote_rgb_transparency: bool = False
) -> torch.Tensor:
    """The eager stager (``_k3_to_cuda_chw``): PIL as `to_chw_uint8`; tensors moved with no dtype check."""
    if isinstance(image, Image.Image):
        return to_chw_uint8(image, device, promote_rgb_transparency=promote_rgb_transparency)
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"image must be a PIL.Image.Image or a torch.Tensor, got {type(image).__name__}")
    x = image.to(device) if device is not None else image
    return _expand_channels(x)


def image_dimensions(image: Image.Image | torch.Tensor) -> tuple[int, int]:
    """(width, height) as upstream's ``_get_image_dimensions``: a tensor is read as CHW.

    A 2-D tensor therefore raises IndexError here (``shape[2]``), as upstream.
    """
    if isinstance(image, Image.Image):
        return image.size
    return int(image.shape[2]), int(image.shape[1])


def encoder_dimensions(image: Image.Image | torch.Tensor) -> tuple[int, int]:
    """(width, height) as the EPD encoder reads them (semantics §4.3): a tensor's last two sides, so a 2-D tensor is
    an image there (staged as its one channel), unlike `image_dimensions`."""
    if isinstance(image, Image.Image):
        return image.size
    return int(image.shape[-1]), int(image.shape[-2])


def raw_channels(image: Image.Image | torch.Tensor, *, promote_rgb_transparency: bool = False) -> int:
    """Channels the gate counts: tensor ``3 if 2-D or shape[0]==1 else shape[0]``; PIL 4 if alpha else 3."""
    if isinstance(image, Image.Image):
        return 4 if has_alpha(image, promote_rgb_transparency=promote_rgb_transparency) else 3
    if image.dim() == 2 or image.shape[0] == 1:
        return 3
    return int(image.shape[0])
