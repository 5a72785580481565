"""Encoded image bytes of the classes clients send, generated here with Pillow (claim C20, semantics §20.8).

Why these classes: an engine's media loader and the checkpoint's ``load_image`` part on structure, not on size:
the EXIF orientation tag (transposed or not), colour models a ``convert("RGB")`` handles differently from a
compositing onto white (CMYK, YCCK, 16- and 32-bit grayscale, palette with tRNS, LA, RGBA), an embedded ICC
profile (applied or ignored), animation (which frame), and bytes Pillow must refuse (a truncated file, garbage
after a valid header, a decompression bomb). Images are small (13x9 to 40x30) and made in memory: no downloads.
Every image is noise over a gradient, so any transposition, mirror or frame change is seen in the pixels.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
from hypothesis import strategies as st
from PIL import Image, ImageCms

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.requests import ENCODED_CLASSES, _known, media_type  # noqa: F401 - re-exported

EXIF_ORIENTATION = 0x0112
# Pillow refuses (DecompressionBombError) above twice this at open; the bomb declares more, in a few bytes.
BOMB_PIXELS = 2 * Image.MAX_IMAGE_PIXELS + 1


def _rgb(w: int, h: int, seed: int, shift: int = 0) -> np.ndarray:
    """(h, w, 3) uint8: a gradient plus noise, no symmetry (a mirror or transpose changes it)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + 2 * y + shift * 85) % 256], -1)
    return ((base + rng.integers(0, 64, (h, w, 3))) % 256).astype(np.uint8)


def _save(image: Image.Image, fmt: str, **options: object) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()


def _alpha(w: int, h: int, seed: int) -> np.ndarray:
    """(h, w) uint8: opaque, transparent and half-transparent bands, so compositing shows where alpha < 255."""
    rng = np.random.default_rng(seed + 1)
    a = np.full((h, w), 255, np.uint8)
    a[:, : w // 3] = 0
    a[:, w // 3 : 2 * w // 3] = rng.integers(1, 255, (h, 2 * w // 3 - w // 3))
    return a


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _bomb() -> bytes:
    """A valid PNG (8-bit grayscale, one empty row compressed) whose IHDR declares over 2 x MAX_IMAGE_PIXELS."""
    w = 20_000
    h = BOMB_PIXELS // w + 1
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * (w + 1))
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", idat) + _png_chunk(b"IEND", b"")


def _ycck(cmyk_jpeg: bytes) -> bytes:
    """A CMYK JPEG whose Adobe APP14 transform byte says 2 (YCCK): Pillow writes CMYK with transform 0 and has no
    YCCK writer, so the marker is set here; a decoder then treats the four components as YCbCr + K."""
    at = cmyk_jpeg.find(b"Adobe")
    if at < 0:
        raise RuntimeError("Pillow's CMYK JPEG has no Adobe APP14 segment to mark YCCK")
    return cmyk_jpeg[: at + 11] + b"\x02" + cmyk_jpeg[at + 12 :]


def _blp(w: int, h: int, seed: int) -> bytes:
    """A BLP2 file (magic, compression 1, encoding byte 9, then the size) with empty mipmap tables and a palette
    drawn from ``seed``: Pillow identifies it (a ``BLP`` image of ``w`` x ``h``) and raises ``BLPFormatError`` at
    ``load``."""
    palette = np.random.default_rng(seed).integers(0, 256, 1024, dtype=np.uint8).tobytes()
    return b"BLP2" + struct.pack("<i", 1) + bytes([9, 0, 0, 0]) + struct.pack("<II", w, h) + bytes(128) + palette


def make_bytes(cls: str, w: int, h: int, seed: int) -> bytes:
    """The encoded bytes of class ``cls`` for a ``w`` x ``h`` image drawn from ``seed`` (the size is the stored
    one: an EXIF 5-8 image displays as ``h`` x ``w``; the bomb ignores the size). Deterministic."""
    _known(cls)
    if w < 1 or h < 1:
        raise InputValueError(f"encoded image size must be positive, got {w}x{h}")
    rgb = Image.fromarray(_rgb(w, h, seed))
    if cls in ("RGB JPEG", "RGB PNG"):
        return _save(rgb, cls.split()[1], **({"quality": 90} if "JPEG" in cls else {}))
    if cls.startswith("JPEG EXIF"):
        exif = Image.Exif()
        exif[EXIF_ORIENTATION] = int(cls.rsplit(" ", 1)[1])
        return _save(rgb, "JPEG", quality=90, exif=exif.tobytes())
    if cls in ("CMYK JPEG", "YCCK JPEG"):
        cmyk = _save(rgb.convert("CMYK"), "JPEG", quality=90)
        return cmyk if cls == "CMYK JPEG" else _ycck(cmyk)
    if cls == "progressive JPEG":
        return _save(rgb, "JPEG", quality=90, progressive=True)
    if cls == "I;16 PNG":
        g = _rgb(w, h, seed)[..., 0].astype(np.uint16) * 257 + np.arange(w, dtype=np.uint16)  # over 255 too
        return _save(Image.fromarray(g.astype("<u2")), "PNG")
    if cls == "I TIFF":
        g = _rgb(w, h, seed)[..., 0].astype(np.int32) * 65536 - 2**30  # negative and past 16 bits
        return _save(Image.fromarray(g.astype("<i4")), "TIFF")
    if cls == "YCbCr TIFF":  # photometric YCbCr: opens as mode YCbCr, which a convert("RGB") turns
        return _save(rgb.convert("YCbCr"), "TIFF")
    if cls == "broken BLP":  # a BLP2 header naming encoding 9, which Pillow does not know: it opens, load raises
        return _blp(w, h, seed)
    if cls == "P PNG tRNS":
        pal = rgb.quantize(16, dither=Image.Dither.NONE)
        return _save(pal, "PNG", transparency=bytes([0, 128, 255] + [255] * 13))
    if cls == "LA PNG":
        la = np.stack([_rgb(w, h, seed)[..., 1], _alpha(w, h, seed)], -1)
        return _save(Image.fromarray(la), "PNG")
    if cls == "RGBA PNG":
        rgba = np.dstack([_rgb(w, h, seed), _alpha(w, h, seed)])
        return _save(Image.fromarray(rgba), "PNG")
    if cls == "ICC PNG":
        profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("XYZ"))  # not sRGB: applying it changes pixels
        return _save(rgb, "PNG", icc_profile=profile.tobytes())
    if cls.startswith("animated") or cls == "APNG":
        frames = [Image.fromarray(_rgb(w, h, seed, shift=k)) for k in range(3)]  # every frame differs
        fmt, opts = {"animated GIF": ("GIF", {}), "animated WebP": ("WEBP", {"lossless": True}),
                     "APNG": ("PNG", {})}[cls]  # fmt: skip
        return _save(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0, **opts)
    if cls.startswith("truncated"):
        whole = _save(rgb, cls.split()[1])
        data = whole.find(b"\xff\xda" if "JPEG" in cls else b"IDAT")  # cut inside the image data, headers whole
        return whole[: data + (len(whole) - data) // 2]
    if cls == "corrupt JPEG":
        whole = _save(rgb, "JPEG", quality=90)
        sos = whole.find(b"\xff\xda")  # keep every header up to the scan, then garbage
        junk = np.random.default_rng(seed).integers(0, 255, len(whole) - sos, dtype=np.uint8).tobytes()
        return whole[: sos + 14] + junk.replace(b"\xff", b"\x00") + b"\xff\xd9"
    return _bomb()


def encoded_cases() -> st.SearchStrategy[tuple[str, int, int, int]]:
    """(class, width, height, seed) over every class, 13x9 to 40x30; shrinks towards the first class, 13x9."""
    return st.tuples(st.sampled_from(ENCODED_CLASSES), st.integers(13, 40), st.integers(9, 30), st.integers(0, 2**16))
