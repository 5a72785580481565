"""What the loaded SGLang tree can do, read off its code: call sites, producers, consumer era.

Why a module of its own: commits of ``main`` between releases differ in *shape*,
not only in behaviour. The PR as merged (22e003580) calls the gate inside
``process_mm_data_async`` and has no per-image artifact path and no EPD
deferred producer; 418975ba6 adds the EPD producer; 3d3194f6c splits the
request path into ``_process_mm_data_uncached`` and adds
``prepare_artifact_batch``. The driver must call whichever of these the tree
has, so every capability here is found in the imported classes and modules
(which methods exist, which of them call the gate), never from a commit id
or a version number. `of` caches the answer on the `Source`.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from deferlab.impl.sglang.sources import GATE, KIP, PROCESSOR, Source

# Each gate call site the driver knows how to run: (path name, processor method), in preference order per path.
# "request": the cache-off request path (3d3194f6c on) or, before the split, the request entry point itself.
SITE_METHODS: tuple[tuple[str, str], ...] = (
    ("artifact", "prepare_artifact_batch"),
    ("request", "_process_mm_data_uncached"),
    ("request", "process_mm_data_async"),
)
PATHS = ("artifact", "request")
DEFERRED_BUILDER = "_build_deferred_output"
EPD_PRODUCER = "prepare_kimi_k3_encoder_inputs"


@dataclass(frozen=True)
class Capabilities:
    """The pieces of the deferred path one loaded tree has (each read off its code; see `detect`).

    ``gate_sites``: (path, method) for every call site that calls the gate itself, artifact first (the
    K3 default while its preprocess cache is on). ``deferred_builder``: whether the request path's
    ``_build_deferred_output`` exists. ``epd_producer``: whether the EPD encoder has a deferred producer
    (``prepare_kimi_k3_encoder_inputs``). ``why``: one line per answer, for provenance.
    """

    gate_sites: tuple[tuple[str, str], ...]
    deferred_builder: bool
    epd_producer: bool
    why: tuple[str, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        """The gate call sites by path name, the default first."""
        return tuple(path for path, _ in self.gate_sites)

    @property
    def default_path(self) -> str:
        """The call site a request takes by default: the artifact path where it exists, else the request path."""
        return self.paths[0] if self.paths else "request"

    def method(self, path: str) -> str:
        """The processor method that runs call site ``path`` (ValueError naming the sites this tree has)."""
        for name, method in self.gate_sites:
            if name == path:
                return method
        if path not in PATHS:
            raise ValueError(f"gate path must be one of {PATHS}, got {path!r}")
        raise ValueError(
            f"this SGLang has no {path!r} call site of the gate (its call sites: "
            f"{[f'{p} ({m})' for p, m in self.gate_sites] or 'none'})"
        )


def calls_gate(cls: type, method: str) -> bool:
    """Whether ``cls.method`` (its own source, wherever in the MRO it is defined) calls ``self.<GATE>(...)``."""
    fn = getattr(cls, method, None)
    if fn is None:
        return False
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return False
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == GATE:
            return True
    return False


def detect(source: Source) -> Capabilities:
    """Read the capabilities off the imported processor class and deferred-preprocessing module."""
    cls: Any = sys.modules[PROCESSOR].KimiK3ImageProcessor
    why = []
    sites: list[tuple[str, str]] = []
    if source.has_deferred_path:
        for path, method in SITE_METHODS:
            if any(p == path for p, _ in sites):
                continue
            if calls_gate(cls, method):
                sites.append((path, method))
                why.append(f"{path}: KimiK3ImageProcessor.{method} calls self.{GATE}(...)")
            elif hasattr(cls, method):
                why.append(f"{path}: KimiK3ImageProcessor.{method} exists but does not call the gate itself")
    builder = source.has_deferred_path and hasattr(cls, DEFERRED_BUILDER)
    kip = sys.modules.get(KIP) if source.has_deferred_path else None
    epd = kip is not None and callable(getattr(kip, EPD_PRODUCER, None))
    why.append(f"{KIP}.{EPD_PRODUCER}: {'present' if epd else 'absent'} (the EPD encoder's deferred producer)")
    why.append(f"KimiK3ImageProcessor.{DEFERRED_BUILDER}: {'present' if builder else 'absent'}")
    return Capabilities(tuple(sites), builder, epd, tuple(why))


def of(source: Source) -> Capabilities:
    """`detect`, once per loaded source."""
    cached = source.__dict__.get("_capabilities")
    if cached is None:
        cached = source.__dict__["_capabilities"] = detect(source)
    return cached
