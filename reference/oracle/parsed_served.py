"""What vLLM's input parser hands its processor for a Pillow image handed over directly (semantics §20.8).

The offline path (and the path C13-C15 drive) skips the connector that decodes a client's bytes: the parser
applies the EXIF orientation and converts to RGB with white behind any transparency. C14 reads a vLLM path's
pixel difference against this rule, so that a second difference hiding behind the first (another background,
another band) is seen. Pillow is called only where the described system itself calls it (the paste).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image, ImageOps

from deferlab.reference.oracle import bytes_served

SECTION = "semantics §20.8"
WHITE = (255, 255, 255)
# Releases read (every cached wheel); those before 0.33.0 return an image already in the target mode first.
KEEPS_RGB_FIRST = ("0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")
TRANSPARENCY_FIRST = ("0.33.0", "0.34.0")


def vllm_parse(image: Image.Image, release: str) -> Image.Image:
    """The image vLLM ``release``'s parser hands on for ``image``: EXIF orientation (an error ignored), then RGB
    (transparency composited onto white through the alpha band; an RGB image with a key kept before 0.33.0)."""
    try:
        image = ImageOps.exif_transpose(image)
    except Exception:  # noqa: BLE001 - the parser ignores an orientation error
        pass
    if image.mode == "RGB" and release in KEEPS_RGB_FIRST:
        return image
    return bytes_served.to_rgb(image, WHITE)  # the connector's step 5, with convert_image_mode's default


# The engines whose parse the semantics restate: the releases read, and the rule.
RULES: dict[str, tuple[tuple[str, ...], Callable[[Image.Image, str], Image.Image]]] = {
    "vllm": (KEEPS_RGB_FIRST + TRANSPARENCY_FIRST, vllm_parse)
}


def rule_for(system: str) -> Callable[[Image.Image], Image.Image] | None:
    """The stated parse of the engine whose ``system`` reads ``"vLLM 0.34.0"`` or ``"vllm-0.34.0"`` (a source's
    name), bound to its release; None where the semantics restate none (another engine, a release not read, a
    checkout)."""
    name, _, release = str(system).replace("-", " ", 1).partition(" ")
    found = RULES.get(name.lower())
    if found is None or release not in found[0]:
        return None
    return lambda image: found[1](image, release)


def differs(got: Image.Image, want: Image.Image) -> str | None:
    """None when the parser's image is the rule's bitwise; else the first way it is not, in one phrase."""
    if got.size != want.size or got.mode != want.mode:
        return f"{got.mode} {got.size[0]}x{got.size[1]} where the rule gives {want.mode} {want.size[0]}x{want.size[1]}"
    a, b = np.asarray(got), np.asarray(want)
    diff = np.argwhere(a != b)
    if not len(diff):
        return None
    y, x = (int(v) for v in diff[0][:2])
    return (
        f"{len(diff)} values the rule does not give (first at x={x}, y={y}: {a[y, x].tolist()} for {b[y, x].tolist()})"
    )
