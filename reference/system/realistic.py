"""A realistic input distribution, as parameters drawn on demand (semantics §21.5): what clients send, not a grid.

Why: the grid sweeps (every size to 4,096 per side, 6,000 clips) say *whether* an engine differs; a user asks
*how often* a real upload hits it. Each class below is a kind of image or video people send, with its weight, a
size generator, its mode, EXIF orientations and the published source its numbers come from. Nothing is stored:
`images(n, seed)` and `videos(n, seed)` draw parameter records (NumPy's PCG64, so one seed gives one list), and
callers that need pixels make them from the record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from deferlab.reference.system.errors import InputValueError

Size = tuple[int, int]
Draw = Callable[[np.random.Generator], Size]


@dataclasses.dataclass(frozen=True)
class ImageRecord:
    """One image as a client would send it: stored pixel size, PIL mode, EXIF orientation (1 = none)."""

    kind: str
    width: int
    height: int
    mode: str
    orientation: int


@dataclasses.dataclass(frozen=True)
class VideoRecord:
    """One clip: frame size, frame rate (NTSC rates as 30000/1001 etc.), duration in seconds, frame count."""

    kind: str
    width: int
    height: int
    fps: float
    duration: float
    frames: int


@dataclasses.dataclass(frozen=True)
class ImageClass:
    """A kind of image: its share of uploads, sizes (within ``bounds``: min and max side), modes, orientations."""

    name: str
    weight: float
    draw: Draw
    bounds: Size
    modes: tuple[tuple[str, float], ...]
    orientations: tuple[tuple[int, float], ...]
    source: str


@dataclasses.dataclass(frozen=True)
class VideoClass:
    """A kind of clip: its share, frame sizes, frame rates and duration range (seconds)."""

    name: str
    weight: float
    sizes: tuple[Size, ...]
    rates: tuple[float, ...]
    duration: tuple[float, float]
    source: str


def _one_of(*sizes: Size) -> Draw:
    return lambda rng: sizes[int(rng.integers(len(sizes)))]


def _square(sides: tuple[int, ...]) -> Draw:
    return lambda rng: (s := sides[int(rng.integers(len(sides)))], s)


def _receipt(rng: np.random.Generator) -> Size:
    return 576, int(rng.integers(800, 3001))  # 80 mm paper, 576 dots a line; a printed length of 10-38 cm


def _panorama(rng: np.random.Generator) -> Size:
    return int(rng.integers(8000, 16001)), int(rng.integers(3000, 4033))


def _sticker(rng: np.random.Generator) -> Size:
    side = int(rng.integers(256, 2049))
    return side, int(side * rng.uniform(0.5, 1.0))


_UPRIGHT = ((1, 1.0),)
_PHONE = ((1, 0.55), (6, 0.35), (3, 0.05), (8, 0.05))  # landscape-sensor phones held upright tag 6 (rotate 90)
NTSC = (24000 / 1001, 30000 / 1001, 60000 / 1001)

IMAGE_CLASSES = (
    ImageClass("phone 12 MP", 0.22, _one_of((4032, 3024), (4032, 2268)), (2268, 4032), (("RGB", 1.0),), _PHONE,
               "Apple iPhone 12-14 technical specifications: 12 MP main camera, 4032x3024 (4:3), 4032x2268 (16:9)"),
    ImageClass("phone 48 MP binned", 0.08, _one_of((4032, 3024), (5712, 4284), (8064, 6048)), (3024, 8064),
               (("RGB", 1.0),), _PHONE,
               "Apple iPhone 15 Pro technical specifications: 48 MP sensor 8064x6048, 24 MP default 5712x4284, "
               "12 MP binned 4032x3024"),
    ImageClass("android 12.5 MP", 0.12, _one_of((4000, 3000), (4080, 3072), (4000, 2252)), (2252, 4080),
               (("RGB", 1.0),), _PHONE,
               "Samsung Galaxy S23 and Google Pixel 8 specifications: 50 MP sensors binned to 12 MP, "
               "4000x3000 and 4080x3072"),
    ImageClass("camera 24 MP", 0.04, _one_of((6000, 4000), (6000, 3376)), (3376, 6000), (("RGB", 1.0),),
               ((1, 0.8), (6, 0.15), (8, 0.05)),
               "Canon EOS R10, Nikon Z50 and Sony a6400 specifications: 24 MP APS-C, 6000x4000"),
    ImageClass("desktop screenshot", 0.12,
               _one_of((1920, 1080), (1366, 768), (1536, 864), (2560, 1440), (1440, 900), (1280, 720), (3840, 2160),
                       (2880, 1800)),
               (720, 3840), (("RGB", 0.4), ("RGBA", 0.6)), _UPRIGHT,
               "StatCounter Global Stats, desktop screen resolution worldwide (1920x1080, 1366x768, 1536x864, "
               "2560x1440, 1440x900, 1280x720 lead); Apple MacBook Pro 2880x1800 Retina"),
    ImageClass("phone screenshot", 0.12,
               _one_of((1170, 2532), (1179, 2556), (1290, 2796), (1080, 2400), (1080, 2340), (720, 1600)),
               (720, 2796), (("RGBA", 0.5), ("RGB", 0.5)), _UPRIGHT,
               "Apple iPhone 12-15 display specifications (1170x2532, 1179x2556, 1290x2796); StatCounter mobile "
               "screen resolution (FHD+ 1080x2400 Android)"),
    ImageClass("RGBA PNG with transparency", 0.06, _sticker, (128, 2048), (("RGBA", 0.8), ("LA", 0.1), ("P", 0.1)),
               _UPRIGHT, "W3C PNG specification (alpha, tRNS); HTTP Archive Web Almanac 2022 Media chapter (PNG share)"),
    ImageClass("scanned A4 / Letter", 0.08, _one_of((1240, 1754), (2480, 3508), (1275, 1650), (2550, 3300)),
               (1240, 3508), (("L", 0.5), ("RGB", 0.4), ("1", 0.1)), _UPRIGHT,
               "ISO 216 A4 210x297 mm and ANSI Letter 8.5x11 in at 150 and 300 dpi"),
    ImageClass("icon", 0.04, _square((16, 32, 48, 64, 128, 180, 256, 512, 1024)), (16, 1024),
               (("RGBA", 0.7), ("P", 0.2), ("RGB", 0.1)), _UPRIGHT,
               "Apple Human Interface Guidelines app icon sizes; Microsoft Windows icon sizes (16-256)"),
    ImageClass("receipt", 0.04, _receipt, (576, 3000), (("L", 0.7), ("RGB", 0.3)), _UPRIGHT,
               "Epson TM-T88 thermal receipt printer specification: 80 mm paper, 576 dots a line at 203 dpi"),
    ImageClass("panorama", 0.02, _panorama, (3000, 16000), (("RGB", 1.0),), ((1, 0.9), (6, 0.1)),
               "Apple iPhone technical specifications: Panorama up to 63 MP (about 16000 wide)"),
    ImageClass("social and web image", 0.06, _one_of((1080, 1080), (1080, 1350), (1200, 630), (1080, 566),
                                                      (1600, 900)),
               (566, 1600), (("RGB", 0.9), ("RGBA", 0.1)), _UPRIGHT,
               "Instagram help centre photo sizes (1080 wide, 1:1, 4:5, 1.91:1); Meta Open Graph 1200x630"),
)  # fmt: skip

VIDEO_CLASSES = (
    VideoClass("phone video", 0.45, ((1920, 1080), (1080, 1920), (3840, 2160), (1280, 720)),
               (30.0, 60.0, 24.0, 25.0) + NTSC, (1.0, 600.0),
               "Apple iPhone 15 technical specifications: 4K and 1080p at 24, 25, 30 and 60 fps"),
    VideoClass("screen recording", 0.15, ((1920, 1080), (2560, 1440), (2880, 1800), (1170, 2532)), (30.0, 60.0),
               (5.0, 300.0), "StatCounter desktop and mobile screen resolutions; macOS and iOS screen recording"),
    VideoClass("film and broadcast", 0.15, ((1920, 1080), (1280, 720), (720, 576), (720, 480), (3840, 2160)),
               (24.0, 25.0, 50.0) + NTSC, (10.0, 1200.0),
               "ITU-R BT.709 (HD) and BT.601 (720x576 PAL at 25, 720x480 NTSC at 30000/1001); film 24 and 24000/1001"),
    VideoClass("short-form social", 0.2, ((1080, 1920), (720, 1280)), (30.0, 60.0, 30000 / 1001), (3.0, 90.0),
               "YouTube Shorts help (vertical, up to 60 s) and TikTok upload guidance (1080x1920)"),
    VideoClass("webcam and security", 0.05, ((640, 480), (1280, 720), (1920, 1080)), (15.0, 30.0, 25.0),
               (10.0, 600.0), "UVC webcam and ONVIF camera profiles: VGA and HD at 15-30 fps"),
)  # fmt: skip


_C = TypeVar("_C", ImageClass, VideoClass)


def _pick(rng: np.random.Generator, options: tuple[tuple[object, float], ...]) -> object:
    weights = np.array([w for _, w in options], dtype=float)
    return options[int(rng.choice(len(options), p=weights / weights.sum()))][0]


def _check(n: int, what: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputValueError(f"{what} n={n!r}: not a positive whole number; accepted: 1 or more")


def _classes(classes: tuple[_C, ...], n: int, seed: int, what: str) -> tuple[np.random.Generator, list[_C]]:
    """The generator of ``seed`` and ``n`` classes drawn from it by weight, all before any record's own draws
    (images and videos draw their lists the same way, so one seed means the same thing to both)."""
    _check(n, what)
    rng = np.random.default_rng(seed)
    weights = np.array([c.weight for c in classes])
    return rng, [classes[int(i)] for i in rng.choice(len(classes), size=n, p=weights / weights.sum())]


def images(n: int = 2000, seed: int = 0) -> list[ImageRecord]:
    """``n`` image records drawn by class weight (semantics §21.5); the same ``seed`` gives the same list."""
    rng, drawn = _classes(IMAGE_CLASSES, n, seed, "images")
    out = []
    for c in drawn:
        w, h = c.draw(rng)
        out.append(ImageRecord(c.name, w, h, str(_pick(rng, c.modes)), int(_pick(rng, c.orientations))))  # type: ignore[call-overload]
    return out


def videos(n: int = 200, seed: int = 0) -> list[VideoRecord]:
    """``n`` clip records: durations log-uniform in the class's range, frames ``round(duration x fps)``, >= 1."""
    rng, drawn = _classes(VIDEO_CLASSES, n, seed, "videos")
    out = []
    for c in drawn:
        w, h = c.sizes[int(rng.integers(len(c.sizes)))]
        fps = c.rates[int(rng.integers(len(c.rates)))]
        low, high = c.duration
        duration = round(float(np.exp(rng.uniform(np.log(low), np.log(high)))), 3)
        out.append(VideoRecord(c.name, w, h, fps, duration, max(1, round(duration * fps))))
    return out


def displayed(record: ImageRecord) -> Size:
    """The size a viewer (and a processor that honours EXIF) sees: orientations 5-8 swap width and height."""
    return (record.height, record.width) if record.orientation >= 5 else (record.width, record.height)
