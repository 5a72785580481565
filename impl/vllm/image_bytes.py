"""vLLM's own loader of an image from the bytes a client sends (claim C20, semantics §20.8).

What runs: the release's ``MediaConnector.fetch_image(url)`` (``vllm.multimodal.media.connector``), what the
OpenAI server runs on an ``image_url``: a ``data:`` URI, or a ``file:`` URL under ``--allowed-local-media-path``
(the request folder here), into ``ImageMediaIO.load_bytes`` (EXIF transpose, transparency composited onto white,
``convert("RGB")``). vLLM leaves Pillow's flags at their defaults. Each request gets its own connector with a
fresh decoded-media budget (0.33.0+), as the server's chat content parser builds them, so the budget is charged.

A data URI's base64 is decoded by ``pybase64``, vLLM's dependency, not installed here (the loader stands it in): a
data URI's bytes go to the connector's own ``ImageMediaIO`` (``_image_io("RGB")``, as ``fetch_image`` builds it)
``load_bytes``, where ``load_base64`` would hand them; a file goes the whole way through ``fetch_image``.
"""

from __future__ import annotations

from typing import Any

from deferlab.impl.image_bytes import PYBASE64, Loader, folder, write_file

MODULE = "vllm.multimodal.media.connector"
FUNCTION = f"{MODULE}.MediaConnector.fetch_image"


def image_loaders(source: Any, family: str | None = None) -> list[Loader]:
    """vLLM's one image loader of the loaded release ``source`` (label ``VLLM``), its server's defaults. ``family`` is not read: every vLLM model gets its image from this connector (semantics §20.8)."""
    connectors = source.module(MODULE).MediaConnector
    try:
        budget = getattr(source.module("vllm.multimodal.media.base"), "MediaDecodedBudget", None)
    except ImportError:  # a release without the media package's base module: no budget either
        budget = None

    def run(data: bytes, kind: str, **image_options: Any) -> Any:
        # One connector per request, with a fresh decoded-media budget where the release has one (0.33.0+), and
        # the request's own image options (its media_io_kwargs): what the server's chat content parser builds
        # for each request (semantics §20.8, step 3 and "A client's own background").
        extra = {} if budget is None else {"decoded_budget": budget()}
        if image_options:
            extra["media_io_kwargs"] = {"image": image_options}
        connector = connectors(allowed_local_media_path=str(folder()), **extra)
        if kind == "data-uri":
            return connector._image_io("RGB").load_bytes(data)
        return connector.fetch_image(write_file(data).as_uri())

    try:
        hasher = source.module("vllm.multimodal.hasher").MultiModalHasher
    except (ImportError, AttributeError):  # no processor cache key to check on this release
        hasher = None

    def key(item: Any) -> str:
        """vLLM's own processor cache key of the loaded item (``MultiModalHasher.hash_kwargs``, sha256: the
        default blake3 is not installed here; which keys are equal does not depend on the algorithm)."""
        return hasher.hash_kwargs("sha256", image=item)

    note = f"{PYBASE64}; cache key: {'MultiModalHasher.hash_kwargs (sha256)' if hasher else 'none'}"
    return [Loader("VLLM", f"vllm {source.version}", FUNCTION, run, truncated=False, note=note,
                   key=key if hasher else None)]  # fmt: skip
