"""The skew table's inputs: small generated images per image class (semantics §16.3) and the corpus's own.

Why generated noise: uniform random levels are the hardest case for a resize
(every neighbour differs), so a level difference between two resamplers shows
up on a handful of 8..40 px images; the shipped corpus adds real files of the
classes it has. Seeded NumPy (PCG64, one seed per class), so a rerun serves the
very same pixels and a changed cell is a changed path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from deferlab.reference.system.served import IMAGE_CLASSES

ARRAY_CLASS = "uint8 array HWC"  # the extra row: a request's image given as a NumPy array instead of a PIL image
MIN_SIDE, MAX_SIDE = 8, 40
PER_CLASS = 3  # generated images per class (the corpus adds its own)
# Two long thin images per class that Kimi-K3's geometry does resize (a side over 512 patches of 14 px = 7168):
# small images and the corpus never are, so without these the table would never see the resize arithmetic.
RESIZED = ((7400, 9), (9, 7400))
SEED = 16  # semantics §16


@dataclass(frozen=True)
class Sample:
    """One input of the table: its class, where it came from (``generated #i`` or a corpus file name), the image."""

    cls: str
    origin: str
    image: Any  # a PIL image, or a uint8 (H, W, C) array for `ARRAY_CLASS`

    @property
    def size(self) -> tuple[int, int]:
        if isinstance(self.image, np.ndarray):
            return int(self.image.shape[1]), int(self.image.shape[0])
        return self.image.size


def _rgb(rng: np.random.Generator, w: int, h: int, channels: int = 3) -> np.ndarray:
    return rng.integers(0, 256, (h, w, channels), dtype=np.uint8)


def _palette(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    im = Image.fromarray(rng.integers(0, 16, (h, w), dtype=np.uint8)).convert("P")
    im.putpalette(rng.integers(0, 256, 16 * 3, dtype=np.uint8).tobytes())
    return im


def _keyed(im: Image.Image, key: Any) -> Image.Image:
    im.info["transparency"] = key
    return im


def _rgba_partly(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    a = _rgb(rng, w, h, 4)
    a[0, 0, 3], a[-1, -1, 3] = 0, 255  # both extremes present, whatever the draw
    return Image.fromarray(a, "RGBA")


def _pa(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    im = _palette(rng, w, h).convert("PA")
    im.putalpha(Image.fromarray(rng.integers(0, 256, (h, w), dtype=np.uint8)))
    return im


def _raw(mode: str, channels: int) -> Callable[[np.random.Generator, int, int], Image.Image]:
    return lambda rng, w, h: Image.frombytes(mode, (w, h), _rgb(rng, w, h, channels).tobytes())


def _grey(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    return rng.integers(0, 256, (h, w), dtype=np.uint8)


MAKERS: dict[str, Callable[[np.random.Generator, int, int], Any]] = {
    "RGB": lambda rng, w, h: Image.fromarray(_rgb(rng, w, h)),
    "L": lambda rng, w, h: Image.fromarray(_grey(rng, w, h)),
    "RGBA opaque": lambda rng, w, h: Image.fromarray(_rgb(rng, w, h)).convert("RGBA"),
    "RGBA partly transparent": _rgba_partly,
    "LA": lambda rng, w, h: Image.fromarray(_rgb(rng, w, h, 2), "LA"),
    "P": _palette,
    "P with tRNS": lambda rng, w, h: _keyed(_palette(rng, w, h), 3),
    "1": lambda rng, w, h: Image.fromarray(rng.integers(0, 2, (h, w)).astype(bool)),
    "RGB with a stray key": lambda rng, w, h: _stray_key(Image.fromarray(_rgb(rng, w, h))),
    "L with a key": lambda rng, w, h: _keyed(Image.fromarray(_grey(rng, w, h)), 128),
    "I;16": lambda rng, w, h: Image.frombytes(
        "I;16", (w, h), rng.integers(0, 65536, (h, w), dtype=np.uint16).astype("<u2").tobytes()
    ),
    "I": lambda rng, w, h: Image.fromarray(rng.integers(0, 65536, (h, w), dtype=np.int32)),
    "F": lambda rng, w, h: Image.fromarray((rng.random((h, w)) * 255.0).astype(np.float32)),
    "PA": _pa,
    "RGBX": lambda rng, w, h: Image.fromarray(_rgb(rng, w, h)).convert("RGBX"),
    "CMYK": _raw("CMYK", 4),
    "YCbCr": _raw("YCbCr", 3),
    ARRAY_CLASS: _rgb,
}
CLASSES = (*IMAGE_CLASSES, ARRAY_CLASS)  # the table's rows, in order


def _stray_key(im: Image.Image) -> Image.Image:
    """An RGB image keyed on the colour of its first pixel (so the key does occur)."""
    return _keyed(im, tuple(int(v) for v in im.getpixel((0, 0))))


def generated(cls: str, count: int = PER_CLASS) -> list[Sample]:
    """``count`` images of class ``cls``, sides drawn in MIN_SIDE..MAX_SIDE (seeded by the class's row), then the
    `RESIZED` ones."""
    rng = np.random.default_rng([SEED, CLASSES.index(cls)])
    out = []
    for i in range(count):
        w, h = (int(v) for v in rng.integers(MIN_SIDE, MAX_SIDE + 1, 2))
        out.append(Sample(cls, f"generated #{i} {w}x{h}", MAKERS[cls](rng, w, h)))
    for w, h in RESIZED:
        out.append(Sample(cls, f"generated {w}x{h} (resized)", MAKERS[cls](rng, w, h)))
    return out


def classify(image: Image.Image) -> str | None:
    """The class of a PIL image (None: none of the table's rows, e.g. a keyed ``1`` or ``I;16``, or ``LAB``)."""
    keyed = "transparency" in image.info
    mode = image.mode
    if mode == "RGBA":
        return "RGBA opaque" if image.getchannel("A").getextrema()[0] == 255 else "RGBA partly transparent"
    if mode in ("RGB", "L", "P"):
        return {"RGB": "RGB with a stray key", "L": "L with a key", "P": "P with tRNS"}[mode] if keyed else mode
    return mode if mode in IMAGE_CLASSES and not keyed else None


def corpus_samples() -> dict[str, list[Sample]]:
    """Every shipped corpus image (first frame) that falls in a class, by class; a file that fails its manifest
    check is left out here (the corpus's own tests report it)."""
    from deferlab.reference.oracle import corpus
    from deferlab.reference.system.errors import CorpusError

    out: dict[str, list[Sample]] = {}
    for entry in corpus.entries():
        try:
            image = corpus.open_checked(entry)
        except (CorpusError, OSError):
            continue
        cls = classify(image)
        if cls is not None:
            out.setdefault(cls, []).append(Sample(cls, entry.name, image))
    return out


def samples(per_class: int = PER_CLASS, with_corpus: bool = True, corpus: int | None = None) -> dict[str, list[Sample]]:
    """The table's inputs per class, in `CLASSES` order: generated first, then the corpus's (at most ``corpus``
    files a class when given)."""
    found = corpus_samples() if with_corpus else {}
    return {cls: generated(cls, per_class) + found.get(cls, [])[:corpus] for cls in CLASSES}
