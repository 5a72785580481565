"""Image strategies, the one module of them: PIL images in every mode Pillow can create, and raw arrays in every layout.

Three families, each with its own distribution: `pil_images` / `uint8_arrays`
(every mode and layout, re-exported by `strategies`; see there for the
overview); `mode_images` / `transparency_keys` (tiny images with every
``transparency`` form, for the oracle's mode conversion); `pipeline_pil_images`
/ `seeded_chw_tensors` (the modes the pipeline stages, sides up to 40, for the
impl tests; in `strategies.pipeline`, re-exported here). The factories are `reused`: one strategy object per
arguments, since the claims' composites call them on every draw. Each strategy says
what it generates, its arguments, and how it shrinks, like Hypothesis's own.
The structure (mode, transparency form, layout, odd sizes) breaks things, not
the size, so pixel strategies default to small sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties.strategies.pipeline import (  # noqa: F401 - re-exported: the impl tests import them here
    pipeline_pil_images,
    seeded_chw_tensors,
    tensors_or_pil_images,
)
from deferlab.properties.strategies.reuse import reused
from deferlab.reference.oracle.modes import DELEGATED_MODES, OWN_MODES

# Every mode Image.new / frombytes accepts in Pillow 13 (the I;16 variants share one band).
ALL_MODES = tuple("1 L LA La P PA RGB RGBA RGBa RGBX CMYK YCbCr LAB HSV I I;16 I;16L I;16B I;16N F".split())
GREY_LIKE = ("1", "L", "I", "I;16", "I;16L", "I;16B", "I;16N")
LAYOUTS = ("CHW", "HWC", "HW")


def _check_sides(min_side: int, max_side: int) -> None:
    if not (isinstance(min_side, int) and isinstance(max_side, int)) or not 1 <= min_side <= max_side:
        raise ValueError(f"need 1 <= min_side <= max_side (ints), got min_side={min_side!r}, max_side={max_side!r}")


@reused
@st.composite
def _pixels(draw: st.DrawFn, mode: str, size: tuple[int, int]) -> Image.Image:
    """Raw pixel bytes of ``mode``: few distinct values (so ties and keys collide), or any bytes."""
    w, h = size
    if mode == "F":
        vals = draw(
            st.lists(
                st.sampled_from([0.0, 1.0, 1.9, 127.5, 254.9, 255.0, 300.0, -3.0]) | st.floats(-10, 300, width=32),
                min_size=w * h,
                max_size=w * h,
            )
        )
        return Image.frombytes("F", size, np.asarray(vals, dtype=np.float32).tobytes())
    if mode == "1":
        bits = draw(st.binary(min_size=w * h, max_size=w * h))
        return Image.frombytes("1", size, bytes(255 if b & 1 else 0 for b in bits), "raw", "1;8")
    n = len(Image.new(mode, size).tobytes())
    palette_like = draw(st.booleans())
    if palette_like:  # few distinct bytes: exercises colour keys and equal neighbours
        alphabet = draw(st.lists(st.integers(0, 255), min_size=1, max_size=4))
        data = bytes(draw(_bytes_from(tuple(alphabet), n)))
    else:
        data = draw(st.binary(min_size=n, max_size=n))
    return Image.frombytes(mode, size, data)


@reused
def _bytes_from(alphabet: tuple[int, ...], n: int) -> st.SearchStrategy[list[int]]:
    """``n`` values drawn from ``alphabet``: one object per (alphabet, n), not a fresh list strategy per image
    (`reused`: same structure and label, so the same choices and examples as a fresh one)."""
    return st.lists(st.sampled_from(alphabet), min_size=n, max_size=n)


@reused
def _sampled(values: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    """``st.sampled_from(values)``, one object per tuple (Hypothesis does not cache `sampled_from` itself)."""
    return st.sampled_from(values)


@reused
def _stray_tuples(hi: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Tuples of ints of odd length (1, 3, 5): the colour-key form where it means nothing or is malformed."""
    return st.sampled_from((1, 3, 5)).flatmap(lambda n: st.tuples(*[st.integers(0, hi)] * n))


@st.composite
def _transparency(draw: st.DrawFn, image: Image.Image) -> Any:
    """A `transparency` value of the form Pillow gives this mode, or a stray one; None for no key."""
    mode = image.mode
    if not draw(st.booleans()):
        return None
    if mode == "P":
        return draw(_palette_keys(len(image.getpalette() or []) // 3 or 256))
    if mode in GREY_LIKE:
        return draw(_grey_keys(255 if mode in ("1", "L") else 65535))
    return draw(_rgb_keys(mode == "RGB"))


# The key strategies `_transparency` draws from, one object per argument (`reused`), not built anew per image.
@reused
def _palette_keys(n: int) -> st.SearchStrategy[Any]:
    """A P image's keys, ``n`` the palette's length."""
    return st.one_of(
        st.binary(min_size=0, max_size=n),  # alpha table, shorter than or equal to the palette
        st.integers(0, n - 1),  # one transparent index
        _stray_tuples(255),  # stray: a tuple, which Pillow refuses for P
    )


@reused
def _grey_keys(hi: int) -> st.SearchStrategy[Any]:
    """A grey image's keys, ``hi`` its largest level."""
    return st.one_of(
        st.integers(0, hi),  # one transparent grey value
        st.tuples(st.integers(0, hi), st.integers(0, hi), st.integers(0, hi)),  # Pillow keys on the first
        _stray_tuples(hi),  # stray: other lengths, which Pillow refuses
        st.binary(min_size=1, max_size=4),  # stray: bytes, a palette's form on a grey image
    )


@reused
def _rgb_keys(rgb: bool) -> st.SearchStrategy[Any]:
    """An RGB image's keys (a colour), or any other mode's (an int or a colour)."""
    colour = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255))
    return colour if rgb else st.integers(0, 255) | colour


@reused
@st.composite
def pil_images(
    draw: st.DrawFn,
    *,
    modes: tuple[str, ...] = ALL_MODES,
    min_side: int = 1,
    max_side: int = 12,
    transparency: bool = True,
) -> Image.Image:
    """PIL images in any of ``modes``, with optional `transparency` info in every form Pillow uses.

    - ``modes``: Pillow mode names (default: every mode Pillow can create).
    - ``min_side``/``max_side``: bounds of width and height.
    - ``transparency``: also draw a ``transparency`` key: a palette alpha table
      (bytes, up to the palette length), a transparent index or grey value (int),
      an RGB colour (tuple), a grey key as a 3-tuple (Pillow keys on its first
      element), or a stray key where it means nothing or Pillow refuses it
      (tuples of length 1/3/5 on P, tuples of length 1/5 and bytes on grey
      modes, ints or tuples on any other mode).

    Palette images get a random palette of 1..256 entries. Shrinks towards the
    first mode, a 1x1 image, zero bytes and no transparency key.
    """
    _check_sides(min_side, max_side)
    bad = [m for m in modes if m not in ALL_MODES]
    if not modes or bad:
        raise ValueError(f"modes must be a non-empty subset of {ALL_MODES}, got unknown {bad}")
    mode = draw(_sampled(modes))
    size = (draw(st.integers(min_side, max_side)), draw(st.integers(min_side, max_side)))
    image = draw(_pixels(mode, size))
    if mode in ("P", "PA"):
        entries = draw(st.integers(1, 256))
        image.putpalette(draw(st.binary(min_size=3 * entries, max_size=3 * entries)))
    if transparency:
        value = draw(_transparency(image))
        if value is not None:
            image.info["transparency"] = value
    return image


@dataclass(frozen=True)
class ArrayImage:
    """A raw array input and what it really is: the layout and the true (width, height, channels)."""

    value: Any
    layout: str
    width: int
    height: int
    channels: int

    def __repr__(self) -> str:  # readable in a falsifying example and in verdicts.json
        return (
            f"ArrayImage({type(self.value).__module__.split('.')[0]} {tuple(self.value.shape)} {self.value.dtype}, "
            f"layout={self.layout}, w={self.width}, h={self.height}, c={self.channels})"
        )


@reused
@st.composite
def uint8_arrays(
    draw: st.DrawFn,
    *,
    layouts: tuple[str, ...] = LAYOUTS,
    min_channels: int = 1,
    max_channels: int = 5,
    min_side: int = 1,
    max_side: int = 12,
    as_tensor: bool = True,
) -> ArrayImage:
    """uint8 images in a layout a caller might pass: CHW, HWC, or 2-D (HW), 1..5 channels.

    - ``layouts``: subset of ("CHW", "HWC", "HW"); "HW" ignores the channel bounds.
    - ``as_tensor``: a torch tensor (default) or a NumPy array.

    Returns an `ArrayImage` carrying the truth (layout, width, height, channels)
    so a property can compare it with what the system reads. Shrinks towards
    the first layout, one channel, 1x1, zeros.
    """
    _check_sides(min_side, max_side)
    layout = draw(_sampled(layouts))
    c = 1 if layout == "HW" else draw(st.integers(min_channels, max_channels))
    h, w = draw(st.integers(min_side, max_side)), draw(st.integers(min_side, max_side))
    shape = {"CHW": (c, h, w), "HWC": (h, w, c), "HW": (h, w)}[layout]
    data = draw(st.binary(min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    arr = np.frombuffer(data, dtype=np.uint8).reshape(shape).copy()
    if as_tensor:
        import torch

        arr = torch.from_numpy(arr)
    return ArrayImage(arr, layout, w, h, c)


@reused
@st.composite
def float_tensors(draw: st.DrawFn, *, max_side: int = 8) -> Any:
    """Float CHW tensors (float32/64/16, 1, 3 or 4 channels, values 0..255): the eager path tolerates them,
    the gate must keep them eager. Shrinks towards a 1x1 single-channel float32 zero."""
    import torch

    c = draw(st.sampled_from([1, 3, 4]))
    h, w = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.float16]))
    vals = draw(st.lists(st.floats(0, 255, width=16), min_size=c * h * w, max_size=c * h * w))
    return torch.tensor(vals, dtype=dtype).reshape(c, h, w)


@reused
def chw_uint8_tensors(*, max_side: int = 12, channels: tuple[int, ...] = (1, 3, 4)) -> st.SearchStrategy[Any]:
    """uint8 CHW tensors with ``channels`` (default 1, 3 or 4): the tensor inputs upstream reads correctly.

    Shrinks towards a 1x1 zero tensor with the fewest channels.
    """
    return (
        uint8_arrays(layouts=("CHW",), min_channels=min(channels), max_channels=max(channels), max_side=max_side)
        .filter(lambda a: a.channels in channels)
        .map(lambda a: a.value)
    )


@reused
def staging_ok_pil_images(
    *, max_side: int = 12, modes: tuple[str, ...] | None = None
) -> st.SearchStrategy[Image.Image]:
    """PIL images upstream's stager converts: every mode but `La`; keys only in forms Pillow applies.

    `La` has no converter to RGB in Pillow, a P image with a tuple key makes
    ``convert("RGBA")`` raise, and so does a grey image (1, L, I, I;16) whose
    key is bytes or a tuple of length other than 3: all are covered by
    `pil_images` for the error paths.
    """
    modes = tuple(m for m in (modes or ALL_MODES) if m != "La")

    def convertible(img: Image.Image) -> bool:
        key = img.info.get("transparency")
        if img.mode == "P":
            return not isinstance(key, tuple)
        if img.mode in GREY_LIKE:
            return not (isinstance(key, bytes) or (isinstance(key, tuple) and len(key) != 3))
        return True

    return pil_images(modes=modes, max_side=max_side).filter(convertible)


# --- Tiny images of every mode with every ``transparency`` form (the oracle's mode tests) -------------------------
#
# Small images (at most 6 x 5) of any mode Pillow 13 can create, with palettes of 0..256 entries (RGB or RGBA), and
# a ``transparency`` key of every form, drawn for every mode (modes that ignore a key must ignore all of them): ints
# (past 255, negative, at the C-int limits and past them, bools), tuples of 0..4 components (often a colour the image
# holds, so keys match; ints past a byte, past a C int, floats, strings), bytes alpha tables (up to 257 long), and odd
# values (None, floats, str, bytearray, lists, numpy scalars and arrays, range). Examples shrink towards 1 x 1 images
# without transparency.

# Keys no well-formed file carries, but which ``info`` can hold and Pillow answers for.
_ODD_KEYS = (
    None,
    5.0,
    "5",
    "\x05\x06\x07",
    bytearray(b"\x05\x06\x07"),
    bytearray(b"\x00"),
    np.int64(5),
    np.uint8(0),
    np.float64(5.0),
    np.array(5),
    np.array([5, 6, 7]),
    range(5, 8),
    [5],
    [5, 6, 7],
    [0, 0, 0, 255],
    [5, 6, 7, 8],
    [300, 0, 0],
    [5, 6, 7.5],
    (np.int64(5), 6, 7),
    (True, 0, 0),
)
_C_INT_LIMITS = (2**31 - 1, -(2**31), 2**31, -(2**31) - 1)


def _held_colour(image: Image.Image) -> tuple[int, ...]:
    """The first pixel's value as a key would spell it: grey level, RGB triple, or palette colour."""
    first = np.asarray(image).reshape(-1, len(image.getbands()))[0]
    if image.mode == "1":
        return (255 if first[0] else 0,)  # keys compare with the converted level
    if image.mode in ("P", "PA"):
        image.load()  # settles a freshly put palette
        palette = image.palette
        step = len(palette.mode)
        entry = tuple(bytes(palette.palette)[int(first[0]) * step : int(first[0]) * step + step])
        return entry or (0, 0, 0)
    if image.mode == "F":
        return (int(np.nan_to_num(first[0], posinf=255, neginf=0)),)
    return tuple(int(v) for v in first)


@st.composite
def transparency_keys(draw: st.DrawFn, held: tuple[int, ...] = (0,)) -> object:
    """Every ``transparency`` form: ints, tuples of 0..4 components (often ``held``), bytes, odd values."""
    kind = draw(st.sampled_from(["int", "tuple", "held", "bytes", "odd"]))
    component = st.one_of(
        st.sampled_from((held[0], 0, 5, 255, 256, 300, -1, 65535) + _C_INT_LIMITS), st.integers(-300, 70000)
    )
    if kind == "int":
        return draw(st.one_of(component, st.integers(0, 255), st.booleans()))
    if kind == "tuple":
        length = draw(st.sampled_from([3, 3, 0, 1, 2, 4]))
        return tuple(draw(st.one_of(component, st.sampled_from([5.0, 5.5, "a"]))) for _ in range(length))
    if kind == "held":  # a colour the image holds, padded to 3 (or 4 with an alpha) as a key would be
        padded = (held + held[-1:] * 3)[:3] if len(held) < 3 else held[:3]
        extra = draw(st.sampled_from([(), (255,), (0,)]))
        shifted = draw(st.sampled_from([0, 256, -256]))
        return tuple(c + shifted for c in padded) + extra
    if kind == "bytes":
        return draw(st.binary(min_size=0, max_size=257))
    return draw(st.sampled_from(_ODD_KEYS))


@st.composite
def mode_images(draw: st.DrawFn, modes: tuple[str, ...] = tuple(sorted(OWN_MODES | DELEGATED_MODES))) -> Image.Image:
    """Small images of any mode Pillow can create, with palettes and every transparency kind we model."""
    mode = draw(st.sampled_from(modes))
    w, h = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    n = w * h
    if mode == "1":
        image = Image.fromarray(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(h, w))
    elif mode in ("L", "P"):
        data = draw(st.binary(min_size=n, max_size=n))
        image = Image.frombytes(mode, (w, h), data)
    elif mode == "I":
        vals = draw(st.lists(st.sampled_from([-70000, -1, 0, 1, 5, 254, 255, 256, 300, 70000]), min_size=n, max_size=n))
        image = Image.frombytes("I", (w, h), np.array(vals, dtype="<i4").tobytes())
    elif mode.startswith("I;16"):
        vals = draw(st.lists(st.sampled_from([0, 1, 5, 255, 256, 300, 4660, 65535]), min_size=n, max_size=n))
        image = Image.frombytes(mode, (w, h), np.array(vals, dtype=">u2" if mode == "I;16B" else "<u2").tobytes())
    elif mode == "F":
        pool = [-1e30, -1.0, -0.0, 0.0, 0.4, 1.0, 1.9, 127.5, 254.99, 255.0, 255.5, 1e30, np.inf, -np.inf, np.nan]
        vals = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
        image = Image.frombytes("F", (w, h), np.array(vals, dtype="<f4").tobytes())
    else:
        bands = len(Image.new(mode, (1, 1)).getbands())
        image = Image.frombytes(mode, (w, h), draw(st.binary(min_size=n * bands, max_size=n * bands)))
    if mode in ("P", "PA"):
        entries = draw(st.integers(0, 256))
        rawmode = draw(st.sampled_from(["RGB", "RGBA"]))
        k = len(rawmode)
        if entries:
            image.putpalette(list(draw(st.binary(min_size=entries * k, max_size=entries * k))), rawmode)
    if draw(st.booleans()):
        image.info["transparency"] = draw(transparency_keys(_held_colour(image)))
    return image


def p_image(indices: list[int], palette: list[int], rawmode: str = "RGB", trns=None) -> Image.Image:
    """A 1-row P image with the given palette and optional transparency."""
    image = Image.frombytes("P", (len(indices), 1), bytes(indices))
    image.putpalette(palette, rawmode)
    if trns is not None:
        image.info["transparency"] = trns
    return image
