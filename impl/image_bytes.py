"""What every side's image loader of claim C20 shares: the request a client sends, and Pillow's process state.

Why one place: the trained side (`properties.bytes_trained`) and each engine's loader (``impl.<engine>.image_bytes``)
must receive the same bytes in the same two forms a client sends them (a base64 data URI, or a file the server
may read), and run with the Pillow state their own process has: LMDeploy sets ``ImageFile.LOAD_TRUNCATED_IMAGES``
at import, for its whole process (semantics §20.8), which would otherwise leak into the other sides run in the
same pytest process. Each loader sets the flag to its process's value around its call and restores it.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import ImageFile

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.video import Refused, Unsupported

KINDS = ("data-uri", "file")  # how a client sends the bytes (`ImageLoader.load`'s ``kind``)
_SIGNATURES = ((b"\xff\xd8", "image/jpeg", ".jpg"), (b"\x89PNG", "image/png", ".png"), (b"GIF8", "image/gif", ".gif"),
               (b"II*\x00", "image/tiff", ".tiff"), (b"MM\x00*", "image/tiff", ".tiff"),
               (b"BLP", "image/x-blp", ".blp"))  # fmt: skip
_FOLDER: list[Path] = []
# What the engines' data-URI branch cannot run here, said in every engine loader's provenance.
PYBASE64 = (
    "data-uri: pybase64 (the engine's base64 decoder) is not installed here, so the decoded bytes enter the engine's "
    "own bytes loader where its base64 step would hand them; file: the engine's whole path"
)


def media_type(data: bytes) -> tuple[str, str]:
    """(MIME type, extension) a client names ``data`` by, read off its signature (WebP: ``RIFF....WEBP``)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", ".webp"
    return next(((m, e) for sig, m, e in _SIGNATURES if data.startswith(sig)), ("image/png", ".png"))


def data_uri(data: bytes) -> str:
    """``data:<type>;base64,<data>``: an OpenAI ``image_url`` carrying the bytes."""
    return f"data:{media_type(data)[0]};base64,{base64.b64encode(data).decode('ascii')}"


def folder() -> Path:
    """The process's folder of request files (a server's ``--allowed-local-media-path``); removed at exit."""
    if not _FOLDER:
        made = Path(tempfile.mkdtemp(prefix="deferlab-bytes-"))
        atexit.register(shutil.rmtree, made, True)
        _FOLDER.append(made)
    return _FOLDER[0]


def write_file(data: bytes) -> Path:
    """``data`` as a file named by its hash and extension, in `folder` (written once)."""
    path = folder() / (hashlib.sha256(data).hexdigest()[:24] + media_type(data)[1])
    if not path.exists():
        path.write_bytes(data)
    return path


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise InputValueError(f"image request kind {kind!r} is not one a client sends; accepted: {', '.join(KINDS)}")


@contextmanager
def truncated_images(allowed: bool) -> Iterator[None]:
    """Pillow's ``LOAD_TRUNCATED_IMAGES`` at ``allowed`` inside, restored after (process-global in Pillow)."""
    before = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = allowed
    try:
        yield
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = before


@contextmanager
def environment(options: dict[str, int] | None) -> Iterator[None]:
    """The server environment ``options`` (``{"VLLM_MAX_IMAGE_PIXELS": 186}``) set inside, restored after: what a
    user's environment at the server's start gives (semantics §20.8 "Options")."""
    before = {name: os.environ.get(name) for name in options or {}}
    os.environ.update({name: str(value) for name, value in (options or {}).items()})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class Refusal:
    """A side's refusal of the bytes, as fields: the side's column ``label``, the ``error_type`` its own call
    raised (the exception type's name) and the first line of its ``message`` (at most 200 characters).

    Why fields: readers compare the type as itself (`reference.oracle.bytes_served.differs`), never parsed back
    out of the one line (``str``) ``"<LABEL> refused: <Type>: <message>"``, which stays the text verdict
    signatures, the versions baseline and claims.toml's patterns read."""

    label: str
    error_type: str
    message: str

    def __str__(self) -> str:
        return f"{self.label} refused: {self.error_type}: {self.message}"


class LoaderRefused(Refused):
    """A `Loader`'s `Refused`, with the refusal as fields (``refusal``: the side, the exception type's name, the
    message's first line); its text is the refusal's one line. Why: readers compare the type without parsing
    the line back (`reference.oracle.bytes_served.differs`)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.refusal,)  # pickled with its fields, not only its text


class Loader:
    """One side's loader (`reference.system.video.ImageLoader`): ``run(data, kind)`` calls the side's own function
    on the request as a client sends it; `load` runs it with the side's Pillow state, materializes a lazily
    returned image (its decode error is the side's refusal at first use) and re-raises any refusal as
    `LoaderRefused` carrying the side's exception type and message."""

    real_code = True

    def __init__(
        self,
        label: str,
        system: str,
        function: str,
        run: Callable[..., Any],
        truncated: bool,
        note: str = "",
        key: Callable[[Any], str] | None = None,
    ) -> None:
        self.label, self.system, self.function, self.note = label, system, function, note
        self._run, self.truncated, self._key = run, truncated, key

    def load(self, data: bytes, kind: str, options: dict[str, int] | None = None, request: dict[str, Any] | None = None) -> Any:  # fmt: skip
        """The side's image for the request, under the server environment ``options`` and the request's own
        image options ``request`` (none: the defaults; only a side whose ``run`` takes them is given them)."""
        return self._load(data, kind, options, request)[0]

    def keyed(self, data: bytes, kind: str, request: dict[str, Any] | None = None) -> tuple[Any, str | None]:
        """(the image, the side's processor cache key of the loaded item; None where the side has no key)."""
        image, item = self._load(data, kind, None, request)
        return image, None if self._key is None else self._key(item)

    def _load(self, data: bytes, kind: str, options: dict[str, int] | None, request: dict[str, Any] | None) -> tuple[Any, Any]:  # fmt: skip
        check_kind(kind)
        with truncated_images(self.truncated), environment(options):
            try:
                item = self._run(data, kind, **request) if request else self._run(data, kind)
                image = getattr(item, "media", item)  # vLLM's MediaWithBytes wraps the image
                np.asarray(image)  # a lazy image decodes here, under the side's own flags
            except Unsupported:
                raise  # no answer here (the side cannot take this request at all): not a refusal of the bytes
            except Exception as e:  # noqa: BLE001 - any exception of the side's own call is its refusal
                text = (str(e).strip().splitlines() or [""])[0][:200]
                raise LoaderRefused(Refusal(self.label, type(e).__name__, text)) from e
        return image, item

    def provenance(self) -> dict[str, str]:
        found = {"decode": self.function, "LOAD_TRUNCATED_IMAGES": str(self.truncated)}
        return found | ({"requests": self.note} if self.note else {})
