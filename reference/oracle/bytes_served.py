"""vLLM's own decode of a client's bytes, as semantics §20.8 states it (claim C20 reads vLLM's differences
against it).

Why a restatement: C20 compares each engine with the checkpoint's ``load_image``. Where vLLM already differs (its
transparent cells), a second difference of the same shape (compositing with another band, a decode error left as
itself) changed no failure signature, and vLLM's two limits, the pixel cap and the request's decoded-bytes
budget, are only reached under a user's environment. The rule says what vLLM gives for the bytes, so a served
answer that is neither the trained side's nor the rule's is a difference of its own. Pillow is called where vLLM
itself calls Pillow (open, EXIF transpose, convert, paste); nothing here imports vLLM.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from PIL import Image, ImageFile, ImageOps

SECTION = "semantics §20.8"
CAP, BUDGET = "VLLM_MAX_IMAGE_PIXELS", "VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES"
BACKGROUND = "rgba_background_color"  # a request's own option (media_io_kwargs["image"]), not the environment
DEFAULTS = {CAP: 178_956_970, BUDGET: 715_827_880}
# vLLM 0.33.0-0.34.0's allowlist of Pillow formats (``multimodal/image.py``), the same 37 names in both.
ALLOWED = ("AVIF BLP BMP CUR DCX DDS DIB FITS FLI FTEX GBR GIF ICNS ICO IM IMT IPTC JPEG JPEG2000 MCIDAS MSP PCD PCX "
           "PIXAR PNG PPM PSD QOI SGI SPIDER SUN TGA TIFF WEBP XBM XPM XVTHUMB").split()  # fmt: skip
# Which Pillow errors each release turns into ValueError("Failed to load image: ...") (step 6).
CAUGHT: dict[str, tuple[type[BaseException], ...]] = {
    "0.33.0": (OSError, SyntaxError),
    "0.34.0": (OSError, SyntaxError, RuntimeError, Image.DecompressionBombError),
}
# The option cases (a user's environment), on RGB PNG 17 x 11: 187 pixels, 748 bytes (§20.8 "Options").
OPTIONS: tuple[dict[str, int], ...] = (
    *({CAP: v} for v in (-1, 0, 1, 186, 187)),
    *({BUDGET: v} for v in (-1, 0, 747, 748)),
)
OPTION_CASE = ("RGB PNG", 17, 11, 0)
# A client's background for transparent pixels (§20.8 "A client's own background"), on RGBA PNG 17 x 11: judged
# against the rule, and its processor cache key against the default request's.
REQUESTS: tuple[dict[str, tuple[int, int, int]], ...] = ({BACKGROUND: (0, 0, 0)},)
REQUEST_CASE = ("RGBA PNG", 17, 11, 0)
TRANSPARENT_MODES = ("RGBA", "LA", "PA")


class ServedRefusal(Protocol):
    """What `differs` reads of a served side's refusal (``impl.image_bytes.Refusal`` is one): the exception type's
    name and its message. Why fields: the type is compared as itself, never parsed back out of the refusal's one
    line ``"<LABEL> refused: <Type>: <message>"``; a protocol, since the oracle never imports the code it judges."""

    @property
    def error_type(self) -> str: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class Said:
    """The rule's answer: an RGB image, or a refusal of type ``refusal`` whose text names each of ``names``."""

    image: Image.Image | None = None
    refusal: str | None = None
    names: tuple[str, ...] = ()


def split(options: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, Any]]:
    """(the server environment, the request's own image options) of one option case's names."""
    env = {k: v for k, v in options.items() if k in DEFAULTS}
    return env, {k: v for k, v in options.items() if k not in DEFAULTS}


def _limit(options: Mapping[str, int], name: str) -> int:
    return int(options.get(name, DEFAULTS[name]))


def _limits(w: int, h: int, options: Mapping[str, int]) -> Said | None:
    """Steps 2-3: the cap on the stored size, then one image's 4 bytes a pixel against a fresh request budget."""
    cap = _limit(options, CAP)
    if cap > 0 and w * h > cap:
        return Said(refusal="ValueError", names=(f"{w}x{h}", f"{w * h} pixels", str(cap)))
    limit, charged = _limit(options, BUDGET), 4 * w * h
    if limit > 0 and charged > limit:
        return Said(refusal="ValueError", names=(f"={limit}", f"({charged} bytes)"))
    return None


def to_rgb(image: Image.Image, background: tuple[int, int, int]) -> Image.Image:
    """Step 5: transparency composited onto ``background`` through the alpha band; RGB kept; anything else
    converted."""
    if image.mode in TRANSPARENT_MODES or "transparency" in image.info:
        rgba = image if image.mode == "RGBA" else image.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, tuple(background))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    return image if image.mode == "RGB" else image.convert("RGB")


def vllm_decode(data: bytes, release: str, options: Mapping[str, int] | None = None, request: Mapping[str, Any] | None = None) -> Said:  # fmt: skip
    """What vLLM ``release`` (0.33.0 or 0.34.0) hands on for ``data`` under the environment ``options`` and the
    request's own ``media_io_kwargs["image"]`` (``request``: its background), with Pillow's flags as vLLM's process
    has them (``LOAD_TRUNCATED_IMAGES`` False, whatever this process holds; restored after)."""
    before = ImageFile.LOAD_TRUNCATED_IMAGES  # Pillow's process-global flag, at vLLM's process value (its default)
    ImageFile.LOAD_TRUNCATED_IMAGES = False  # another library in this process (LMDeploy sets it) must not decide
    try:
        return _vllm_decode(data, release, options or {}, request)
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = before


def _vllm_decode(data: bytes, release: str, options: Mapping[str, int], request: Mapping[str, Any] | None) -> Said:
    background = tuple((request or {}).get(BACKGROUND, (255, 255, 255)))
    try:
        image = Image.open(io.BytesIO(data), formats=ALLOWED)
        refused = _limits(*image.size, options)
        if refused is not None:
            return refused
        try:
            image = ImageOps.exif_transpose(image)
        except Exception:  # noqa: BLE001 - step 4: an orientation error is ignored
            pass
        image.load()
        return Said(image=to_rgb(image, background))
    except Exception as e:  # noqa: BLE001 - step 6 sorts Pillow's errors by the release's list
        if isinstance(e, CAUGHT[release]):
            return Said(refusal="ValueError", names=("Failed to load image",))
        return Said(refusal=type(e).__name__)


RULES: dict[str, tuple[str, Callable[..., Said]]] = {"vllm": (SECTION, vllm_decode)}


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def stated() -> str:
    """The releases whose decode the semantics restate, as C20's evidence names them (``"vLLM 0.33.0-0.34.0"``):
    the span of `CAUGHT`'s releases, read off the table so a release added there is named without another edit
    (`rule_for` answers for exactly the table's releases)."""
    releases = sorted(CAUGHT, key=_release)
    return "vLLM " + (releases[0] if len(releases) == 1 else f"{releases[0]}-{releases[-1]}")


def rule_for(system: str) -> Callable[..., Said] | None:
    """The stated decode of the loader whose ``system`` reads ``"vllm 0.34.0"``, bound to its release; None where
    the semantics restate none (another engine, or a release outside `CAUGHT`)."""
    name, _, release = str(system).partition(" ")
    found = RULES.get(name.lower())
    if found is None or release not in CAUGHT:
        return None
    return lambda data, options=None, request=None: found[1](data, release, options, request)


def differs(said: Said, image: Image.Image | None, refusal: ServedRefusal | None) -> str | None:
    """None when the served answer (an image, or a `ServedRefusal`: its type, the names in its message) is the
    rule's; else what the rule gives instead, in one line."""
    if said.refusal is not None:
        if refusal is None:
            return f"the rule refuses ({said.refusal} naming {', '.join(said.names) or 'nothing'})"
        missing = [n for n in said.names if n not in refusal.message]
        if refusal.error_type != said.refusal or missing:
            return f"the rule refuses as {said.refusal} naming {', '.join(said.names) or 'nothing'}"
        return None
    if image is None:
        return "the rule takes it"
    want = said.image
    assert want is not None
    if image.size != want.size or image.mode != want.mode:
        return f"the rule gives {want.mode} {want.size[0]}x{want.size[1]}"
    a, b = np.asarray(image), np.asarray(want)
    if a.shape != b.shape:
        return f"the rule gives an array of {b.shape}"
    if not np.array_equal(a, b):
        return f"the rule gives other values ({int((a != b).sum())} of {a.size} differ)"
    return None
