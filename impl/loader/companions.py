"""Companion packages: the libraries an engine release pins that its paths compute with (transformers, torchvision).

Why: an engine path that hands images to transformers' image processors computes with transformers' code, so
which transformers ran is part of what was checked, and it must be the one the release accepts, not whatever
deferlab's environment has installed (its ``transformers`` extra is the trained side's, 5.24.0). So a companion
is treated like the engine's own wheel: the release's accepted versions are read from its wheel's METADATA
(``Requires-Dist``, kept as ``deferlab-METADATA``), the newest release on the index that satisfies them is
chosen (the choice kept in ``<cache>/<name>/deferlab-choices.json``; under ``DEFERLAB_OFFLINE=1`` the newest
cached one that satisfies them, else one refusal), fetched with ``pip download --no-deps`` into
``<cache>/<name>/<version>``, verified against its RECORD, never installed, and imported in the engine's
process ahead of anything installed (a finder first on ``sys.meta_path``, its tree first on ``sys.path`` so
``importlib.metadata`` reads its version too). Its own modules run for real (package ``__init__.py`` files
too, guarded: a body that raises is recorded); a dependency of its that is not installed gets a stand-in only
where one of its modules imports it unguarded, recorded. Every record goes into the engine's (`Records`), so
a verdict's provenance names the companions' versions and what was stood in for them.

One copy per process (modules cannot be unloaded): a companion whose package is already imported from
elsewhere is refused in one line (`CompanionError`).
"""

from __future__ import annotations

import email.parser
import json
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from deferlab.impl.loader import integrity, wheels
from deferlab.impl.loader.engine import FETCH_FAILED, Engine
from deferlab.impl.loader.importer import Importer
from deferlab.impl.loader.provenance import Records

CHOICES = "deferlab-choices.json"
Lister = Callable[[str], list[str]]


class CompanionError(RuntimeError):
    """A companion cannot be used in this process (another copy of its package is already imported)."""


@dataclass(frozen=True)
class Companion:
    """One companion library: how the loader fetches and imports it (`engine`), what its record adds
    (``note``), what must happen before its first import (``prepare``, given the engine's record), and which
    versions to take when the release pins none (``unpinned``)."""

    engine: Engine
    note: str = ""
    prepare: Callable[[Records], None] | None = None
    # The versions to take when the release states none (SGLang's unpinned torchvision): a specifier, with why.
    unpinned: Callable[[], tuple[str, str]] | None = None

    @property
    def name(self) -> str:
        return self.engine.name


@dataclass
class Loaded:
    """A companion active in this process: its version, tree, the requirement it was chosen by, its importer."""

    companion: Companion
    version: str
    tree: Path
    requirement: str
    how: str
    importer: Importer = field(repr=False)

    def module(self, name: str) -> types.ModuleType:
        """One of its modules, imported for real (a failure is `importer.RequiredImportError`, never a stand-in)."""
        return self.importer.import_required(name)

    def describe(self) -> dict[str, str]:
        return {"version": self.version, "requirement": self.requirement, "root": str(self.tree), "chosen": self.how}


_ACTIVE: dict[str, Loaded] = {}  # companion name -> the copy this process runs


# --- which version --------------------------------------------------------------------------------------------------
def requirement(tree: Path, distribution: str) -> str | None:
    """The versions of ``distribution`` the release in ``tree`` accepts (``<5.23.0,>=5.16.1``; "" for any), read off
    its wheel's METADATA ``Requires-Dist`` (extras' requirements left out); None when the tree has no METADATA (a
    checkout) or does not require it."""
    text = wheels.metadata_text(tree)
    if text is None:
        return None
    for value in email.parser.Parser().parsestr(text, headersonly=True).get_all("Requires-Dist") or []:
        try:
            req = Requirement(value)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != canonicalize_name(distribution):
            continue
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            return str(req.specifier)
    return None


def _specifier(spec: str) -> SpecifierSet:
    try:
        return SpecifierSet(spec)
    except InvalidSpecifier:
        raise wheels.DownloadError(f"{spec!r} is not a version specifier", None, download_failed=False) from None


def _fitting(versions: Sequence[str], spec: str) -> list[str]:
    """The final releases of ``versions`` ``spec`` accepts, newest first."""
    specifier, found = _specifier(spec), []
    for v in versions:
        try:
            parsed = Version(v)
        except InvalidVersion:
            continue
        if not parsed.is_prerelease and specifier.contains(parsed):
            found.append((parsed, v))
    return [v for _, v in sorted(found, reverse=True)]


def _choices(root: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads((root / CHOICES).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _keep_choice(root: Path, spec: str, version: str, wanted_by: str) -> str:
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    choices = _choices(root)
    choices[spec or "*"] = {"version": version, "chosen_at": when, "for": wanted_by}
    wheels.write_atomic(root / CHOICES, json.dumps(choices, indent=2, sort_keys=True).encode())
    return when


def choose(
    companion: Companion, spec: str, wanted_by: str, *, cache: Path | None = None, lister: Lister | None = None
) -> tuple[str, str]:
    """(version, how it was chosen) of ``companion`` for ``wanted_by`` (``vllm 0.34.0``), ``spec`` being what it
    accepts: the choice kept for ``spec``, else the newest release on the index that satisfies it (kept). Under
    ``DEFERLAB_OFFLINE=1``: the kept choice if cached, else the newest cached release that satisfies it, else
    `wheels.OfflineError` in one line. `wheels.DownloadError` when the index cannot be read or lists none."""
    root = cache or wheels.cache_root(companion.engine)
    cached = _fitting(wheels.cached_versions(companion.engine, root), spec)
    kept = _choices(root).get(spec or "*", {})
    name = companion.engine.distribution
    if wheels.offline():
        if kept.get("version") in cached:
            return kept["version"], f"the kept choice, chosen {kept.get('chosen_at', '?')} ({wheels.OFFLINE_ENV}=1)"
        if cached:
            return cached[0], f"the newest cached release satisfying it ({wheels.OFFLINE_ENV}=1)"
        every = ", ".join(wheels.cached_versions(companion.engine, root)) or "none"
        raise wheels.OfflineError(
            f"{name} for {wanted_by} ({name}{spec or ' any version'}) is not cached and {wheels.OFFLINE_ENV}=1 "
            f"forbids fetching it, so deferlab {FETCH_FAILED}; cached {name}: {every}"
        )
    if kept.get("version") and _fitting([kept["version"]], spec):
        return kept["version"], f"the newest release on the index satisfying it, chosen {kept.get('chosen_at')}"
    listed = (lister or wheels.index_versions)(name)
    fitting = _fitting(listed, spec)
    if not fitting:
        raise wheels.DownloadError(
            f"the package index lists no {name} release satisfying {spec!r} ({len(listed)} listed)", listed
        )
    when = _keep_choice(root, spec, fitting[0], wanted_by)
    return fitting[0], f"the newest release on the index satisfying it, chosen {when}"


# --- in this process -------------------------------------------------------------------------------------------------
def _version_of(module: types.ModuleType) -> str:
    return str(getattr(module, "__version__", "") or "unknown version")


def check_free(companion: Companion, version: str = "") -> None:
    """`CompanionError` when this process imported ``companion``'s package from anywhere but its active copy
    (an installed one, a stand-in): a second copy cannot be loaded beside it."""
    package = companion.engine.package
    present = sys.modules.get(package)
    active = _ACTIVE.get(companion.name)
    if present is None or (active is not None and str(getattr(present, "__file__", "")).startswith(str(active.tree))):
        return
    where = getattr(present, "__file__", None) or "a stand-in"
    wanted = f"the release's {package} {version}".rstrip()
    raise CompanionError(
        f"{package} ({_version_of(present)}, {where}) is already imported in this process, so {wanted} cannot be "
        f"loaded; load the engine with its companions before anything imports {package}, or in its own process"
    )


def activate(companion: Companion, version: str, tree: Path, spec: str, how: str, records: Records) -> Loaded:
    """Make ``tree`` this process's ``companion`` (before anything imports it); `CompanionError` when another copy
    of its package is imported already, or another version of it is active."""
    active = _ACTIVE.get(companion.name)
    if active is not None:
        if active.tree == tree:
            return active
        raise CompanionError(
            f"this process already runs {companion.name} {active.version} ({active.tree}); {version} cannot be loaded "
            "beside it (one copy per process: run each engine release in its own process)"
        )
    check_free(companion, version)
    if companion.prepare is not None:
        companion.prepare(records)
    if str(tree) not in sys.path:
        sys.path.insert(0, str(tree))  # ahead of site-packages: its dist-info is what importlib.metadata reads
    importer = Importer(companion.engine, tree, records=records)
    importer.install()
    note = f"; {companion.note}" if companion.note else ""
    installed = _installed_version(companion.engine.distribution, tree)
    ahead = f", ahead of the installed {installed}" if installed else ""
    records.add(
        companion.engine.package,
        "companion",
        f"{companion.name} {version} from {tree} ({how}){ahead}; never installed{note}",
    )
    loaded = Loaded(companion, version, tree, spec, how, importer)
    _ACTIVE[companion.name] = loaded
    return loaded


def _installed_version(distribution: str, tree: Path) -> str:
    """The version of ``distribution`` installed outside ``tree`` ("" when none is)."""
    import importlib.metadata

    for dist in importlib.metadata.distributions(name=distribution):
        if Path(str(dist.locate_file(""))).resolve() != tree:
            return str(dist.version)
    return ""


def load(
    companion: Companion,
    engine_tree: Path,
    wanted_by: str,
    records: Records,
    *,
    lister: Lister | None = None,
    downloader: wheels.Downloader | None = None,
) -> Loaded:
    """``companion`` at the version the release in ``engine_tree`` accepts, fetched if need be and active here.

    `wheels.OfflineError` / `wheels.DownloadError` when it cannot be had; `CompanionError` when another copy is
    in this process already."""
    active = _ACTIVE.get(companion.name)
    spec = requirement(engine_tree, companion.engine.distribution) or ""
    why = f"{wanted_by} requires {companion.engine.distribution}{spec}" if spec else f"{wanted_by} pins none"
    if not spec and companion.unpinned is not None:
        spec, rule = companion.unpinned()
        why += f"; {rule}: {spec}"
    if active is not None and _fitting([active.version], spec):
        return active  # a second engine (or a second load) in the process that accepts the one running
    version, how = choose(companion, spec, wanted_by, lister=lister)
    how = f"{why}; {how}"
    ready = integrity.ensure(companion.engine, version, downloader=downloader)
    return activate(companion, version, ready.tree.resolve(), spec, how, records)


def note_installed(companion: Companion, engine_tree: Path, wanted_by: str, records: Records, why: str) -> None:
    """Record (kind ``installed``) that the engine's code imported ``companion``'s package from this environment
    rather than at the release's pin (a load without companions: ``why`` says what of it the path uses); nothing
    when it is a companion, a stand-in, or not imported."""
    module = sys.modules.get(companion.engine.package)
    where = getattr(module, "__file__", None)
    if module is None or where is None or companion.name in _ACTIVE or getattr(module, "__deferlab_standin__", False):
        return
    spec = requirement(engine_tree, companion.engine.distribution)
    pin = f"{wanted_by} requires {companion.engine.distribution}{spec}" if spec else f"{wanted_by} pins none"
    records.add(
        companion.engine.package,
        "installed",
        f"{companion.name} {_version_of(module)} as installed here ({where}), not fetched at the release's pin "
        f"({pin}); {why}",
    )


def active() -> dict[str, Loaded]:
    """The companions this process runs, by name."""
    return dict(_ACTIVE)


# --- the companions deferlab knows ------------------------------------------------------------------------------------
def _python_only(package: str) -> Callable[[str], bool]:
    """Wheel members to unpack: the package's Python and data files and its dist-info, never its compiled
    extensions or bundled shared libraries (built for the torch the release pins, not this one)."""

    def keep(member: str) -> bool:
        top = member.split("/", 1)[0]
        compiled = member.endswith((".so", ".pyd")) or ".so." in member.rsplit("/", 1)[-1]
        return not compiled and (top == package or top.endswith(".dist-info"))

    return keep


def _library(name: str, example_version: str, **layout: Any) -> Engine:
    """A companion library's `Engine`: distribution, import package and display name all ``name``; its package
    ``__init__.py`` files run (guarded), unlike an engine's."""
    names = dict.fromkeys(("name", "distribution", "package", "display"), name)
    return Engine(**names, bare_packages=False, example_version=example_version, **layout)


TRANSFORMERS = Companion(_library("transformers", "5.22.2"))

# torchvision's operator schemas its ``_meta_registrations.py`` registers fake kernels for unconditionally
# (``torch.library.register_fake("torchvision::nms")``, ``"torchvision::qnms"``): without its compiled ops they do
# not exist and ``import torchvision`` fails ("operator torchvision::nms does not exist"). Declared (no kernel)
# before the import, the pure-Python transforms run; calling ``torchvision.ops.nms`` still raises.
TORCHVISION_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_LIBRARIES: list = []  # a torch.library.Library's definitions last as long as the object


def declare_torchvision_ops(records: Records) -> list[str]:
    """Declare `TORCHVISION_SCHEMAS` in the ``torchvision`` namespace (those not defined already), recorded as
    ``declared``; the qualified names declared."""
    import torch

    declared = []
    library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in TORCHVISION_SCHEMAS:
        name = f"torchvision::{schema.split('(', 1)[0]}"
        try:
            library.define(schema)
        except RuntimeError:  # defined already (torchvision's own ops are loaded): nothing to declare
            continue
        declared.append(name)
        records.add(
            name,
            "declared",
            f"operator schema declared with torch.library before torchvision's import ({name}{schema[schema.index('(') :]}"
            ", no kernel): torchvision's _meta_registrations.py registers a fake kernel for it unconditionally and "
            "its compiled ops are not unpacked here; calling it raises",
        )
    _LIBRARIES.append(library)
    return declared


def torch_series() -> tuple[str, str]:
    """The torchvision series built for the running torch (torch 2.N pairs with torchvision 0.(N+15): 2.13 with
    0.28, 2.14 with 0.29, as torchvision's release matrix states), with why; "" (any) for another torch."""
    import torch

    parts = torch.__version__.split("+", 1)[0].split(".")
    if len(parts) < 2 or parts[0] != "2" or not parts[1].isdigit():
        return "", f"no torchvision series is known for torch {torch.__version__}"
    return f"==0.{int(parts[1]) + 15}.*", f"the series matching torch {torch.__version__}"


TORCHVISION = Companion(
    _library("torchvision", "0.29.0", wheel_members=_python_only("torchvision")),
    note=(
        "its Python only: the compiled extensions (_C_stable, image_stable) and bundled libraries are not unpacked "
        "(built for the torch the release pins), so its C++ ops are absent (torchvision.extension._has_ops() is "
        "False); the transforms an image processor runs are Python on torch"
    ),
    prepare=declare_torchvision_ops,
    unpinned=torch_series,
)
KNOWN: dict[str, Companion] = {c.name: c for c in (TRANSFORMERS, TORCHVISION)}
