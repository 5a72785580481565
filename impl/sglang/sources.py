"""SGLang as an engine of `impl.loader` (`ENGINE`), and ``load``: which SGLang to run, one per process.

``load(spec)`` resolves the spec (`loader.sources.resolve`: installed, a
checkout, a release wheel), checks that the tree has a Kimi-K3 multimodal
processor at all, imports the modules the driver runs (through the loader's
`Importer`, which records every stand-in) and returns a `Source`. Whether that processor has the owner-deferred path
(`Source.has_deferred_path`) is read off the loaded code, never off the
version number: 0.5.17 ships an eager-only Kimi-K3 processor, and its column
of the version matrix must still check what it has (staging, compositing,
normalization, the eager producer and loader). Bad input raises one
`SGLangSourceError` whose message says what was tried and what is accepted. A
process holds one SGLang: modules live in ``sys.modules`` under ``sglang.*``,
so a second, different source cannot sit beside the first (the version matrix
runs one subprocess per version).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import ClassVar, Unpack

from deferlab.impl.loader import sources as _loader
from deferlab.impl.loader.engine import FETCH_FAILED, FetchError, SourceError, registered
from deferlab.impl.loader.importer import Importer, RequiredImportError
from deferlab.impl.sglang.shims import FUNCTIONAL

__all__ = ["FETCH_FAILED", "RequiredImportError", "SGLangFetchError", "SGLangSourceError", "Source", "load"]

# Modules whose functions the driver runs on a tree with the deferred path: they must import for real.
REQUIRED = (
    "sglang.srt.multimodal.kimi_k3_image_processing",
    "sglang.srt.multimodal.processors.kimi_k25",
    "sglang.srt.managers.schedule_batch",
    "sglang.srt.multimodal.mm_utils",
    "sglang.srt.managers.mm_schedule",
    "sglang.srt.models.kimi_k3",
    "sglang.srt.multimodal.processors.kimi_k3",
)
KIP = "sglang.srt.multimodal.kimi_k3_image_processing"
PROCESSOR = "sglang.srt.multimodal.processors.kimi_k3"
MODEL = "sglang.srt.models.kimi_k3"
# An eager-only tree (no kimi_k3_image_processing): the same minus the deferred module; the scheduler
# whitelist lives in whichever of WHITELIST the tree has (managers.mm_utils before mm_schedule existed).
EAGER_REQUIRED = tuple(name for name in REQUIRED if name not in (KIP, "sglang.srt.managers.mm_schedule"))
WHITELIST = ("sglang.srt.managers.mm_schedule", "sglang.srt.managers.mm_utils")
GATE = "_should_defer_gpu_preprocessing"
# Modules the driver uses where the version has them (absent ones are reported by features()).
OPTIONAL = (
    "sglang.srt.multimodal.encoder_preprocessing",
    "sglang.srt.multimodal.media_artifacts.kimi_k3",
    "sglang.srt.multimodal.media_artifacts.base",
    "sglang.srt.multimodal.transport.memory_pool",
    "sglang.srt.utils.cuda_vmm_transport_utils",
    "sglang.srt.multimodal.processors.base_processor",
    "sglang.srt.runtime_context",
)
# What a tree must contain to be loaded at all (read before importing anything).
_PROCESSOR_FILE = "sglang/srt/multimodal/processors/kimi_k3.py"


class SGLangSourceError(SourceError):
    """The SGLang source asked for cannot be used (the message says what was tried and what is accepted)."""


class SGLangFetchError(SGLangSourceError, FetchError):
    """A released version's wheel is not cached and ``pip download`` could not get it (offline, no index,
    timed out); a wheel that arrived but is unusable is a plain `SGLangSourceError`.

    Its own class because it is the one load failure that says nothing about SGLang or the driver: a test
    may skip on it, and on no other."""


ENGINE = registered(
    "sglang",
    __file__,
    checkout_subdir="python",
    marker="srt",
    bare_why="package __init__.py not run (it imports the serving stack)",
    functional=FUNCTIONAL,
    source_error=SGLangSourceError,
    fetch_error=SGLangFetchError,
)
ACCEPTED = ENGINE.accepted


@dataclass
class Source(_loader.Source):
    """One loaded SGLang tree: the loader's `Source` plus what the driver read off its Kimi-K3 code."""

    short_prefix: ClassVar[str] = "sglang.srt."
    whitelist_module: str = "sglang.srt.managers.mm_schedule"  # where _can_skip_pre_embed_feature_move lives
    deferred_parts: dict[str, bool] = field(default_factory=dict)  # each piece of the deferred path: present?

    @property
    def has_deferred_path(self) -> bool:
        """Whether the loaded code has the owner-deferred path (every piece of `deferred_parts`)."""
        return bool(self.deferred_parts) and all(self.deferred_parts.values())

    @property
    def deferred_key(self) -> str:
        """The ``model_specific_data`` key of a deferred item (``DEFERRED_PREPROCESSING_KEY``).

        Looked up on the loaded code; an eager-only tree answers through its absent stand-in
        (`_absent_kip`), whose key none of its items carry, so "is this item deferred?" is "no" there too.
        """
        return self.module(KIP).DEFERRED_PREPROCESSING_KEY


def load(spec: str = "installed", **options: Unpack[_loader.LoadOptions]) -> Source:
    """Resolve ``spec``, import SGLang's Kimi-K3 modules from it for real, and return the `Source`.

    ``options``: the wheel cache, the downloader and the ``companions`` (`loader.sources.LoadOptions`); the Qwen
    family path computes with ``transformers`` and ``torchvision`` at the versions the release pins, and a process
    that imported another copy already is refused in one line. None by default: the Kimi-K3 load."""
    return _loader.load_named(ENGINE, spec, _check_processor, _import, **options)


def _check_processor(spec: str, found: _loader.Resolved) -> None:
    """Refuse a tree without a Kimi-K3 multimodal processor, by reading its files (nothing imported)."""
    so = ": no eager Kimi-K3 preprocessing and no Kimi-K3 CPU-transport deferred preprocessing"
    accepted = "0.5.17 and later (or a checkout that has that processor)"
    _loader.require_file(ENGINE, spec, found, _PROCESSOR_FILE, "Kimi-K3 multimodal processor", accepted, so)


def _deferred_parts(importer: Importer) -> dict[str, bool]:
    """Each piece of the owner-deferred path, read off the imported modules (not the version number)."""
    kip = sys.modules.get(KIP) if importer.locate(KIP) is not None else None
    pk3 = sys.modules[PROCESSOR]
    mk3 = sys.modules[MODEL]
    proc_cls = getattr(pk3, "KimiK3ImageProcessor", None)
    return {
        f"{KIP}.DEFERRED_PREPROCESSING_KEY": kip is not None and hasattr(kip, "DEFERRED_PREPROCESSING_KEY"),
        f"{PROCESSOR}.KimiK3ImageProcessor.{GATE}": proc_cls is not None and hasattr(proc_cls, GATE),
        f"{MODEL} reads DEFERRED_PREPROCESSING_KEY": "DEFERRED_PREPROCESSING_KEY" in vars(mk3),
    }


def _absent_kip(source: Source) -> types.ModuleType:
    """What ``source.module(KIP)`` answers on an eager-only tree: a recorded ``absent`` stand-in.

    It holds only ``DEFERRED_PREPROCESSING_KEY``, the contract key's name later releases use
    (`reference.system.contract`), which no item of this version carries: code that asks "is this item
    deferred?" (the seam's backend lookup) gets "no", which is what the loaded code does. Any other
    name raises AttributeError. It is never put in ``sys.modules``, so `Source.has` stays False.
    """
    from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY

    module = types.ModuleType(KIP, "absent in this eager-only version (deferlab stand-in: the key's name only)")
    module.DEFERRED_PREPROCESSING_KEY = DEFERRED_PREPROCESSING_KEY
    module.__deferlab_standin__ = True
    source.importer.record(
        KIP,
        "absent",
        "not in this version (eager-only Kimi-K3 processor); a stand-in holding only the deferred key's name, "
        "which no item of this version carries",
    )
    return module


def _import(spec: str, found: _loader.Resolved, importer: Importer) -> Source:
    """`load`'s build for SGLang: the modules its version has, imported for real, then the deferred path's
    pieces read off the loaded code (whole or absent, never partial)."""
    # The deferred module is imported first where the tree has it (its failures are the ones to name);
    # whether the path is complete is decided from the loaded code below.
    if importer.locate(KIP) is not None:
        required, whitelist = REQUIRED, WHITELIST[0]
    else:
        whitelist = next((w for w in WHITELIST if importer.locate(w) is not None), WHITELIST[0])
        required = (*EAGER_REQUIRED, whitelist)
    version, root = found.version, found.root
    source = _loader.build_source(Source, spec, found, importer, required, OPTIONAL)
    source.whitelist_module = whitelist
    source.deferred_parts = _deferred_parts(importer)
    if not hasattr(sys.modules[PROCESSOR], "KimiK3ImageProcessor"):
        raise SGLangSourceError(
            f"sglang source {spec!r} (version {version}, {root}) has no Kimi-K3 multimodal processor "
            f"({PROCESSOR} defines no KimiK3ImageProcessor); accepted: 0.5.17 and later"
        )
    if any(source.deferred_parts.values()) and not source.has_deferred_path:
        lacks = "; ".join(f"{k} is absent" for k, v in source.deferred_parts.items() if not v)
        raise SGLangSourceError(
            f"sglang source {spec!r} (version {version}, {root}): an incomplete Kimi-K3 CPU-transport deferred "
            f"preprocessing ({lacks}); accepted: a source with the whole deferred path (releases 0.5.18 and "
            "later) or none of it (eager-only, 0.5.17)"
        )
    if not source.has_deferred_path:
        source.absent[KIP] = _absent_kip(source)
    return source
