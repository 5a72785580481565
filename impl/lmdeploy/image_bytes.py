"""LMDeploy's own loader of an image from the bytes a client sends (claim C20, semantics §20.8).

What runs: the release's ``lmdeploy.vl.media.connection.load_from_url(url, ImageMediaIO())``, what its server runs
on an ``image_url`` (a ``data:`` URI, or a ``file:`` URL): ``Image.open(...).convert("RGB")``. Its
``lmdeploy.vl.media.image`` sets ``ImageFile.LOAD_TRUNCATED_IMAGES = True`` at import, for its whole process: the
loader runs with the value that import left (read right after it), not with the test process's.

A data URI's base64 is decoded by ``pybase64``, LMDeploy's dependency, not installed here (the loader stands it
in): a data URI's bytes go to ``ImageMediaIO.load_bytes``, where ``load_base64`` would hand them; a file goes the
whole way through ``load_from_url``.
"""

from __future__ import annotations

from typing import Any

from PIL import ImageFile

from deferlab.impl.image_bytes import PYBASE64, Loader, write_file

CONNECTION, IMAGE = "lmdeploy.vl.media.connection", "lmdeploy.vl.media.image"
FUNCTION = f"{CONNECTION}.load_from_url"


def image_loaders(source: Any, family: str | None = None) -> list[Loader]:
    """LMDeploy's one image loader of the loaded release ``source`` (label ``LMDEPLOY``). ``family`` is not read: every family LMDeploy serves takes this loader's image (semantics §20.8)."""
    media_io = source.module(IMAGE).ImageMediaIO()
    truncated = bool(ImageFile.LOAD_TRUNCATED_IMAGES)  # what LMDeploy's import left for its process
    load_from_url = source.module(CONNECTION).load_from_url

    def run(data: bytes, kind: str) -> Any:
        if kind == "data-uri":
            return media_io.load_bytes(data)
        return load_from_url(write_file(data).as_uri(), media_io)

    return [Loader("LMDEPLOY", f"lmdeploy {source.version}", FUNCTION, run, truncated=truncated, note=PYBASE64)]
