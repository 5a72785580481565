# deferlab reproducer (format 1): claim C20 on vllm-0.34.0
# Claim: C20: The image an engine's media loader makes of the bytes a client sends equals the checkpoint's decode
#   of the same bytes (size, orientation, mode, pixels; refusals agree).
# System: vllm-0.34.0 (vllm 0.34.0, commit -)
# Spec: 0.34.0
# Model family: qwen2.5-vl (Qwen2.5-VL), the engine's default serving path
# Flaw: the image an engine's media loader makes of a client's bytes differs from load_image's
# Recorded failure: AssertionError: [P PNG tRNS 17x11; data-uri] VLLM: 31 of 187 pixels differ (first at (5, 6):
#   served [205, 238, 159], trained [155, 221, 64]); [P PNG tRNS 17x11; file] VLLM: 31 of 187 pixels differ (first
#   at (5, 6): served [205, 238, 159], trained [155, 221, 64])
# Counterexample: deferlab's minimal counterexample, from versions.json: ['P PNG tRNS', 17, 11, 0]
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --vllm SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no vLLM dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F38 (C20 on qwen2.5-vl:vllm-0.34.0): the image an engine's media loader makes of a client's bytes differs from load_image's."""

import io
import os
import pathlib
import struct
import tempfile
import zlib

import numpy as np
from PIL import Image, ImageCms, ImageFile
from transformers.image_utils import load_image
from vllm.multimodal.media.connector import MediaConnector

# The encoded image deferlab's counterexample names (properties.strategies.encoded's classes)
CLS = 'P PNG tRNS'
WIDTH = 17
HEIGHT = 11
SEED = 0
# How the client sends it: a data URI or a file: URL (semantics §20.8)
KIND = 'file'
MEDIA_TYPE = 'image/png'
SUFFIX = '.png'


def _rgb(w, h, seed, shift=0):
    """(h, w, 3) uint8: a gradient plus noise, no symmetry (a mirror or transpose changes it)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + 2 * y + shift * 85) % 256], -1)
    return ((base + rng.integers(0, 64, (h, w, 3))) % 256).astype(np.uint8)


def _alpha(w, h, seed):
    """(h, w) uint8: opaque, transparent and half-transparent bands."""
    rng = np.random.default_rng(seed + 1)
    a = np.full((h, w), 255, np.uint8)
    a[:, : w // 3] = 0
    a[:, w // 3 : 2 * w // 3] = rng.integers(1, 255, (h, 2 * w // 3 - w // 3))
    return a


def _save(image, fmt, **options):
    buf = io.BytesIO()
    image.save(buf, fmt, **options)
    return buf.getvalue()


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _make_bytes(cls, w, h, seed):
    """The bytes a client sends: an image of class ``cls`` (w x h stored), made with Pillow here."""
    rgb = Image.fromarray(_rgb(w, h, seed))
    if cls in ("RGB JPEG", "RGB PNG"):
        return _save(rgb, cls.split()[1], **({"quality": 90} if "JPEG" in cls else {}))
    if cls.startswith("JPEG EXIF"):
        exif = Image.Exif()
        exif[0x0112] = int(cls.rsplit(" ", 1)[1])  # the EXIF orientation tag
        return _save(rgb, "JPEG", quality=90, exif=exif.tobytes())
    if cls in ("CMYK JPEG", "YCCK JPEG"):
        cmyk = _save(rgb.convert("CMYK"), "JPEG", quality=90)
        at = cmyk.find(b"Adobe")  # YCCK: the Adobe APP14 transform byte set to 2 (Pillow has no YCCK writer)
        return cmyk if cls == "CMYK JPEG" else cmyk[: at + 11] + b"\x02" + cmyk[at + 12 :]
    if cls == "progressive JPEG":
        return _save(rgb, "JPEG", quality=90, progressive=True)
    if cls == "I;16 PNG":
        g = _rgb(w, h, seed)[..., 0].astype(np.uint16) * 257 + np.arange(w, dtype=np.uint16)
        return _save(Image.fromarray(g.astype("<u2")), "PNG")
    if cls == "I TIFF":
        g = _rgb(w, h, seed)[..., 0].astype(np.int32) * 65536 - 2**30
        return _save(Image.fromarray(g.astype("<i4")), "TIFF")
    if cls == "YCbCr TIFF":
        return _save(rgb.convert("YCbCr"), "TIFF")
    if cls == "broken BLP":  # a BLP2 header naming an encoding Pillow does not know
        palette = np.random.default_rng(seed).integers(0, 256, 1024, dtype=np.uint8).tobytes()
        return b"BLP2" + struct.pack("<i", 1) + bytes([9, 0, 0, 0]) + struct.pack("<II", w, h) + bytes(128) + palette
    if cls == "P PNG tRNS":
        pal = rgb.quantize(16, dither=Image.Dither.NONE)
        return _save(pal, "PNG", transparency=bytes([0, 128, 255] + [255] * 13))
    if cls == "LA PNG":
        return _save(Image.fromarray(np.stack([_rgb(w, h, seed)[..., 1], _alpha(w, h, seed)], -1)), "PNG")
    if cls == "RGBA PNG":
        return _save(Image.fromarray(np.dstack([_rgb(w, h, seed), _alpha(w, h, seed)])), "PNG")
    if cls == "ICC PNG":
        profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("XYZ"))  # not sRGB
        return _save(rgb, "PNG", icc_profile=profile.tobytes())
    if cls.startswith("animated") or cls == "APNG":
        frames = [Image.fromarray(_rgb(w, h, seed, shift=k)) for k in range(3)]
        fmt, opts = {"animated GIF": ("GIF", {}), "animated WebP": ("WEBP", {"lossless": True}),
                     "APNG": ("PNG", {})}[cls]
        return _save(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0, **opts)
    if cls.startswith("truncated"):
        whole = _save(rgb, cls.split()[1])
        data = whole.find(b"\xff\xda" if "JPEG" in cls else b"IDAT")  # cut inside the image data
        return whole[: data + (len(whole) - data) // 2]
    if cls == "corrupt JPEG":
        whole = _save(rgb, "JPEG", quality=90)
        sos = whole.find(b"\xff\xda")
        junk = np.random.default_rng(seed).integers(0, 255, len(whole) - sos, dtype=np.uint8).tobytes()
        return whole[: sos + 14] + junk.replace(b"\xff", b"\x00") + b"\xff\xd9"
    # "bomb PNG": a valid PNG whose header declares over twice Pillow's MAX_IMAGE_PIXELS
    width = 20_000
    height = (2 * Image.MAX_IMAGE_PIXELS + 1) // width + 1
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * (width + 1))
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


_REQUEST_FILES = tempfile.TemporaryDirectory(prefix="deferlab-repro-")  # removed when the script ends


def _file(data):
    """The bytes as the file a client names (a file: URL's target), in the script's own folder."""
    path = os.path.join(_REQUEST_FILES.name, f"image{len(os.listdir(_REQUEST_FILES.name))}" + SUFFIX)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _answer(load, data):
    """(the image as size, mode and uint8 pixels) or the refusal's one line: a side's answer for the bytes."""
    try:
        image = load(data)
        return image.size, image.mode, np.asarray(image)
    except Exception as e:  # Pillow's refusals: OSError, DecompressionBombError, SyntaxError, ...
        return f"refused ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"


def _trained(data):
    """transformers' load_image of the same request (the data URI, or the file's path), with Pillow's default
    flags, as the checkpoint's own process has them (an engine's import may have changed them in this one)."""
    was = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        if KIND == "data-uri":
            import base64

            return _answer(load_image, f"data:{MEDIA_TYPE};base64," + base64.b64encode(data).decode("ascii"))
        return _answer(load_image, _file(data))
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = was


def test_c20_decoded_bytes_equal_the_checkpoints():
    """vLLM's media connector's image of the bytes equals load_image's:
    size, mode, every pixel bitwise; a refusal on one side only is a difference, a refusal on both agreement
    (semantics §20.8)."""
    data = _make_bytes(CLS, WIDTH, HEIGHT, SEED)
    served, trained = _served(data), _trained(data)
    if isinstance(served, str) and isinstance(trained, str):
        return  # both refuse the bytes: they agree
    assert not isinstance(served, str), f"the served side refused what the trained side takes: {served}"
    assert not isinstance(trained, str), f"the served side took what the trained side refuses: {trained}"
    assert served[:2] == trained[:2], f"size, mode {served[:2]} != the checkpoint's {trained[:2]}"
    differ = (served[2] != trained[2]).reshape(served[2].shape[0], served[2].shape[1], -1).any(axis=-1)
    if differ.any():
        y, x = (int(i) for i in np.argwhere(differ)[0])
        raise AssertionError(
            f"{int(differ.sum())} of {differ.size} pixels differ (first at ({y}, {x}): served "
            f"{served[2][y, x].tolist()}, trained {trained[2][y, x].tolist()})"
        )


def _served(data):
    """vLLM's loader of an image_url: MediaConnector.fetch_image on the file as a file: URL under
    --allowed-local-media-path; a data URI's decoded bytes (pybase64's step) go to the connector's own
    ImageMediaIO.load_bytes, where load_base64 hands them."""
    path = _file(data)
    connector = MediaConnector(allowed_local_media_path=os.path.dirname(path))
    if KIND == "data-uri":
        return _answer(connector._image_io("RGB").load_bytes, data)
    return _answer(connector.fetch_image, pathlib.Path(path).as_uri())
