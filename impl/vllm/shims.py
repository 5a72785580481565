"""Functional stand-ins for the leaf library vLLM's Kimi-K3 image path needs at run time (transformers).

Why: ``KimiK25FusedVisionProcessor`` subclasses ``transformers``'
``BaseImageProcessor`` and returns a ``BatchFeature``; transformers is not a
deferlab dependency, and a permissive stand-in would raise the moment the
processor returns. Only what the image path touches is implemented: a
``BatchFeature`` is a dict of its ``data`` (``tensor_type`` None keeps the
values as they are, which is what the processor asks for), ``BaseImageProcessor``
takes and ignores processor keywords, ``TensorType`` names the tensor kinds.
Anything else of transformers stays a permissive stand-in that raises if run.
"""

from __future__ import annotations

import enum
import types
from collections import UserDict
from collections.abc import Callable
from typing import Any

from deferlab.impl.loader.standins import StandInModule


class BatchFeature(UserDict):
    """``BatchFeature(data, tensor_type)``: the processor's outputs by name."""

    def __init__(self, data: dict[str, Any] | None = None, tensor_type: Any = None, **_: Any) -> None:
        if tensor_type not in (None, "pt", TensorType.PYTORCH):
            raise NotImplementedError(
                f"deferlab's BatchFeature stand-in keeps tensors as they are, not {tensor_type!r}"
            )
        super().__init__(data or {})

    def __getattr__(self, name: str) -> Any:
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None


class BaseImageProcessor:
    """The base class: keyword settings are accepted and kept (``to_dict`` returns them)."""

    def __init__(self, **kwargs: Any) -> None:
        self._settings = dict(kwargs)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._settings)


class TensorType(enum.StrEnum):
    PYTORCH = "pt"
    NUMPY = "np"


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = StandInModule(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def _transformers(name: str) -> types.ModuleType:
    return _module(name, BatchFeature=BatchFeature, BaseImageProcessor=BaseImageProcessor, TensorType=TensorType)


def _image_processing_utils(name: str) -> types.ModuleType:
    return _module(name, BatchFeature=BatchFeature, BaseImageProcessor=BaseImageProcessor)


def _utils(name: str) -> types.ModuleType:
    return _module(name, TensorType=TensorType)


_NOTE = (
    "functional stand-in (deferlab): BatchFeature as a dict of its data, BaseImageProcessor keeping its "
    "keywords, TensorType's names; the rest of transformers is permissive and raises if run"
)
FUNCTIONAL: dict[str, tuple[Callable[[str], types.ModuleType], str]] = {
    "transformers": (_transformers, _NOTE),
    "transformers.image_processing_utils": (_image_processing_utils, _NOTE),
    "transformers.utils": (_utils, _NOTE),
}
