"""Served-vs-trained inputs (semantics §16.3): one strategy per image class of the skew table, uint8 HWC arrays,
and the small geometries that make a small image resize.

Why a geometry: under the shipped Kimi-K3 limits an image of side <= 40 is
never resized (the §3.2 scale is 1), so the resize, where engines and the
checkpoint differ most, would never run. A drawn `ServedCase` therefore
carries either no geometry (the session's config as it is) or small limits
(patch 1..6, merge 1..2, ``in_patch_limit`` 1..16, one side 1..4 patches) that
replace only the session's geometry: its mean, std, background and fill stage
stay, and a 30-pixel image is resized as a 4K one is under Kimi-K3.

Pixels come from a drawn seed (noise, or a few distinct values so keys and
equal neighbours occur); every image is one the checkpoint's processor
accepts. Shrinks towards the first class, a 1x1 image, seed 0 and no geometry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties.verdicts import describe
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.served import IMAGE_CLASSES

ARRAY_CLASS = "uint8 array"  # a NumPy (H, W, C) uint8 array, C in {1, 3, 4}: the checkpoint's array input (§11.4)
Geometry = tuple[int, int, int, int]  # (patch_size, merge_kernel_size, in_patch_limit, patch_limit_on_one_side)
SCALED: Geometry = (2, 1, 6, 3)  # the exemplars' geometry: a 12x10 image is resized to 5x4


@dataclass(frozen=True)
class ServedCase:
    """One input of C14: its image class, the image (PIL or uint8 array), and the geometry it is served under."""

    cls: str
    image: Any
    geometry: Geometry | None = None
    origin: str = ""  # how to rebuild it: the `make` call, or the corpus file

    @classmethod
    def make(
        cls, name: str, width: int, height: int, seed: int, few: bool = False, geometry: Geometry | None = None
    ) -> ServedCase:
        """The case `make_image` builds: its repr is the call that rebuilds it."""
        call = f"ServedCase.make({name!r}, {width}, {height}, seed={seed}, few={few}, geometry={geometry})"
        return cls(name, make_image(name, width, height, seed, few), geometry, call)

    def config(self, base: PreprocessConfig) -> PreprocessConfig:
        """``base`` with this case's geometry (None: ``base`` itself); never ``fixed_output_tokens``."""
        if self.geometry is None:
            return base
        p, m, limit, side = self.geometry
        return replace(
            base, patch_size=p, merge_kernel_size=m, in_patch_limit=limit, patch_limit_on_one_side=side,
            fixed_output_tokens=None,
        )  # fmt: skip

    @property
    def size(self) -> str:
        if isinstance(self.image, np.ndarray):
            return "x".join(str(n) for n in self.image.shape)
        return f"{self.image.size[0]}x{self.image.size[1]}"

    def __repr__(self) -> str:  # what verdicts.json and a falsifying example show: enough to rebuild it
        if self.origin:
            return f"{self.origin} = {describe(self.image)}"
        return f"ServedCase({self.cls!r}, {describe(self.image)}, geometry={self.geometry})"


def _values(rng: np.random.Generator, shape: tuple[int, ...], lo: int, hi: int, few: bool) -> np.ndarray:
    """Integers in [lo, hi]: uniform noise, or a few distinct ones (so keys match and neighbours repeat)."""
    if few:
        alphabet = rng.integers(lo, hi + 1, size=int(rng.integers(1, 5)))
        return rng.choice(alphabet, size=shape)
    return rng.integers(lo, hi + 1, size=shape)


def _u8(rng: np.random.Generator, shape: tuple[int, ...], few: bool) -> np.ndarray:
    return _values(rng, shape, 0, 255, few).astype(np.uint8)


def _palette(rng: np.random.Generator, mode: str, w: int, h: int, few: bool, alpha: bool = False) -> Image.Image:
    entries = int(rng.integers(1, 257))
    idx = _values(rng, (h, w), 0, entries - 1, few).astype(np.uint8)
    data = np.stack([idx, _u8(rng, (h, w), few)], axis=-1) if alpha else idx
    image = Image.frombytes(mode, (w, h), data.tobytes())
    image.putpalette(rng.integers(0, 256, size=3 * entries, dtype=np.uint8).tobytes())
    return image


def _wide(rng: np.random.Generator, w: int, h: int, few: bool, lo: int, his: tuple[int, ...]) -> np.ndarray:
    """Levels of a wide mode: mostly in 8-bit range (where conversions agree or clip), sometimes the full range."""
    return _values(rng, (h, w), lo, int(rng.choice(his)), few)


def _keyed(image: Image.Image, key: Any) -> Image.Image:
    image.info["transparency"] = key
    return image


def _key_first(image: Image.Image) -> Image.Image:
    """``image`` keyed on its first pixel's value (a grey level, or an RGB colour), so the key matters."""
    first = np.asarray(image).reshape(-1, len(image.getbands()))[0]
    return _keyed(image, int(first[0]) if len(first) == 1 else tuple(int(v) for v in first))


def _rgba(rng: np.random.Generator, w: int, h: int, few: bool, opaque: bool) -> Image.Image:
    data = _u8(rng, (h, w, 4), few)
    if opaque:
        data[..., 3] = 255
    else:
        data[0, 0, 3] = rng.integers(0, 255)  # at least one pixel is not opaque
    return Image.fromarray(data, "RGBA")


def _p_trns(rng: np.random.Generator, w: int, h: int, few: bool) -> Image.Image:
    image = _palette(rng, "P", w, h, few)
    if rng.integers(0, 2):
        return _keyed(image, int(np.asarray(image)[0, 0]))  # one transparent index, held by a pixel
    entries = len(image.getpalette() or []) // 3
    return _keyed(image, rng.integers(0, 256, size=int(rng.integers(1, entries + 1)), dtype=np.uint8).tobytes())


_BUILDERS: dict[str, Callable[[np.random.Generator, int, int, bool], Image.Image]] = {
    "RGB": lambda r, w, h, f: Image.fromarray(_u8(r, (h, w, 3), f), "RGB"),
    "L": lambda r, w, h, f: Image.fromarray(_u8(r, (h, w), f), "L"),
    "RGBA opaque": lambda r, w, h, f: _rgba(r, w, h, f, opaque=True),
    "RGBA partly transparent": lambda r, w, h, f: _rgba(r, w, h, f, opaque=False),
    "LA": lambda r, w, h, f: Image.fromarray(_u8(r, (h, w, 2), f), "LA"),
    "P": lambda r, w, h, f: _palette(r, "P", w, h, f),
    "P with tRNS": _p_trns,
    "1": lambda r, w, h, f: Image.fromarray(_u8(r, (h, w), f) >= 128),
    "RGB with a stray key": lambda r, w, h, f: _key_first(Image.fromarray(_u8(r, (h, w, 3), f), "RGB")),
    "L with a key": lambda r, w, h, f: _key_first(Image.fromarray(_u8(r, (h, w), f), "L")),
    "I;16": lambda r, w, h, f: Image.frombytes(
        "I;16", (w, h), _wide(r, w, h, f, 0, (255, 300, 65535)).astype("<u2").tobytes()
    ),
    "I": lambda r, w, h, f: Image.frombytes(
        "I", (w, h), _wide(r, w, h, f, -300, (255, 300, 70000)).astype("<i4").tobytes()
    ),
    "F": lambda r, w, h, f: Image.frombytes(
        "F", (w, h), (_wide(r, w, h, f, -10, (255, 300)) + r.random((h, w))).astype("<f4").tobytes()
    ),
    "PA": lambda r, w, h, f: _palette(r, "PA", w, h, f, alpha=True),
    "RGBX": lambda r, w, h, f: Image.frombytes("RGBX", (w, h), _u8(r, (h, w, 4), f).tobytes()),
    "CMYK": lambda r, w, h, f: Image.frombytes("CMYK", (w, h), _u8(r, (h, w, 4), f).tobytes()),
    "YCbCr": lambda r, w, h, f: Image.frombytes("YCbCr", (w, h), _u8(r, (h, w, 3), f).tobytes()),
}
if tuple(_BUILDERS) != IMAGE_CLASSES:  # pragma: no cover - the table's rows and the builders are one list
    raise AssertionError(f"builders {tuple(_BUILDERS)} != IMAGE_CLASSES {IMAGE_CLASSES}")


def make_image(cls: str, width: int, height: int, seed: int, few: bool = False) -> Any:
    """A ``width`` x ``height`` input of class ``cls`` (an `IMAGE_CLASSES` row, or `ARRAY_CLASS` then ``seed``
    also picks 1, 3 or 4 channels), its pixels from ``seed``: deterministic, so exemplars and draws agree."""
    rng = np.random.default_rng(seed)
    if cls == ARRAY_CLASS:
        channels = (1, 3, 4)[seed % 3]
        return _u8(rng, (height, width, channels), few)
    if cls not in _BUILDERS:
        raise ValueError(f"unknown image class {cls!r}; accepted: {IMAGE_CLASSES + (ARRAY_CLASS,)}")
    return _BUILDERS[cls](rng, width, height, few)


def geometries() -> st.SearchStrategy[Geometry | None]:
    """None (the session's geometry), or small limits that resize a small image (see the module docstring)."""
    small = st.tuples(st.integers(1, 6), st.integers(1, 2), st.integers(1, 16), st.integers(1, 4))
    return st.none() | small


@st.composite
def served_cases(
    draw: st.DrawFn, *, classes: tuple[str, ...] = IMAGE_CLASSES, arrays: bool = True, max_side: int = 40
) -> ServedCase:
    """`ServedCase` values: a class of ``classes`` (or, with ``arrays``, a uint8 HWC array), sides 1..max_side,
    pixels from a drawn seed, a drawn `geometries` value. Shrinks as the module docstring says."""
    names = tuple(classes) + ((ARRAY_CLASS,) if arrays else ())
    cls = draw(st.sampled_from(names))
    w, h = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    seed, few = draw(st.integers(0, 2**32 - 1)), draw(st.booleans())
    return ServedCase.make(cls, w, h, seed, few, draw(geometries()))


def exemplars(*, arrays: bool = True) -> list[ServedCase]:
    """Fixed cases for the C14 table: per class 12x10 noise under the session's geometry and under `SCALED`
    (arrays with 1, 3 and 4 channels), then every corpus image of a class with sides <= 40, both ways."""
    seeds = [(c, i) for i, c in enumerate(IMAGE_CLASSES)]
    seeds += [(ARRAY_CLASS, n) for n in (18, 19, 20)] if arrays else []  # seed % 3: 1, 3, 4 channels
    made = [ServedCase.make(c, 12, 10, seed=i, geometry=g) for c, i in seeds for g in (None, SCALED)]
    return made + [replace(case, geometry=g) for case in corpus_cases() for g in (None, SCALED)]


def corpus_class(image: Image.Image) -> str | None:
    """The `IMAGE_CLASSES` row of a decoded image, or None when it is none of them (e.g. a keyed ``1`` image)."""
    key = "transparency" in image.info
    if image.mode == "RGBA":
        return "RGBA opaque" if np.asarray(image)[..., 3].min() == 255 else "RGBA partly transparent"
    plain = {"RGB": "RGB with a stray key" if key else "RGB", "L": "L with a key" if key else "L"}
    if image.mode in plain:
        return plain[image.mode]
    if image.mode == "P":
        return "P with tRNS" if key else "P"
    return image.mode if image.mode in IMAGE_CLASSES and not key else None


def corpus_cases(max_side: int = 40) -> list[ServedCase]:
    """The shipped corpus's images of a class with both sides <= ``max_side``, under the session's geometry."""
    from deferlab.reference.oracle import corpus

    out = []
    for entry in corpus.entries():
        if entry.width <= max_side and entry.height <= max_side and entry.n_frames == 1:
            image = corpus.open_checked(entry)
            cls = corpus_class(image)
            if cls is not None:
                out.append(ServedCase(cls, image, None, f"corpus {entry.name!r}"))
    return out
