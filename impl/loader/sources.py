"""Which copy of an engine to run: the installed one, a source checkout, or a release wheel; one per process.

Why one function per engine-agnostic step: `resolve` turns a spec into a
tree without importing anything, `claim` refuses a second, different tree
in the same process (modules live in ``sys.modules`` under the package's
name, so two copies cannot sit side by side), `open_tree` installs the
importer, and `Source` is what a driver keeps. Every error is the engine's
own `Engine.source_error` (or `Engine.fetch_error` for a download that
failed, or was refused under ``DEFERLAB_OFFLINE=1``), with the message ending in `Engine.accepted`
(an offline refusal ends with what is cached instead). A release comes from the cache checked against
its wheel's RECORD, and mended where it differs (`integrity.ensure`). Finding the tree (`resolve`, `Resolved`
and the checkout's facts) is `resolution`, re-exported here.
"""

from __future__ import annotations

import sys
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypedDict, TypeVar, cast

from deferlab.impl.loader import companions, patching, wheels
from deferlab.impl.loader.companions import KNOWN as KNOWN_COMPANIONS
from deferlab.impl.loader.engine import FETCH_FAILED, Engine
from deferlab.impl.loader.importer import Importer, IncompleteTreeError, RequiredImportError
from deferlab.impl.loader.provenance import StandIn, describe
from deferlab.impl.loader.resolution import (  # noqa: F401 - finding the tree, re-exported for the drivers and tests
    Resolved,
    check_spec,
    checkout_root,
    git_dirty,
    git_rev,
    known_releases,
    nearest_release,
    resolve,
    tree_version,
)
from deferlab.impl.loader.standins import end_import_phase

SourceT = TypeVar("SourceT", bound="Source")


class LoadOptions(TypedDict, total=False):
    """What every driver's ``load(spec, **options)`` takes beside the spec (`load_named`).

    ``cache``: the wheel cache folder (None: deferlab's); ``downloader``: what fetches a wheel (None: ``pip
    download``); ``companions``: names of `companions.KNOWN` (``transformers``, ``torchvision``) made active at
    the versions the release pins before any of its code is imported (none by default).
    """

    cache: Path | None
    downloader: wheels.Downloader | None
    companions: tuple[str, ...]


@dataclass
class Source:
    """One loaded tree: where it is, which version, and every stand-in its import needed."""

    spec: str
    kind: str
    version: str
    root: Path
    git_rev: str | None
    importer: Importer
    downloaded: bool = False
    load_seconds: float = 0.0
    wheel: dict[str, str] = field(default_factory=dict)
    optional_errors: dict[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()  # the modules imported for real as required (the driver runs them)
    absent: dict[str, types.ModuleType] = field(default_factory=dict)  # stand-ins for modules this tree lacks
    companions: dict[str, companions.Loaded] = field(default_factory=dict)  # the pinned libraries it runs with
    git_dirty: bool | None = None  # a checkout whose working tree differs from its commit (`git_dirty`)
    patched_with: dict[str, Any] = field(default_factory=dict)  # `patching`: the diff applied to a copy of the tree
    # What a driver's module names may leave out (``"sglang.srt."``: ``module("models.kimi_k3")``); "": nothing.
    short_prefix: ClassVar[str] = ""

    @property
    def engine(self) -> Engine:
        return self.importer.engine

    @property
    def name(self) -> str:
        name = f"{self.engine.name}-{self.version}" + (f"+g{self.git_rev[:9]}" if self.git_rev else "")
        return name + (f"{patching.NAME_MARK}{self.patched_with['sha256'][:8]}" if self.patched_with else "")

    @property
    def stand_ins(self) -> list[StandIn]:
        """Every module that is not the real thing here (kinds in `provenance.StandIn`), in the order met."""
        return list(self.importer.records)

    def full_name(self, name: str) -> str:
        """``name`` as a module of the engine: a name not starting with the package's is short (`short_prefix`)."""
        return name if not self.short_prefix or name.startswith(self.engine.package) else self.short_prefix + name

    def module(self, name: str) -> types.ModuleType:
        """An engine module, imported for real (or the stand-in the driver put in `absent`)."""
        full = self.full_name(name)
        if full in self.absent:
            return self.absent[full]
        return self.importer.import_required(full)

    def has(self, name: str) -> bool:
        full = self.full_name(name)
        return full in sys.modules and full not in self.optional_errors

    def describe(self) -> dict[str, Any]:
        """What ran (`provenance.describe`): name, version, origin, the companions, every stand-in."""
        return describe(self)

    def patch(self, module: str, why: str) -> None:
        """Record that the driver replaced something real at run time (a ``patched`` stand-in record)."""
        self.importer.record(module, "patched", why)


_ACTIVE: dict[str, Source] = {}  # engine name -> the source this process loaded


def active(engine: Engine, spec: str, root: Path) -> Source | None:
    """The source already loaded from ``root`` (None if none is); refuses a second, different tree."""
    err = engine.source_error
    loaded = _ACTIVE.get(engine.name)
    if loaded is not None:
        if loaded.root == root:
            return loaded
        raise err(
            f"{engine.name} source {spec!r}: this process already runs {loaded.name} from {loaded.root}; "
            f"one {engine.title} version per process (run each version in its own subprocess)"
        )
    module = sys.modules.get(engine.package)
    if module is not None and not str(getattr(module, "__file__", "") or "").startswith(str(root)):
        raise err(
            f"{engine.name} source {spec!r}: another {engine.package} ({getattr(module, '__file__', '?')}) is "
            f"already imported in this process; one {engine.title} version per process"
        )
    return None


def claim(source: Source) -> Source:
    """Make ``source`` this process's copy of its engine (see `active`)."""
    _ACTIVE[source.engine.name] = source
    return source


def open_tree(engine: Engine, kind: str, root: Path) -> Importer:
    """An `Importer` for ``root`` on ``sys.meta_path`` (and ``root`` on ``sys.path`` unless installed)."""
    import numpy  # noqa: F401  - deferlab's own dependencies are imported before any finder is installed,
    import PIL.Image  # noqa: F401  so nothing of theirs can ever be stood in for
    import torch  # noqa: F401

    if kind != "installed" and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    importer = Importer(engine, root)
    importer.install()
    return importer


def import_required(source: Source, names: tuple[str, ...]) -> None:
    """Import each of ``names`` for real; the first failure is the engine's error, naming the module."""
    engine = source.engine
    source.importer.required |= set(names)
    source.required = tuple(names)
    for name in names:
        try:
            source.importer.import_required(name)
        except RequiredImportError as e:
            raise engine.source_error(
                f"{engine.name} source {source.spec!r} (version {source.version}, {source.root}): importing "
                f"{e.module} failed inside {engine.title}: {type(e.cause).__name__}: {e.cause}"
            ) from e


def load(
    engine: Engine,
    spec: str = "installed",
    *,
    cache: Path | None = None,
    downloader: wheels.Downloader | None = None,
    check: Callable[[str, Resolved], None] | None = None,
    build: Callable[[str, Resolved, Importer], Source] | None = None,
    with_companions: tuple[companions.Companion, ...] = (),
    lister: companions.Lister | None = None,
) -> Source:
    """Resolve ``spec``, import the engine's code for real, end the import phase, and return the `Source`.

    The one flow every driver takes: ``check(spec, found)`` refuses a resolved tree before anything is
    imported (a driver's own file checks); ``with_companions`` are made active at the versions the release
    accepts before any of its code is imported (`attach`); ``build(spec, found, importer)`` makes and imports
    the `Source` (default: `Engine.required` imported for real, then the import phase ended). A tree already
    loaded in this process is returned as it is (its companions attached if they still can be).
    """
    t0 = time.perf_counter()
    spec = check_spec(engine, spec)
    tree_spec, diff = patching.wanted(engine, spec)  # ``--patch``: a copy of the tree with the diff applied
    found = resolve(engine, tree_spec, cache, downloader)
    found = patching.apply(engine, tree_spec, found, diff) if diff is not None else found
    if check is not None:
        check(spec, found)
    already = active(engine, spec, found.root)
    if already is not None:
        already.companions.update(attach(engine, spec, found, already.importer, with_companions, already, lister))
        return already
    importer = open_tree(engine, found.kind, found.root)
    attached = attach(engine, spec, found, importer, with_companions, None, lister)
    try:
        source = (build or _build)(spec, found, importer)
    except IncompleteTreeError:
        raise incomplete(engine, spec, found, importer.incomplete) from None
    if importer.incomplete:  # the engine caught it (``except Exception``): the importer kept it
        raise incomplete(engine, spec, found, importer.incomplete)
    source.companions.update(attached)
    source.patched_with = found.patch
    source.load_seconds = time.perf_counter() - t0
    return claim(source)


def require_file(engine: Engine, spec: str, found: Resolved, rel: str, lacks: str, accepted: str, so: str = "") -> None:
    """Refuse a tree without the file ``rel`` (below the folder holding the package), by reading it (nothing
    imported): the engine's source error, saying that the tree has no ``lacks`` (``so``: what that means) and
    which sources are ``accepted``."""
    if not (found.root / rel).is_file():
        raise engine.source_error(
            f"{engine.name} source {spec!r} (version {found.version}, {found.root}) has no {lacks} ({rel} is absent)"
            f"{so}; accepted: {accepted}"
        )


def load_named(
    engine: Engine,
    spec: str,
    check: Callable[[str, Resolved], None],
    build: Callable[[str, Resolved, Importer], SourceT],
    *,
    cache: Path | None = None,
    downloader: wheels.Downloader | None = None,
    companions: tuple[str, ...] = (),
) -> SourceT:
    """`load` as a driver's ``load(spec, **options)`` calls it (`LoadOptions`; another keyword is a TypeError
    here): its companions by name, an unknown one refused with the engine's source error before anything is
    resolved."""
    unknown = [c for c in companions if c not in KNOWN_COMPANIONS]
    if unknown:
        raise engine.source_error(f"unknown companions {unknown}; accepted: {', '.join(KNOWN_COMPANIONS)}")
    wanted = tuple(KNOWN_COMPANIONS[c] for c in companions)
    loaded = load(engine, spec, cache=cache, downloader=downloader, check=check, build=build, with_companions=wanted)
    return cast(SourceT, loaded)  # what ``build`` made, now or when this tree was loaded before


def attach(
    engine: Engine,
    spec: str,
    found: Resolved,
    importer: Importer,
    wanted: tuple[companions.Companion, ...],
    loaded: Source | None,
    lister: companions.Lister | None = None,
) -> dict[str, companions.Loaded]:
    """Each companion of ``wanted`` not yet attached to ``loaded``, active in this process (`companions.load`).

    A companion that cannot be fetched is the engine's fetch error (one line, naming it and what the release
    accepts); one that cannot be loaded beside what this process imported already, its source error."""
    got: dict[str, companions.Loaded] = {}
    todo = [c for c in wanted if loaded is None or c.name not in loaded.companions]
    for companion in todo:
        label = f"{engine.name} {found.version}"
        try:
            for other in todo:  # refuse before any is made active: never half a set
                companions.check_free(other)
            got[companion.name] = companions.load(companion, found.root, label, importer.records, lister=lister)
        except wheels.OfflineError as e:
            raise engine.fetch_error(f"{engine.name} source {spec!r}: its {companion.name} companion: {e}") from None
        except wheels.DownloadError as e:
            error = engine.fetch_error if e.download_failed else engine.source_error
            raise error(
                f"{engine.name} source {spec!r}: its {companion.name} companion could not be had ({e}); "
                f"{FETCH_FAILED if e.download_failed else 'the wheel is unusable'}"
            ) from None
        except companions.CompanionError as e:
            first = f" ({engine.name} was loaded in it without the companion first)" if loaded is not None else ""
            raise engine.source_error(
                f"{engine.name} source {spec!r}: its {companion.name} companion cannot be loaded in this process"
                f"{first}: {e}"
            ) from None
    return got


def incomplete(engine: Engine, spec: str, found: Resolved, errors: list[IncompleteTreeError]) -> Exception:
    """The engine's error for a tree that lacks its own Python: the module, and what to do about it."""
    others = dict.fromkeys(e.module for e in errors[1:] if e.module != errors[0].module)
    also = f" (also missing: {', '.join(others)})" if others else ""
    fix = (
        f"its next load checks it against the wheel's RECORD and mends it (or remove {found.root} to fetch it again)"
        if found.kind == "wheel"
        else "restore the missing files"
    )
    return engine.source_error(f"{engine.name} source {spec!r} (version {found.version}): {errors[0]}{also}; {fix}")


def build_source(
    cls: type[SourceT],
    spec: str,
    found: Resolved,
    importer: Importer,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> SourceT:
    """A ``cls`` for the resolved tree with ``required`` imported for real and ``optional`` where the tree has
    them (why the others are not: `Source.optional_errors`), then the import phase ended. The engine's warnings
    at import (CUDA-only features, deprecations) are not ours and are silenced."""
    source = cls(spec, found.kind, found.version, found.root, found.git_rev, importer, found.downloaded)
    source.wheel = found.wheel
    source.git_dirty = found.git_dirty
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import_required(source, required)
        source.optional_errors.update(import_optional(importer, optional))
    end_import_phase(importer.engine.title)
    return source


def _build(spec: str, found: Resolved, importer: Importer) -> Source:
    """The default `load` build: a `Source` whose `Engine.required` modules are imported for real."""
    return build_source(Source, spec, found, importer, importer.engine.required)


def import_optional(importer: Importer, names: tuple[str, ...]) -> dict[str, str]:
    """Import each of ``names`` the tree has; module -> why, for those absent or failing."""
    errors: dict[str, str] = {}
    for name in names:
        if importer.locate(name) is None:
            errors[name] = "absent in this version"
            continue
        try:
            importer.import_required(name)
        except RequiredImportError as e:
            errors[name] = f"{type(e.cause).__name__}: {e.cause}"
    return errors
