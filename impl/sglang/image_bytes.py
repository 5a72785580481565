"""SGLang's own loader of an image from the bytes a client sends (claim C20, semantics §20.8).

What runs: the release's ``BaseMultimodalProcessor._load_single_item(url, Modality.IMAGE)``
(``sglang.srt.multimodal.processors.base_processor``), the call every image processor of the families SGLang
serves makes on a request's ``image_url``: ``utils.common.load_image`` (a ``data:`` URI or a ``file://`` URL), then
``convert("RGB")`` of a non-RGB image (``discard_alpha_channel``). A family whose processor class sets
``smart_rgb_conversion`` (GLM-4.1V's ``Glm4vImageProcessor``, from 0.5.20) takes ``smart_to_rgb`` instead: EXIF
transpose, transparency onto a background its border picks (semantics §20.8); the loader is then that class's own
``_load_single_item`` (a classmethod reading its class's flags), `OWN`. On a host without CUDA the JPEG is Pillow's (nvJPEG runs on a GPU only): the verdict is the CPU path's. SGLang leaves
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
BASE = (MODULE, "BaseMultimodalProcessor")
FUNCTION = f"{MODULE}.BaseMultimodalProcessor._load_single_item"
NOTE = "data-uri: the string a client sends, SGLang's whole path (pybase64: the standard library's base64, a stand-in)"
# family -> (module, class) whose own ``_load_single_item`` a family's images take, where the class changes what
# it does (semantics §20.8): GLM-4.1V's processor sets ``smart_rgb_conversion`` from 0.5.20. Every other family
# takes the base class's.
OWN: dict[str, tuple[str, str]] = {"glm-4.1v": ("sglang.srt.multimodal.processors.glm4v", "Glm4vImageProcessor")}


def image_loaders(source: Any, family: str | None = None) -> list[Loader]:
    """SGLang's image loader of the loaded release ``source`` (label ``SGLANG``) for ``family``'s requests: its
    processor class's own where `OWN` names one, else the base class's (none named: the base class's)."""
    return [_loader(source, *OWN.get(family or "", BASE))]


def _loader(source: Any, module: str, name: str) -> Loader:
    found = source.module(module)
    processor, image = getattr(found, name), source.module(MODULE).Modality.IMAGE
    note = NOTE
    if (module, name) != BASE:  # say which conversion this release's class asks for
        smart = bool(getattr(processor, "smart_rgb_conversion", False))
        note += f"; {name}.smart_rgb_conversion = {smart} in this release (semantics §20.8)"

    def run(data: bytes, kind: str) -> Any:
        return processor._load_single_item(data_uri(data) if kind == "data-uri" else write_file(data).as_uri(), image)

    function = f"{module}.{name}._load_single_item"
    return Loader("SGLANG", f"sglang {source.version}", function, run, truncated=False, note=note)
