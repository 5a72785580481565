"""deferlab's front-door validation (the HARDENED policy): reject inputs upstream misreads, before any work.

Decisions (semantics §3.1, §4 show where each is misread upstream):

* Only PIL images and torch tensors (TypeError otherwise); the request is a
  list or tuple of them.
* Tensors: dtype uint8 (the gate silently keeps float input eager and the
  deferred stager rejects it late); exactly 3 dims in CHW (a 2-D tensor
  makes the gate raise IndexError); ``shape[0]`` in {1, 3, 4} (other counts
  are staged with no check and composited as garbage). A tensor whose last
  dim is in {1, 3, 4} while ``shape[0]`` is not looks HWC and is rejected
  with a hint to permute; when both ends are in {1, 3, 4} (e.g. (3, 8, 3))
  the layout is ambiguous and CHW, the documented contract, is assumed.
* PIL modes (`reference.system.contract.ACCEPTED_MODES`): accepted are those PIL converts to RGB/RGBA losslessly for
  8-bit content: 1, L, P, LA, PA, RGB, RGBA, RGBX, CMYK, YCbCr. Rejected:
  ``RGBa`` / ``La`` (premultiplied alpha whose lower-case band name hides it
  from the alpha predicate, so alpha is dropped and colours stay
  premultiplied), ``I;16*``, ``I`` and ``F`` (wide-range values clipped to
  255 by the conversion), and every other mode (not stageable).
* A ``transparency`` key must have a form Pillow's conversion accepts for
  the mode, else the producer fails later naming no input: P takes bytes (an
  alpha table) or an int index 0..255; 1 and L take an int or a 3-tuple of
  ints. RGB keys are ignored by staging (never promoted) and pass.
* No zero-size image; width * height at most ``config.max_pixels``.
"""

from __future__ import annotations

import torch
from PIL import Image

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.contract import ACCEPTED_MODES
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.validate import check_image_size

_CHANNELS = (1, 3, 4)


def _check_tensor(i: int, x: torch.Tensor) -> tuple[int, int]:
    if x.dtype != torch.uint8:
        raise InputValueError(f"images[{i}]: tensor dtype {x.dtype} is not accepted; pass raw uint8 pixels (0..255)")
    if x.dim() != 3:
        raise InputValueError(
            f"images[{i}]: tensor of shape {tuple(x.shape)} has {x.dim()} dims; expected 3 dims (C, H, W) "
            "with C in {1, 3, 4} (use x.unsqueeze(0) for a 2-D grayscale image)"
        )
    c, h, w = x.shape
    if c not in _CHANNELS:
        hint = " It looks like HWC: pass x.permute(2, 0, 1)." if w in _CHANNELS else ""
        raise InputValueError(
            f"images[{i}]: tensor of shape {tuple(x.shape)} has {c} channels in dim 0; expected (C, H, W) "
            f"with C in {{1, 3, 4}}.{hint}"
        )
    return int(w), int(h)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_transparency(i: int, image: Image.Image) -> None:
    if "transparency" not in image.info:
        return
    key = image.info["transparency"]
    if image.mode == "P":
        if isinstance(key, bytes) or (_is_int(key) and 0 <= key <= 255):
            return
        accepted = "bytes (an alpha table) or an int palette index 0..255"
    elif image.mode in ("1", "L"):
        if _is_int(key) or (isinstance(key, tuple) and len(key) == 3 and all(_is_int(v) for v in key)):
            return
        accepted = "an int grey level (or a 3-tuple of ints)"
    else:
        return
    raise InputValueError(
        f"images[{i}]: PIL mode {image.mode!r} has info['transparency']={key!r}, which cannot be applied; "
        f"accepted for this mode: {accepted}"
    )


def _check_pil(i: int, image: Image.Image) -> tuple[int, int]:
    if image.mode not in ACCEPTED_MODES:
        raise InputValueError(
            f"images[{i}]: PIL mode {image.mode!r} cannot be staged faithfully (premultiplied alpha or "
            f"values outside 0..255); accepted modes: {', '.join(ACCEPTED_MODES)}"
        )
    _check_transparency(i, image)
    return image.size


def validate_images(images: object, config: PreprocessConfig) -> None:
    """Raise TypeError / ValueError naming the first bad image, what is wrong and what is accepted."""
    if not isinstance(images, (list, tuple)):
        raise InputTypeError(
            f"images must be a list or tuple of PIL images / uint8 tensors, got {type(images).__name__}"
        )
    for i, image in enumerate(images):
        if isinstance(image, torch.Tensor):
            width, height = _check_tensor(i, image)
        elif isinstance(image, Image.Image):
            width, height = _check_pil(i, image)
        else:
            raise InputTypeError(f"images[{i}] must be a PIL.Image.Image or a torch.Tensor, got {type(image).__name__}")
        check_image_size(f"images[{i}]", width, height, config.max_pixels, "config.max_pixels")
