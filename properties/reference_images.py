"""Hypothesis strategies for PIL images of every mode, shared by the reference's own test files.

Small images (at most 6 x 5) of any mode Pillow 13 can create, with palettes
of 0..256 entries (RGB or RGBA), and every transparency kind the reference
models: bytes alpha tables (shorter than or as long as the palette), a single
int index, grey keys (including keys past 255, whose low byte counts) and RGB
colour-key tuples. Examples shrink towards 1 x 1 images without transparency.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from PIL import Image

from reference.modes import DELEGATED_MODES, OWN_MODES


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
    kind = draw(st.sampled_from(["none", "int", "bytes", "tuple"]))
    if kind == "int":
        image.info["transparency"] = draw(st.integers(-300, 70000) if mode != "P" else st.integers(0, 255))
    elif kind == "bytes" and mode in ("P", "PA"):
        image.info["transparency"] = draw(st.binary(min_size=0, max_size=256))
    elif kind == "tuple" and mode == "RGB":
        first = tuple(int(v) for v in np.asarray(image)[0, 0])
        image.info["transparency"] = draw(
            st.sampled_from([first, (0, 0, 0), (300, 2, 3), tuple(c + 256 for c in first)])
        )
    return image


def _p_image(indices: list[int], palette: list[int], rawmode: str = "RGB", trns=None) -> Image.Image:
    image = Image.frombytes("P", (len(indices), 1), bytes(indices))
    image.putpalette(palette, rawmode)
    if trns is not None:
        image.info["transparency"] = trns
    return image


def p_image(indices: list[int], palette: list[int], rawmode: str = "RGB", trns=None) -> Image.Image:
    """A 1-row P image with the given palette and optional transparency."""
    image = Image.frombytes("P", (len(indices), 1), bytes(indices))
    image.putpalette(palette, rawmode)
    if trns is not None:
        image.info["transparency"] = trns
    return image
