"""LMDeploy as an engine of `impl.loader` (`ENGINE`), and ``load``: which LMDeploy to run, one per process.

LMDeploy preprocesses InternVL 2.5/3 (``InternVLChatModel``) with its own code, ``lmdeploy/vl/model/internvl.py``
(``dynamic_preprocess``, ``find_closest_aspect_ratio``, ``InternVLVisionModel``), and loads request images with
``lmdeploy/vl/media/image.py`` (``ImageMediaIO``); both are imported for real (semantics §19). The wheel ships the
compiled TurboMind library and CUDA headers, which are never unpacked: only the Python sources under
``lmdeploy/`` are (`wheel_members`). A tree without ``lmdeploy/vl/`` has no vision path and is refused before
anything is imported; a tree without ``lmdeploy/vl/model/internvl.py`` likewise. Bad input raises one
`LMDeploySourceError` whose message says what was tried and what is accepted.

Its names are read off its plugin registration (`impl.lmdeploy.plugin`, `impl.loader.engine.registered`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Unpack

from deferlab.impl.lmdeploy.shims import FUNCTIONAL
from deferlab.impl.loader import sources as _loader
from deferlab.impl.loader.engine import FetchError, SourceError, registered
from deferlab.impl.loader.importer import Importer

__all__ = ["ENGINE", "LMDeployFetchError", "LMDeploySourceError", "Source", "load"]

INTERNVL = "lmdeploy.vl.model.internvl"
MEDIA = "lmdeploy.vl.media.image"
# The modules whose functions the driver runs: all must import for real.
REQUIRED = (MEDIA, INTERNVL)
_PATH_FILE = "lmdeploy/vl/model/internvl.py"
OLDEST_READ = "0.14.0"  # the oldest release semantics §19 read (InternVL's path is in every one read)
DEFAULT_VERSION = "0.18.0"  # the newest release when this driver was written
# What the InternVL path runs at run time beside deferlab's own dependencies (torchvision's transforms).
COMPANIONS = ("torchvision",)


class LMDeploySourceError(SourceError):
    """The LMDeploy source asked for cannot be used (the message says what was tried and what is accepted)."""


class LMDeployFetchError(LMDeploySourceError, FetchError):
    """A release's wheel is not cached and ``pip download`` could not get it (the one load failure a test may
    skip on)."""


def _python_sources(member: str) -> bool:
    """Only the package's Python files: the TurboMind library and its CUDA headers are never run here."""
    return member.startswith("lmdeploy/") and member.endswith(".py")


ENGINE = registered(  # the names (distribution, package, display, example release) from its plugin registration
    "lmdeploy",
    __file__,
    marker="vl",
    bare_why="package __init__.py not run (it imports the serving engines)",
    functional=FUNCTIONAL,
    source_error=LMDeploySourceError,
    fetch_error=LMDeployFetchError,
    wheel_members=_python_sources,
)


@dataclass
class Source(_loader.Source):
    """One loaded LMDeploy tree."""

    short_prefix: ClassVar[str] = "lmdeploy."


def load(spec: str = DEFAULT_VERSION, **options: Unpack[_loader.LoadOptions]) -> Source:
    """Resolve ``spec`` (a release fetched into the deferlab cache, a checkout path, or 'installed'), import
    LMDeploy's InternVL image path from it for real, and return the `Source`. ``options``: as
    `loader.sources.LoadOptions`; the InternVL pixel path needs ``companions=("torchvision",)`` (`COMPANIONS`),
    the geometry alone none."""
    return _loader.load_named(ENGINE, spec, _check_path, _import, **options)


def _check_path(spec: str, found: _loader.Resolved) -> None:
    """Refuse a tree without LMDeploy's InternVL preprocessing, by reading its files (nothing imported)."""
    accepted = f"LMDeploy {OLDEST_READ} and later (or a checkout that has lmdeploy/vl/model/internvl.py)"
    _loader.require_file(ENGINE, spec, found, _PATH_FILE, "InternVL preprocessing", accepted)


def _import(spec: str, found: _loader.Resolved, importer: Importer) -> Source:
    """`load`'s build: the image loader and the InternVL module imported for real, then the import phase ends."""
    return _loader.build_source(Source, spec, found, importer, REQUIRED)
