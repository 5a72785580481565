"""vLLM as an engine of `impl.loader` (`ENGINE`), and ``load``: which vLLM to run, one per process.

vLLM serves Kimi-K3 images through two pieces of its own code, and the driver
runs both for real: the input parser (``vllm.multimodal.parse``, which turns
every PIL image into RGB with ``vllm.multimodal.image.convert_image_mode``
before any processor sees it) and the image processor its Kimi-K3 processing
info builds (``vllm.models.kimi_k3.common.mm_preprocess``: the checkpoint's
processor class overridden by vLLM's own fused CPU processor). Which class that
override names is read off the loaded code, never assumed (`served_processor`).
A tree without ``vllm/models/kimi_k3/`` has no Kimi-K3 image path and is
refused before anything is imported. Bad input raises one `VLLMSourceError`
whose message says what was tried and what is accepted.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import ClassVar, Unpack

from deferlab.impl.loader import companions as _companions
from deferlab.impl.loader import sources as _loader
from deferlab.impl.loader.engine import FetchError, SourceError, registered
from deferlab.impl.loader.importer import Importer
from deferlab.impl.vllm.shims import FUNCTIONAL

__all__ = ["ENGINE", "Source", "VLLMFetchError", "VLLMSourceError", "load"]

PREPROCESS = "vllm.models.kimi_k3.common.mm_preprocess"
IMAGE = "vllm.multimodal.image"
PARSE = "vllm.multimodal.parse"
# The modules whose functions the driver runs: all must import for real.
REQUIRED = (IMAGE, PARSE, PREPROCESS)
# What a tree must contain to be loaded at all (read before importing anything).
_PATH_FILE = "vllm/models/kimi_k3/common/mm_preprocess.py"
FIRST_WITH_PATH = "0.27.0"  # found by scanning the released wheels (semantics §16.1)
DEFAULT_VERSION = "0.34.0"  # the newest release when this driver was written (its family paths: 0.34.0)


class VLLMSourceError(SourceError):
    """The vLLM source asked for cannot be used (the message says what was tried and what is accepted)."""


class VLLMFetchError(VLLMSourceError, FetchError):
    """A release's wheel is not cached and ``pip download`` could not get it (the one load failure a test may
    skip on)."""


def _python_sources(member: str) -> bool:
    """Only the package's Python files: the wheel's CUDA libraries are never run here."""
    return member.startswith("vllm/") and member.endswith((".py", ".json"))


ENGINE = registered(
    "vllm",
    __file__,
    marker="multimodal",
    bare_why="package __init__.py not run (it imports the serving engine)",
    functional=FUNCTIONAL,
    source_error=VLLMSourceError,
    fetch_error=VLLMFetchError,
    wheel_members=_python_sources,
)


@dataclass
class Source(_loader.Source):
    """One loaded vLLM tree, plus the name of the image processor class its Kimi-K3 path serves with."""

    short_prefix: ClassVar[str] = "vllm."
    processor_name: str = ""


def load(spec: str = "installed", **options: Unpack[_loader.LoadOptions]) -> Source:
    """Resolve ``spec``, import vLLM's Kimi-K3 image path from it for real, and return the `Source`.

    ``options``: the wheel cache, the downloader and the ``companions`` (`loader.sources.LoadOptions`): the
    libraries the release pins that a family path computes with, made active at the release's versions before any
    vLLM code is imported. The Kimi-K3 path needs none (transformers' base classes are stood in for, or the
    installed ones are used); a process that loaded vLLM without them cannot add them afterwards."""
    return _loader.load_named(ENGINE, spec, _check_path, _import, **options)


def _check_path(spec: str, found: _loader.Resolved) -> None:
    """Refuse a tree without a Kimi-K3 image path, by reading its files (nothing imported)."""
    accepted = f"vLLM {FIRST_WITH_PATH} and later (or a checkout that has it)"
    _loader.require_file(ENGINE, spec, found, _PATH_FILE, "Kimi-K3 image path", accepted)


def served_processor(module: object) -> str:
    """The image processor class the Kimi-K3 processing info asks vLLM's processor cache for.

    Read off the loaded ``KimiK3ProcessingInfo.__init__``: the name passed as ``processor_cls_overrides``
    (vLLM's own processor replacing the checkpoint's), or "" when it passes none (the checkpoint's own).
    """
    info = getattr(module, "KimiK3ProcessingInfo", None)
    if info is None:
        return ""
    tree = ast.parse(inspect.getsource(info))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "processor_cls_overrides" and isinstance(node.value, ast.Name):
            return node.value.id
    return ""


def _import(spec: str, found: _loader.Resolved, importer: Importer) -> Source:
    """`load`'s build for vLLM: the parser and the Kimi-K3 path imported for real, the served class read off."""
    source = _loader.build_source(Source, spec, found, importer, REQUIRED)
    _companions.note_installed(
        _companions.TRANSFORMERS,
        found.root,
        f"vllm {found.version}",
        importer.records,
        "the Kimi-K3 path takes only BaseImageProcessor and BatchFeature from it (its family paths load the pin)",
    )
    module = importer.import_required(PREPROCESS)
    source.processor_name = served_processor(module)
    if source.processor_name and not hasattr(module, source.processor_name):
        raise VLLMSourceError(
            f"vllm source {spec!r} (version {found.version}): {PREPROCESS} names {source.processor_name} as the "
            "Kimi-K3 image processor but does not import it; accepted: a tree whose Kimi-K3 path imports its processor"
        )
    return source
