"""Our own ``Image.convert("RGB")`` / ``convert("RGBA")`` for every PIL mode we check.

The oracle must not check Pillow's conversions with Pillow's conversions, so
the rules of semantics §13.5 are restated here in NumPy and applied
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
* Transparency, RGBA target (``_colour_key``): ``1``/``L``/``I``/``I;16``
  and ``RGB`` parse the key as Pillow's C argument parser does: a sequence
  (tuple, list, bytearray, range, ndarray, str) must hold exactly 3 C ints,
  anything else is one C int ``k`` read as ``(k, 0, 0)``; ``bytes``, other
  lengths, non-integers (float, str, None) raise ``TypeError``, ints outside
  a C int ``OverflowError``. Only each component's low byte counts (Pillow
  packs the key into a uint8 pixel: 300 matches 44, 65535 matches 255, so
  saturated ``I;16`` pixels match 65535). Grey modes compare the *converted*
  grey level with the first component (an ``L`` image of 5 keyed ``(5, 6,
  7)`` is fully transparent); ``RGB`` compares all three, so an int key ``k``
  matches ``(k, 0, 0)``. ``P`` keeps only ``bytes`` (those alphas for the
  first ``len(bytes)`` entries, more than 256 raise ``ValueError``) or an
  ``int`` (alpha 0 at that index; outside 0..255 ``ValueError``, outside a C
  int ``OverflowError``); any other kind, numpy ints and bytearray included,
  raises ``ValueError``. ``I;16L/B/N``, ``F``, ``LA``, ``PA``, ``RGBA``,
  ``RGBX``, ... ignore the key, whatever it is.
* Transparency, RGB target (``_check_rgb_key``): the pixels never change,
  but ``L`` and ``P`` re-derive the key's colour through ``putpixel`` and
  raise what it raises: ``L`` accepts ``None``, ``bytes``, an ``int`` or a
  1-tuple of an ``int`` (any size) and raises ``TypeError`` otherwise
  (numpy ints and 3-tuples included). ``P`` looks a tuple (or a 3/4-item
  list) up in its palette and, when absent, appends it as Pillow's
  ``ImagePalette.getcolor`` does: a non-opaque 4-tuple on an RGB palette or
  a component outside 0..255 raises ``ValueError``, a non-integer one
  ``TypeError``; a full palette with no unused index is silently fine for a
  tuple (``ValueError`` for a list). Other ``P`` keys follow ``L``'s rule
  without the 1-tuple. Every other mode ignores the key for RGB.
* ``CMYK``, ``YCbCr``, ``LAB``, ``HSV``: colour-space conversions we do not
  re-derive; they are *delegated* to Pillow's ``convert`` (``DELEGATED_MODES``),
  so nothing about them is independently checked.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.system.validate import type_name

# Colour-space modes whose conversion is delegated to Pillow's own ``convert``.
DELEGATED_MODES: frozenset[str] = frozenset({"CMYK", "YCbCr", "LAB", "HSV"})
GREY_MODES: tuple[str, ...] = ("1", "L", "I", "I;16", "I;16L", "I;16B", "I;16N", "F")
# Modes whose conversion we implement ourselves (La included: we model its failure).
OWN_MODES: frozenset[str] = frozenset(GREY_MODES + ("LA", "La", "P", "PA", "RGB", "RGBA", "RGBa", "RGBX"))
# Grey sources for which convert("RGBA") honours an int colour key.
_KEYED_GREY_MODES = frozenset({"1", "L", "I", "I;16"})
_PALETTE_ENTRIES = 256
_C_INT_MIN, _C_INT_MAX = -(2**31), 2**31 - 1


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
    if not apply_transparency or "transparency" not in image.info:
        return table
    trns = image.info["transparency"]
    if isinstance(trns, bytes):
        if len(trns) > _PALETTE_ENTRIES:
            raise ValueError(f"palette index out of range: transparency has {len(trns)} alphas, at most 256 allowed")
        table[: len(trns), 3] = np.frombuffer(trns, dtype=np.uint8)
    elif isinstance(trns, int):  # bool included (True is index 1); numpy ints are not
        if not 0 <= _c_int(trns) < _PALETTE_ENTRIES:
            raise ValueError(f"palette index out of range: transparency index {trns} is outside 0..255")
        table[int(trns), 3] = 0
    else:
        raise ValueError(f"Transparency for P mode should be bytes or int, got {type_name(trns)}")
    return table


def _c_int(value: Any) -> int:
    """What Pillow's C ``i`` argument parser accepts: any ``__index__`` object within a C int."""
    number = operator.index(value)  # TypeError for float, str, None, ...
    if not _C_INT_MIN <= number <= _C_INT_MAX:
        raise OverflowError(f"transparency key {number} does not fit a C int")
    return number


def _colour_key(trns: Any) -> tuple[int, int, int]:
    """The low bytes of the (r, g, b) key Pillow's ``convert_transparent`` parses: 3-sequence or one int as (k, 0, 0)."""
    kind = type(trns)
    if hasattr(kind, "__len__") and hasattr(kind, "__getitem__") and not isinstance(trns, dict):
        if isinstance(trns, bytes) or len(trns) != 3:
            raise TypeError(f"transparency key must be an int or a sequence of 3 ints, got {trns!r}")
        r, g, b = (_c_int(c) for c in trns)
        return r & 0xFF, g & 0xFF, b & 0xFF
    return _c_int(trns) & 0xFF, 0, 0


def _grey_key_alpha(image: Image.Image, grey: np.ndarray) -> np.ndarray:
    alpha = np.full(grey.shape, 255, dtype=np.uint8)
    if image.mode in _KEYED_GREY_MODES and "transparency" in image.info:
        alpha[grey == _colour_key(image.info["transparency"])[0]] = 0
    return alpha


def _rgb_key_alpha(image: Image.Image, rgb: np.ndarray) -> np.ndarray:
    alpha = np.full(rgb.shape[:2], 255, dtype=np.uint8)
    if "transparency" in image.info:
        key = np.asarray(_colour_key(image.info["transparency"]), dtype=np.uint8)
        alpha[np.all(rgb == key, axis=-1)] = 0
    return alpha


def _allocate_palette_colour(image: Image.Image, colour: tuple, *, full_is_fine: bool) -> None:
    """Raise what Pillow's palette raises when it looks ``colour`` up and, if absent, appends it."""
    image.load()  # syncs image.palette with the palette the pixels use
    mode, data = image.palette.mode, bytes(image.palette.palette)
    if mode == "RGB" and len(colour) == 4:
        if colour[3] != 255:
            raise ValueError("cannot add non-opaque RGBA color to RGB palette")
        colour = colour[:3]
    elif mode == "RGBA" and len(colour) == 3:
        colour += (255,)
    step = len(mode)
    if colour in {tuple(data[i : i + step]) for i in range(0, len(data), step)}:
        return
    index = len(data) // 3  # Pillow counts slots in RGB triples whatever the palette mode
    special = (image.info.get("background"), image.info.get("transparency"))
    while index in special:
        index += 1
    if index >= _PALETTE_ENTRIES:
        counts = np.bincount(np.asarray(image).ravel(), minlength=_PALETTE_ENTRIES)
        unused = [i for i in range(_PALETTE_ENTRIES - 1, -1, -1) if counts[i] == 0 and i not in special]
        if not unused:
            if full_is_fine:
                return
            raise ValueError("cannot allocate more than 256 colors")
    bytes(colour)  # the append: TypeError for non-integers, ValueError outside 0..255


def _check_rgb_key(image: Image.Image) -> None:
    """convert("RGB") of ``L``/``P`` re-derives the key's colour with putpixel: raise what that raises."""
    if image.mode not in ("L", "P") or "transparency" not in image.info:
        return
    trns = image.info["transparency"]
    if isinstance(trns, bytes) or trns is None or isinstance(trns, int):
        return
    if image.mode == "P" and isinstance(trns, tuple):
        _allocate_palette_colour(image, trns, full_is_fine=True)
    elif image.mode == "P" and isinstance(trns, list) and len(trns) in (3, 4):
        _allocate_palette_colour(image, tuple(trns), full_is_fine=False)
    elif not (image.mode == "L" and isinstance(trns, tuple) and len(trns) == 1 and isinstance(trns[0], int)):
        raise TypeError(f"transparency of an {image.mode} image must be an int or single-element tuple, got {trns!r}")


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
    if not with_alpha:
        _check_rgb_key(image)
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
