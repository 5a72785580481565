"""The checkpoint's decode of the bytes a client sends (claim C20's trained side, semantics §20.8).

Why transformers' ``load_image``: it is what a checkpoint's processor documentation and pipelines call on an image
URL, path or base64 string before the processor runs; run for real here (transformers 5.24.0, the trained side's
version), on the data URI and on the file path as a client sends them. It decodes with Pillow, applies the EXIF
orientation and converts to RGB (alpha dropped), and needs no torchvision. It hands its processor a PIL ``RGB``
image.

The model card's recipe (CARD, ``qwen_vl_utils.fetch_image``) is not a row of C20 (`CARD_NOT_RUN`): `card` runs it
in a process of its own (torchvision as a companion), at sizes its resize keeps, beside TRAINED.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import io
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from deferlab.impl.image_bytes import KINDS, Loader, LoaderRefused, Refusal, data_uri, write_file
from deferlab.reference.oracle import bytes_served
from deferlab.reference.system.video import Unsupported

__all__ = ["KINDS", "card", "decode_problem", "decoded", "difference", "option_problem", "real", "restated", "trained"]
TRANSFORMERS_VERSION = "5.24.0"  # the trained side's (the ``transformers`` extra's pin, semantics §18.1)
MODULE = "transformers.image_utils"
CARD_MODULE = "qwen_vl_utils.vision_process"
FUNCTION = f"{MODULE}.load_image"
CARD_NOT_RUN = (
    "CARD is no C20 row: the card's qwen_vl_utils.fetch_image needs torchvision (a companion no engine process can "
    "take beside its own) and resizes in the same call; it is compared with TRAINED in a process of its own at "
    "sizes its resize keeps (semantics §20.8)"
)


def trained() -> Loader:
    """The trained side of C20 (label ``TRAINED``), with Pillow's default flags: transformers' ``load_image`` run
    for real where this process runs transformers `TRANSFORMERS_VERSION`; in an engine's process, which runs the
    transformers that release pins (a companion, semantics §18.6), `restated`, checked bitwise against the real
    one on every encoded class in a process of its own (``tests/impl/test_image_bytes.py``)."""
    try:
        version = importlib.import_module("transformers").__version__
    except (ImportError, AttributeError):  # not installed (the README's install), or the loader's stand-in for it
        return restated("transformers is not installed here (the transformers extra)")
    return real() if version == TRANSFORMERS_VERSION else restated(f"this process runs transformers {version}")


def real() -> Loader:
    """transformers' ``load_image`` run for real, on the data URI or the file path a client sends."""
    module = importlib.import_module(MODULE)
    version = importlib.import_module("transformers").__version__

    def run(data: bytes, kind: str) -> Any:
        return module.load_image(data_uri(data) if kind == "data-uri" else str(write_file(data)))

    return Loader("TRAINED", f"transformers {version}", FUNCTION, run, truncated=False)


def restated(why: str = "") -> Loader:
    """``load_image``'s rule in deferlab's words (semantics §20.8): Pillow opens the bytes (the file), applies the
    EXIF orientation, converts to RGB. Used where the process's transformers is not the trained side's."""

    def run(data: bytes, kind: str) -> Any:
        image = Image.open(io.BytesIO(data) if kind == "data-uri" else write_file(data))
        return ImageOps.exif_transpose(image).convert("RGB")

    note = f"restated: {why}; checked bitwise against {FUNCTION} {TRANSFORMERS_VERSION}" if why else "restated"
    return Loader("TRAINED", f"deferlab restatement of transformers {TRANSFORMERS_VERSION}", f"{__name__}.restated",
                  run, truncated=False, note=note)  # fmt: skip


def card() -> Loader:
    """The Qwen model card's loader (label ``CARD``): ``qwen_vl_utils.fetch_image`` run for real on the data URI or
    the ``file://`` URL, at the image's own size, which its ``smart_resize`` keeps only at multiples of 28 (an area
    of at least 4 x 28 x 28): there its resize is a same-size copy and the result is the decode alone; elsewhere
    `Unsupported`. qwen-vl-utils imports torchvision: made importable as the loader's companion
    (`impl.transformers_tv.provide_torchvision`), so call this in a process of its own, before anything imports
    transformers' image processors; `Unsupported` in one line when it cannot be."""
    from deferlab.impl.loader.provenance import Records
    from deferlab.impl.transformers_tv import Unavailable, provide_torchvision

    try:
        provide_torchvision(Records())
        vision = importlib.import_module(CARD_MODULE)
    except (Unavailable, ImportError) as e:
        raise Unsupported(f"CARD: {CARD_MODULE} cannot be imported here: {e}") from e

    def run(data: bytes, kind: str) -> Any:
        w, h = Image.open(io.BytesIO(data)).size  # the stored size: CARD turns nothing
        if vision.smart_resize(h, w, factor=28) != (h, w):
            raise Unsupported(f"CARD resizes {w}x{h}: only multiples of 28 (area >= 3136) give its decode alone")
        url = data_uri(data) if kind == "data-uri" else write_file(data).as_uri()
        return vision.fetch_image({"image": url, "resized_height": h, "resized_width": w})

    version = importlib.metadata.version("qwen-vl-utils")
    return Loader("CARD", f"qwen-vl-utils {version}", f"{CARD_MODULE}.fetch_image", run, truncated=False)


def decoded(loader: Any, data: bytes, kind: str) -> tuple[Any, Refusal | None]:
    """(image, None) or (None, the `Refusal`, whose ``str`` is its one line): a side's answer for the bytes, a
    refusal kept as an answer."""
    try:
        return loader.load(data, kind), None
    except LoaderRefused as e:
        return None, e.refusal


def difference(want: Any, got: Any, label: str) -> str | None:
    """None when ``got`` equals ``want`` (size, mode, every pixel bitwise), else the first way it differs, named
    by ``label`` (the served side)."""
    if got.size != want.size:
        return f"{label}: size {got.size[0]}x{got.size[1]} != trained {want.size[0]}x{want.size[1]}"
    if got.mode != want.mode:
        return f"{label}: mode {got.mode} != trained {want.mode}"
    a, b = np.asarray(got), np.asarray(want)
    if a.shape != b.shape:
        return f"{label}: array {a.shape} != trained {b.shape}"
    differ = (a != b).reshape(a.shape[0], a.shape[1], -1).any(axis=-1)
    if not differ.any():
        return None
    y, x = (int(i) for i in np.argwhere(differ)[0])
    return (
        f"{label}: {int(differ.sum())} of {differ.size} pixels differ (first at ({y}, {x}): served "
        f"{a[y, x].tolist()}, trained {b[y, x].tolist()})"
    )


def decode_problem(want: Any, got: Any, data: bytes, kind: str, rule: Any = None) -> str | None:
    """C20 on one request: the served loader ``got`` against the trained ``want``; a refusal on one side only is
    a difference, on both an agreement (semantics §20.8). With the engine's stated ``rule``
    (`reference.oracle.bytes_served.rule_for`), a difference the rule does not give, or a shared refusal of another
    type than the rule's, is worded as such (a signature of its own)."""
    t, t_refused = decoded(want, data, kind)
    s, s_refused = decoded(got, data, kind)
    why = None if rule is None else bytes_served.differs(rule(data), s, s_refused)
    odd = "" if why is None else f", not as {bytes_served.SECTION} states the engine's own rule ({why})"
    if t_refused and s_refused:
        return None if why is None else f"{got.label}: refused as the trained side does{odd}: {s_refused}"
    if t_refused:
        return f"{got.label}: the served side took what the trained side refuses{odd} ({t_refused})"
    if s_refused:
        return f"{got.label}: the served side refused what the trained side takes{odd} ({s_refused})"
    found = difference(t, s, got.label)
    if found is None or why is None:
        return found
    label, _, rest = found.partition(": ")
    return f"{label}{odd}: {rest}"


def option_problem(got: Any, data: bytes, kind: str, options: dict[str, Any], rule: Any) -> str | None:
    """C20 under a user's server environment or a request's own image options (``options``, split by
    `bytes_served.split`): the served answer against the engine's stated ``rule`` only (the checkpoint has no such
    option; semantics §20.8 "Options"). Under a request option, the side's processor cache key (where it has one)
    must differ from the default request's wherever the two images differ."""
    env, request = bytes_served.split(options)
    image, refused, key = None, None, None
    try:
        image, key = got.keyed(data, kind, request) if request else (got.load(data, kind, env), None)
    except LoaderRefused as e:
        refused = e.refusal
    why = bytes_served.differs(rule(data, env, request), image, refused)
    if why is None and key is not None:
        plain, plain_key = got.keyed(data, kind)
        if plain_key == key and difference(plain, image, got.label) is not None:
            why = f"its processor cache key is the default request's ({key[:12]}...) for another image"
    if why is None:
        return None
    answer = str(refused) if refused else f"{image.mode} {image.size[0]}x{image.size[1]}"
    return f"{got.label}, not as {bytes_served.SECTION} states the engine's own rule: {why} (served: {answer})"
