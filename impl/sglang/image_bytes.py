"""SGLang's own loader of an image from the bytes a client sends (claim C20, semantics §20.8).

What runs: the release's ``BaseMultimodalProcessor._load_single_item(url, Modality.IMAGE)``
(``sglang.srt.multimodal.processors.base_processor``), the call every image processor of the families SGLang
serves makes on a request's ``image_url``: ``utils.common.load_image`` (a ``data:`` URI or a ``file://`` URL), then
``convert("RGB")`` of a non-RGB image (``discard_alpha_channel``; ``smart_rgb_conversion`` is GLM-4V's only). On a
host without CUDA the JPEG is Pillow's (nvJPEG runs on a GPU only): the verdict is the CPU path's. SGLang leaves
Pillow's flags at their defaults.

A data URI goes the whole way as the string a client sends (``load_image``'s ``data:`` branch): its base64 is
decoded by ``pybase64``, SGLang's dependency, which is not installed here; the loader's functional stand-in for it is
the standard library's ``base64`` (the same contract, `impl.sglang.shims.build_pybase64`). Until stop 34 the decoded
bytes were handed to the ``bytes`` branch instead, and the stop-35 mutation campaign found the ``data:`` and
``file://`` branch conditions untested. A file goes the whole way as a ``file://`` URL.
"""

from __future__ import annotations

from typing import Any

from deferlab.impl.image_bytes import Loader, data_uri, write_file

MODULE = "sglang.srt.multimodal.processors.base_processor"
FUNCTION = f"{MODULE}.BaseMultimodalProcessor._load_single_item"
NOTE = "data-uri: the string a client sends, SGLang's whole path (pybase64: the standard library's base64, a stand-in)"


def image_loaders(source: Any) -> list[Loader]:
    """SGLang's one image loader of the loaded release ``source`` (label ``SGLANG``)."""
    base = source.module(MODULE)
    processor, image = base.BaseMultimodalProcessor, base.Modality.IMAGE

    def run(data: bytes, kind: str) -> Any:
        return processor._load_single_item(data_uri(data) if kind == "data-uri" else write_file(data).as_uri(), image)

    return [Loader("SGLANG", f"sglang {source.version}", FUNCTION, run, truncated=False, note=NOTE)]
