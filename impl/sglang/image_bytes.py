"""SGLang's own loader of an image from the bytes a client sends (claim C20, semantics §20.8).

What runs: the release's ``BaseMultimodalProcessor._load_single_item(url, Modality.IMAGE)``
(``sglang.srt.multimodal.processors.base_processor``), the call every image processor of the families SGLang
serves makes on a request's ``image_url``: ``utils.common.load_image`` (a ``data:`` URI or a ``file://`` URL), then
``convert("RGB")`` of a non-RGB image (``discard_alpha_channel``; ``smart_rgb_conversion`` is GLM-4V's only). On a
host without CUDA the JPEG is Pillow's (nvJPEG runs on a GPU only): the verdict is the CPU path's. SGLang leaves
Pillow's flags at their defaults.

A data URI's base64 is decoded by ``pybase64``, SGLang's dependency, which is not installed here (the loader stands
it in): a data URI is handed to the same function as its decoded bytes (``load_image``'s ``bytes`` branch, the rest
of the path unchanged); a file goes the whole way as a ``file://`` URL.
"""

from __future__ import annotations

from typing import Any

from deferlab.impl.image_bytes import PYBASE64, Loader, write_file

MODULE = "sglang.srt.multimodal.processors.base_processor"
FUNCTION = f"{MODULE}.BaseMultimodalProcessor._load_single_item"


def image_loaders(source: Any) -> list[Loader]:
    """SGLang's one image loader of the loaded release ``source`` (label ``SGLANG``)."""
    base = source.module(MODULE)
    processor, image = base.BaseMultimodalProcessor, base.Modality.IMAGE

    def run(data: bytes, kind: str) -> Any:
        return processor._load_single_item(data if kind == "data-uri" else write_file(data).as_uri(), image)

    return [Loader("SGLANG", f"sglang {source.version}", FUNCTION, run, truncated=False, note=PYBASE64)]
