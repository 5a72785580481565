"""The Kimi-K3 checkpoint's own image processor (semantics §11, §11.5): what the model was trained on.

A second oracle beside `reference.oracle.pipeline` (SGLang's serving
semantics). The checkpoint's processor hands images to Pillow, so this module
calls Pillow where it does (``resize``, ``convert``): Pillow's rules *are* the
trained semantics here, pinned to Pillow 13.0.0 (its bicubic pass order,
semantics §13.4), and are deliberately not re-implemented. Everything else
(the composite, padding, normalization, layout) is NumPy.

Per image: the §3.2 resize config on the original size, then, with fill stage
``after_resize`` (Kimi-K3's),
``image.resize((new_w, new_h), BICUBIC)`` in the image's native mode (Pillow
resizes ``1`` and ``P`` NEAREST, ``LA``/``RGBA`` premultiplied, keeps
``info``, returns a copy at the same size) followed by the composite; with
``before_resize`` the composite runs on the original and the RGB result is
resized. Then HWC uint8, zero padding bottom/right (`levels`), the
checkpoint's normalization (§11.3) and the patch layout of §3.5.

The composite (§11.1): no background config -> ``convert("RGB")``; mode
``RGB`` -> unchanged (a ``transparency`` key is ignored); no ``"A"`` in
``getbands()`` and no ``transparency`` key -> ``convert("RGB")``; otherwise
``convert("RGBA")`` and ``a*rgb + (1 - a)*bg`` in float32 with ``a =
alpha/255``, truncated by ``astype(uint8)``. What that means per mode
(Pillow 13, measured; tests in ``tests/reference/test_checkpoint_modes.py``):

* ``RGBA``, ``LA``, ``PA``: composited. ``PA`` is not among the modes Pillow
  resizes NEAREST: with ``after_resize`` it is resized bicubic (indices
  included) and the result has *no palette* (Pillow 13.0.0), so every colour converts to
  black and only the resized alpha is left: black over the background.
* ``LAB``: its ``A`` (the a* axis) counts as a band named "A"; converted to
  RGBA with alpha 255, so the composite leaves it as its RGB conversion.
* ``RGBa``, ``La``: a lower-case ``a`` is not ``"A"``. ``RGBa`` becomes RGB
  (unpremultiplied, alpha dropped, nothing composited) unless it carries a
  key, then RGBA with its own alpha, composited. ``La`` has no converter in
  Pillow 13 (either target): refused.
* Keyed ``P``, ``1``, ``L``, ``I``, ``I;16``: RGBA through the key, which
  ``after_resize`` applies to the *resized* image (``info`` survives the
  resize): ``P`` and ``1`` keep their values (NEAREST), ``L``/``I``/``I;16``
  key whatever resized level equals the key. A key form Pillow cannot apply
  (a tuple on ``P``, bytes on ``L``) is refused. ``F``, ``I;16L/B/N``,
  ``RGBX``, ``CMYK``, ``YCbCr`` and ``HSV`` take the RGBA route with a key,
  but Pillow ignores it (alpha 255): the output equals the unkeyed one.

Inputs: PIL images of any mode, or uint8 NumPy arrays (H, W, C) with C in
{1, 3, 4}, made L / RGB / RGBA by channel count (§11.4; a 2-D array is
refused: the channel count is the rule). Anything else, an empty image, or
more than ``max_pixels`` pixels is refused before any pixel work; where
Pillow refuses, an `InputValueError` says so, rather than an answer the
checkpoint would never give.

``fill_stage=None`` is read as the processor dataclass's own default,
``before_resize`` (semantics §2.1): a config that omits the key gets what the
processor itself does without it (Kimi-K3's published config states
``after_resize``, and so does its profile). `fill_stage` says which stage a
config gets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from deferlab.reference.oracle import navit
from deferlab.reference.oracle.background import background_values
from deferlab.reference.oracle.normalize import normalize_checkpoint, patchify
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig, ResizeConfig
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.validate import check_image_size, type_name

__all__ = [
    "DEFAULT_FILL_STAGE",
    "composite",
    "fill_stage",
    "levels",
    "normalization_table",
    "num_tokens",
    "preprocess",
    "resize_config",
]

# What ``fill_stage=None`` means here: the processor dataclass's default (semantics §2.1).
DEFAULT_FILL_STAGE = "before_resize"  # the checkpoint processor dataclass's default (semantics §2.1)
_ACCEPTED = "a PIL.Image.Image, or a uint8 NumPy array (H, W, C) with C in {1, 3, 4}"
_PILLOW_REFUSALS = (ValueError, TypeError, OverflowError, OSError)
_T = TypeVar("_T")


def _check_config(cfg: Any) -> PreprocessConfig:
    if not isinstance(cfg, PreprocessConfig):
        raise InputTypeError(
            f"cfg must be a PreprocessConfig (see reference.system.profiles.profile), got {type_name(cfg)}"
        )
    return cfg


def fill_stage(cfg: PreprocessConfig) -> str:
    """The stage the checkpoint composites at for ``cfg``: its ``fill_stage``, or the processor's own default
    (``before_resize``) when the config does not say: a config without the key gets what the processor does."""
    return _check_config(cfg).fill_stage or DEFAULT_FILL_STAGE


def resize_config(width: int, height: int, cfg: PreprocessConfig) -> ResizeConfig:
    """The §3.2 decision on the original size: `reference.oracle.navit.resize_config`, reused as is.

    That function is exactly the formula the checkpoint evaluates, with no
    token-cap loop (the official K3 processor has none). The checkpoint adds
    asserts that can only fire when ``S*p`` is not a multiple of ``m*p``;
    they are not modelled (their wording is not published in our sources).
    """
    return navit.resize_config(width, height, _check_config(cfg))


def num_tokens(width: int, height: int, cfg: PreprocessConfig) -> int:
    """Image tokens the prompt gets: ``fixed_output_tokens`` if set, else (Hp/factor)*(Wp/factor)."""
    return resize_config(width, height, cfg).num_tokens


def _as_pil(name: str, image: Any, cfg: PreprocessConfig) -> Image.Image:
    """Validate one input and return it as the PIL image the checkpoint would see (never mutated)."""
    if isinstance(image, Image.Image):
        width, height = image.size
    elif isinstance(image, np.ndarray):
        if image.dtype != np.uint8:
            raise InputValueError(f"{name} is a NumPy array of dtype {image.dtype}; accepted: {_ACCEPTED}")
        if image.ndim != 3 or image.shape[2] not in (1, 3, 4):
            hint = " (add a channel axis: arr[..., None])" if image.ndim == 2 else ""
            raise InputValueError(f"{name} has shape {image.shape}{hint}; accepted: {_ACCEPTED}")
        height, width = int(image.shape[0]), int(image.shape[1])
    else:
        raise InputTypeError(f"{name} is a {type_name(image)}; accepted: {_ACCEPTED}")
    check_image_size(name, width, height, cfg.max_pixels)
    if isinstance(image, Image.Image):
        return image
    hwc = np.ascontiguousarray(image[..., 0] if image.shape[2] == 1 else image)
    return Image.fromarray(hwc)  # (H, W) -> L, (H, W, 3) -> RGB, (H, W, 4) -> RGBA


def _pillow(name: str, image: Image.Image, what: str, call: Callable[[], _T]) -> _T:
    """Run one Pillow call the checkpoint makes; Pillow's refusal becomes deferlab's, naming the input."""
    try:
        return call()
    except _PILLOW_REFUSALS as e:
        raise InputValueError(
            f"{name} ({image.mode} {image.size[0]}x{image.size[1]}): the checkpoint's processor refuses it: "
            f"Pillow's {what} raises {type(e).__name__}: {e}"
        ) from e


def composite(image: Image.Image, background: BackgroundConfig | None, *, name: str = "image") -> Image.Image:
    """The checkpoint's background composite (semantics §11.1): an RGB PIL image.

    The rules are the module docstring's. The blend is float32 from uint8
    operands (``alpha / 255`` divided in float32, which equals the float64
    quotient rounded to float32 for all 256 levels), and ``astype(uint8)``
    truncates; computed once per image, the background as uint8 levels of
    `background_values` (the patterns and chessboard phase of §3.4).
    """
    if not isinstance(image, Image.Image):
        raise InputTypeError(f"{name} must be a PIL.Image.Image, got {type_name(image)}")
    if background is not None and not isinstance(background, BackgroundConfig):
        raise InputTypeError(f"background must be a BackgroundConfig or None, got {type_name(background)}")
    if background is None:
        return _pillow(name, image, 'convert("RGB")', lambda: image.convert("RGB"))
    if image.mode == "RGB":
        return image
    if "A" not in image.getbands() and "transparency" not in image.info:
        return _pillow(name, image, 'convert("RGB")', lambda: image.convert("RGB"))
    rgba = np.asarray(_pillow(name, image, 'convert("RGBA")', lambda: image.convert("RGBA")))
    h, w = rgba.shape[:2]
    back = background_values(h, w, background).astype(np.uint8)[..., None]  # the same level in every channel
    a = rgba[..., 3:4].astype(np.float32) / np.float32(255.0)  # float32 under NumPy 1's casting rules too
    blended = a * rgba[..., :3]  # float32 x uint8 -> float32, as the checkpoint's expression
    blended += np.multiply(1 - a, back, dtype=np.float32)
    return Image.fromarray(blended.astype(np.uint8))


def _resize(name: str, image: Image.Image, rc: ResizeConfig) -> Image.Image:
    size = (rc.new_width, rc.new_height)
    return _pillow(name, image, f"resize({size}, BICUBIC)", lambda: image.resize(size, Image.Resampling.BICUBIC))


def _levels(name: str, image: Image.Image, cfg: PreprocessConfig, rc: ResizeConfig) -> np.ndarray:
    if fill_stage(cfg) == "before_resize":
        rgb = _resize(name, composite(image, cfg.background, name=name), rc)
    else:
        rgb = composite(_resize(name, image, rc), cfg.background, name=name)
    pixels = np.asarray(rgb)
    if rgb.mode != "RGB" or pixels.shape != (rc.new_height, rc.new_width, 3):  # pragma: no cover - Pillow contract
        raise AssertionError(f"{name}: expected RGB {rc.new_width}x{rc.new_height}, got {rgb.mode} {pixels.shape}")
    out = np.zeros((rc.padded_height, rc.padded_width, 3), dtype=np.uint8)
    out[: rc.new_height, : rc.new_width] = pixels
    return out


def levels(image: Any, cfg: PreprocessConfig) -> np.ndarray:
    """uint8 (padded_h, padded_w, 3): ``image`` resized, composited and zero-padded, before normalization.

    A public step because served-vs-trained differences split into levels
    (here) and float ulps (normalization) in the skew table.
    """
    cfg = _check_config(cfg)
    pil = _as_pil("image", image, cfg)
    return _levels("image", pil, cfg, resize_config(pil.size[0], pil.size[1], cfg))


def normalization_table(cfg: PreprocessConfig) -> np.ndarray:
    """(3, 256) float32: `normalize_checkpoint` (semantics §11.3) of every level, per channel.

    Normalization is elementwise, so looking levels up in this table is the
    checkpoint's arithmetic bit for bit, without float64 temporaries per pixel.
    """
    cfg = _check_config(cfg)
    every_level = np.broadcast_to(np.arange(256, dtype=np.uint8), (3, 1, 256))
    return normalize_checkpoint(every_level, cfg.image_mean, cfg.image_std)[:, 0, :]


def preprocess(images: Sequence[Any], cfg: PreprocessConfig) -> tuple[np.ndarray, np.ndarray]:
    """(pixel_values float32 (N, 3, p, p), grid_thws int64 (n, 3)): the checkpoint's output, images in order.

    Every input is validated before any is resized, so a bad one fails
    before any work. Each image's rows are its `levels`, normalized as the
    checkpoint does (`normalization_table`) and laid out by `patchify`;
    its grid row is [1, padded_h/p, padded_w/p]. Empty input gives (0, 3, p, p)
    and (0, 3).
    """
    cfg = _check_config(cfg)
    if isinstance(images, str | bytes) or not isinstance(images, Sequence):
        raise InputTypeError(f"images must be a sequence (list/tuple) of images, got {type_name(images)}")
    pils = [_as_pil(f"images[{i}]", im, cfg) for i, im in enumerate(images)]
    p = cfg.patch_size
    configs = [resize_config(im.size[0], im.size[1], cfg) for im in pils]
    pixel_values = np.empty((sum(rc.num_patches for rc in configs), 3, p, p), dtype=np.float32)
    table = normalization_table(cfg) if pils else None
    start = 0
    for i, (im, rc) in enumerate(zip(pils, configs, strict=True)):
        hwc = _levels(f"images[{i}]", im, cfg, rc)
        normalized = np.empty((3, rc.padded_height, rc.padded_width), dtype=np.float32)
        for c in range(3):
            np.take(table[c], hwc[..., c], out=normalized[c])
        pixel_values[start : start + rc.num_patches] = patchify(normalized, p)
        start += rc.num_patches
    grids = np.array([rc.grid_thw for rc in configs], dtype=np.int64).reshape(-1, 3)
    return pixel_values, grids
