"""Hypothesis strategies for PIL images of every mode, shared by the reference's own test files.

Small images (at most 6 x 5) of any mode Pillow 13 can create, with palettes
of 0..256 entries (RGB or RGBA), and a ``transparency`` key of every form,
drawn for every mode (modes that ignore a key must ignore all of them): ints
(past 255, negative, at the C-int limits and past them, bools), tuples of 0..4
components (often a colour the image holds, so keys match; ints past a byte,
past a C int, floats, strings), bytes alpha tables (up to 257 long), and odd
values (None, floats, str, bytearray, lists, numpy scalars and arrays, range).
Examples shrink towards 1 x 1 images without transparency.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from PIL import Image

from deferlab.reference.oracle.modes import DELEGATED_MODES, OWN_MODES

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
