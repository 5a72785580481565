"""Our own ``Image.convert("RGB")`` / ``convert("RGBA")`` for every PIL mode we check.

The oracle must not check Pillow's conversions with Pillow's conversions, so
the rules of ``anchors.md`` section 3 are restated here in NumPy and applied
to raw bands read with ``np.asarray`` / ``getpalette`` / ``info`` only. The
tests prove each rule bit-equal to Pillow 13's ``convert`` on generated images
and on the corpus.

Rules (Pillow 13.0.0, each checked by ``properties/test_modes.py``):

* ``1``: non-zero -> 255. ``L``: replicated. ``I``: clipped to [0, 255].
  ``I;16`` / ``I;16L`` / ``I;16B`` / ``I;16N``: saturated (``min(v, 255)``,
  not a scale by 1/256). ``F``: ``<= 0`` -> 0, ``>= 255`` -> 255, else
  truncated (1.9 -> 1); NaN -> 0 (what Pillow's C cast gives on x86; C leaves
  it undefined).
* ``LA`` / ``PA``: grey or palette colour, alpha band kept for RGBA, dropped
  for RGB. ``P``: palette lookup; entries past the palette's length are
  opaque black.
* ``RGBA`` -> RGB drops alpha without compositing; ``RGBX`` -> RGBA gets alpha
  255 (the pad byte is not alpha).
* ``RGBa`` (premultiplied, lower-case ``a``): unpremultiplied,
  ``c = min(255, 255 * c // a)`` for ``0 < a < 255``, unchanged for a in
  {0, 255}. It has no ``"A"`` band, so it is not ``has_alpha`` and stages to
  3 channels through this RGB conversion.
* ``La``: Pillow 13 has no converter from ``La`` to L/RGB/RGBA (``ValueError:
  conversion from La to L not supported``), so upstream's staging raises for
  it. We raise the same ``ValueError`` rather than invent a rule.
* Transparency, RGBA target only (RGB ignores it): ``1``/``L``/``I``/``I;16``
  with an int key -> alpha 0 where the *converted* grey level equals the
  key's low byte (Pillow packs the key into a uint8 pixel: 300 matches 44,
  65535 matches 255, so saturated ``I;16`` pixels match a key of 65535); a
  non-int key raises ``TypeError`` as Pillow does. ``RGB`` with a 3-tuple key
  -> alpha 0 where all three channels match the key's low bytes, colour kept.
  ``P`` with bytes -> those alphas for the first ``len(bytes)`` entries (more
  than 256 raises), with an int -> alpha 0 at that index; any other kind
  raises ``ValueError``. Every other mode (``I;16L/B/N``, ``F``, ``LA``,
  ``PA``, ``RGBA``, ``RGBX``, ...) ignores the key.
* ``CMYK``, ``YCbCr``, ``LAB``, ``HSV``: colour-space conversions we do not
  re-derive; they are *delegated* to Pillow's ``convert`` (``DELEGATED_MODES``),
  so nothing about them is independently checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from reference.validate import type_name

# Colour-space modes whose conversion is delegated to Pillow's own ``convert``.
DELEGATED_MODES: frozenset[str] = frozenset({"CMYK", "YCbCr", "LAB", "HSV"})
GREY_MODES: tuple[str, ...] = ("1", "L", "I", "I;16", "I;16L", "I;16B", "I;16N", "F")
# Modes whose conversion we implement ourselves (La included: we model its failure).
OWN_MODES: frozenset[str] = frozenset(GREY_MODES + ("LA", "La", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX"))
# Grey sources for which convert("RGBA") honours an int colour key.
_KEYED_GREY_MODES = frozenset({"1", "L", "I", "I;16"})
_PALETTE_ENTRIES = 256


def _check_image(image: Any) -> Image.Image:
    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL.Image.Image, got {type_name(image)}")
    if image.mode not in OWN_MODES and image.mode not in DELEGATED_MODES:
        raise ValueError(
            f"image mode {image.mode!r} is not supported; supported: {sorted(OWN_MODES | DELEGATED_MODES)}"
        )
    if image.mode == "La":
        raise ValueError(
            "conversion from La to RGB/RGBA is not supported: Pillow 13 has no La -> L converter, "
            "so upstream's convert() raises for La images; convert to LA first"
        )
    return image


def _grey_levels(image: Image.Image) -> np.ndarray:
    """The (H, W) uint8 grey level Pillow's converters derive from a one-band mode."""
    raw = np.asarray(image)
    mode = image.mode
    if mode == "1":
        return raw.astype(np.uint8) * np.uint8(255)
    if mode == "L":
        return raw.astype(np.uint8, copy=True)
    if mode == "F":
        v = raw.astype(np.float32)
        out = np.zeros(v.shape, dtype=np.uint8)
        mid = (v > 0) & (v < 255)  # NaN fails both tests and stays 0
        out[mid] = v[mid].astype(np.uint8)  # C cast: truncation toward zero
        out[v >= 255] = 255
        return out
    # I (int32) and I;16 family (uint16 in any byte order): clip / saturate.
    return np.clip(raw.astype(np.int64), 0, 255).astype(np.uint8)


def _palette_table(image: Image.Image, *, apply_transparency: bool) -> np.ndarray:
    """The (256, 4) RGBA palette, padded with opaque black, with the tRNS alphas if asked."""
    entries = image.getpalette("RGBA") or []
    table = np.zeros((_PALETTE_ENTRIES, 4), dtype=np.uint8)
    table[:, 3] = 255
    pal = np.asarray(entries, dtype=np.uint8).reshape(-1, 4)[:_PALETTE_ENTRIES]
    table[: len(pal)] = pal
    trns = image.info.get("transparency") if apply_transparency else None
    if trns is None:
        return table
    if isinstance(trns, (bytes, bytearray)):
        if len(trns) > _PALETTE_ENTRIES:
            raise ValueError(f"palette index out of range: transparency has {len(trns)} alphas, at most 256 allowed")
        table[: len(trns), 3] = np.frombuffer(bytes(trns), dtype=np.uint8)
    elif isinstance(trns, (int, np.integer)) and not isinstance(trns, bool):
        if not 0 <= int(trns) < _PALETTE_ENTRIES:
            raise ValueError(f"palette index out of range: transparency index {trns} is outside 0..255")
        table[int(trns), 3] = 0
    else:
        raise ValueError(f"Transparency for P mode should be bytes or int, got {type_name(trns)}")
    return table


def _grey_key_alpha(image: Image.Image, grey: np.ndarray) -> np.ndarray:
    alpha = np.full(grey.shape, 255, dtype=np.uint8)
    trns = image.info.get("transparency")
    if image.mode not in _KEYED_GREY_MODES or trns is None:
        return alpha
    if isinstance(trns, bool) or not isinstance(trns, (int, np.integer)):
        raise TypeError(f"transparency of a {image.mode} image must be an int grey level, got {trns!r}")
    alpha[grey == _key_byte(trns)] = 0
    return alpha


def _key_byte(value: int) -> int:
    """Pillow packs a colour key into a uint8 pixel: only its low byte counts (300 -> 44, -1 -> 255)."""
    if not -(2**31) <= int(value) < 2**31:
        raise OverflowError(f"transparency key {value} does not fit a C int")
    return int(value) & 0xFF


def _rgb_key_alpha(image: Image.Image, rgb: np.ndarray) -> np.ndarray:
    alpha = np.full(rgb.shape[:2], 255, dtype=np.uint8)
    trns = image.info.get("transparency")
    if not isinstance(trns, tuple) or len(trns) != 3:
        return alpha
    key = np.asarray([_key_byte(c) for c in trns], dtype=np.uint8)
    alpha[np.all(rgb == key, axis=-1)] = 0
    return alpha


def _unpremultiply(colour: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Premultiplied -> straight: ``min(255, 255 * c // a)`` for 0 < a < 255, else unchanged."""
    c = colour.astype(np.int32)
    a = alpha.astype(np.int32)[..., None]
    partial = (a > 0) & (a < 255)
    out = np.where(partial, np.minimum(255, (255 * c) // np.maximum(a, 1)), c)
    return out.astype(np.uint8)


def _convert(image: Image.Image, *, with_alpha: bool) -> np.ndarray:
    mode = image.mode
    if mode in DELEGATED_MODES:
        return np.array(image.convert("RGBA" if with_alpha else "RGB"), dtype=np.uint8)
    if mode in GREY_MODES:
        grey = _grey_levels(image)
        rgb = np.repeat(grey[..., None], 3, axis=-1)
        alpha = _grey_key_alpha(image, grey) if with_alpha else None
    elif mode == "LA":
        raw = np.asarray(image)
        rgb = np.repeat(raw[..., :1], 3, axis=-1)
        alpha = raw[..., 1]
    elif mode in ("P", "PA"):
        raw = np.asarray(image)
        index = raw if mode == "P" else raw[..., 0]
        table = _palette_table(image, apply_transparency=with_alpha and mode == "P")
        rgba = table[index]
        rgb = rgba[..., :3]
        alpha = rgba[..., 3] if mode == "P" else raw[..., 1]
    elif mode == "RGBa":
        raw = np.asarray(image)
        rgb = _unpremultiply(raw[..., :3], raw[..., 3])
        alpha = raw[..., 3]
    else:  # RGB, RGBA, RGBX
        raw = np.asarray(image)
        rgb = raw[..., :3]
        if mode == "RGBA":
            alpha = raw[..., 3]
        elif mode == "RGB" and with_alpha:
            alpha = _rgb_key_alpha(image, rgb)
        else:
            alpha = np.full(raw.shape[:2], 255, dtype=np.uint8)
    if not with_alpha:
        return np.ascontiguousarray(rgb, dtype=np.uint8)
    return np.ascontiguousarray(np.concatenate([rgb, alpha[..., None]], axis=-1), dtype=np.uint8)


def to_rgb(image: Image.Image) -> np.ndarray:
    """(H, W, 3) uint8 equal to ``np.asarray(image.convert("RGB"))``, derived from the raw bands."""
    return _convert(_check_image(image), with_alpha=False)


def to_rgba(image: Image.Image) -> np.ndarray:
    """(H, W, 4) uint8 equal to ``np.asarray(image.convert("RGBA"))``, transparency applied as Pillow does."""
    return _convert(_check_image(image), with_alpha=True)
