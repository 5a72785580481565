"""Which SGLang to run: the installed one, a source checkout, or a release wheel; one per process.

``load(spec)`` resolves the spec, checks that the tree has the Kimi-K3
deferred preprocessing at all, imports the modules the driver runs (through
`importer.SGLangImporter`, which records every stand-in) and returns a
`Source`. Bad input raises one `SGLangSourceError` whose message says what was
tried and what is accepted. A process holds one SGLang: modules live in
``sys.modules`` under ``sglang.*``, so a second, different source cannot sit
beside the first (the version matrix runs one subprocess per version).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
import time
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from impl.sglang import cache as _cache
from impl.sglang.importer import RequiredImportError, SGLangImporter
from impl.sglang.standins import StandIn, end_import_phase
from reference.errors import SourceError

ACCEPTED = (
    "accepted: 'installed' (the sglang importable here), a path to an SGLang source checkout "
    "(a folder holding python/sglang/, or the sglang package folder itself), or a release version "
    "such as '0.5.23' (fetched with pip download into the deferlab cache)"
)
_VERSION = re.compile(r"^\d+(\.\d+){1,3}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")

# Modules whose functions the driver runs: they must import for real.
REQUIRED = (
    "sglang.srt.multimodal.kimi_k3_image_processing",
    "sglang.srt.multimodal.processors.kimi_k25",
    "sglang.srt.managers.schedule_batch",
    "sglang.srt.multimodal.mm_utils",
    "sglang.srt.managers.mm_schedule",
    "sglang.srt.models.kimi_k3",
    "sglang.srt.multimodal.processors.kimi_k3",
)
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
# What a tree must contain to have the deferred feature at all (read before importing anything).
_FEATURE_FILES = {
    "sglang/srt/multimodal/kimi_k3_image_processing.py": "DEFERRED_PREPROCESSING_KEY",
    "sglang/srt/multimodal/processors/kimi_k3.py": "_should_defer_gpu_preprocessing",
    "sglang/srt/models/kimi_k3.py": "DEFERRED_PREPROCESSING_KEY",
}


class SGLangSourceError(SourceError):
    """The SGLang source asked for cannot be used (the message says what was tried and what is accepted)."""


@dataclass
class Source:
    """One loaded SGLang tree: where it is, which version, and every stand-in its import needed."""

    spec: str
    kind: str  # "installed" | "checkout" | "wheel"
    version: str
    root: Path  # the folder holding the sglang package
    git_rev: str | None
    importer: SGLangImporter
    downloaded: bool = False
    load_seconds: float = 0.0
    wheel: dict[str, str] = field(default_factory=dict)
    optional_errors: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"sglang-{self.version}" + (f"+g{self.git_rev[:9]}" if self.git_rev else "")

    @property
    def stand_ins(self) -> list[StandIn]:
        """Every module that is not the real thing here (kinds in `standins.StandIn`), in the order met."""
        return list(self.importer.records)

    def module(self, name: str) -> types.ModuleType:
        """An SGLang module, imported for real (``name`` may drop the ``sglang.srt.`` prefix)."""
        full = name if name.startswith("sglang") else f"sglang.srt.{name}"
        return self.importer.import_required(full)

    def has(self, name: str) -> bool:
        full = name if name.startswith("sglang") else f"sglang.srt.{name}"
        return full in sys.modules and full not in self.optional_errors

    def patch(self, module: str, why: str) -> None:
        """Record that the driver replaced something real at run time (a ``patched`` stand-in record)."""
        self.importer.record(module, "patched", why)


_ACTIVE: Source | None = None


def active() -> Source | None:
    """The source this process loaded, if any."""
    return _ACTIVE


def load(spec: str = "installed", *, cache: Path | None = None, downloader: _cache.Downloader | None = None) -> Source:
    """Resolve ``spec``, import SGLang's Kimi-K3 modules from it for real, and return the `Source`."""
    global _ACTIVE
    if not isinstance(spec, str) or not spec.strip():
        raise SGLangSourceError(f"sglang source {spec!r}: not a non-empty string; {ACCEPTED}")
    spec = spec.strip()
    t0 = time.perf_counter()
    kind, root, version, git_rev, downloaded, wheel = _resolve(spec, cache, downloader)
    _check_feature(spec, root, version)
    if _ACTIVE is not None:
        if _ACTIVE.root == root:
            return _ACTIVE
        raise SGLangSourceError(
            f"sglang source {spec!r}: this process already runs {_ACTIVE.name} from {_ACTIVE.root}; "
            "one SGLang version per process (run each version in its own subprocess)"
        )
    loaded = sys.modules.get("sglang")
    if loaded is not None and not str(getattr(loaded, "__file__", "") or "").startswith(str(root)):
        raise SGLangSourceError(
            f"sglang source {spec!r}: another sglang ({getattr(loaded, '__file__', '?')}) is already imported "
            "in this process; one SGLang version per process"
        )
    source = _import(spec, kind, root, version, git_rev, downloaded, wheel)
    source.load_seconds = time.perf_counter() - t0
    _ACTIVE = source
    return source


def _resolve(
    spec: str, cache: Path | None, downloader: _cache.Downloader | None
) -> tuple[str, Path, str, str | None, bool, dict[str, str]]:
    if spec == "installed":
        found = importlib.util.find_spec("sglang")
        if found is None or not found.submodule_search_locations:
            raise SGLangSourceError(
                f"sglang source 'installed': no sglang package is importable by {sys.executable}; {ACCEPTED}"
            )
        root = Path(list(found.submodule_search_locations)[0]).resolve().parent
        return "installed", root, _tree_version(root), None, False, {}
    path = Path(spec).expanduser()
    if path.exists():
        root = _checkout_root(spec, path)
        return "checkout", root, _tree_version(root), _git_rev(path), False, {}
    if _VERSION.match(spec):
        try:
            tree, downloaded = _cache.fetch(spec, cache, downloader)
        except _cache.FetchError as e:
            if e.versions:
                listed = ", ".join(e.versions[-25:])
                raise SGLangSourceError(
                    f"sglang source {spec!r}: the package index has no sglang=={spec} (it lists {listed}); {ACCEPTED}"
                ) from None
            raise SGLangSourceError(
                f"sglang source {spec!r}: could not fetch the wheel with pip download ({e}); "
                f"is the package index reachable? {ACCEPTED}"
            ) from None
        return "wheel", tree.resolve(), spec, None, downloaded, _cache.source_meta(tree)
    if "/" in spec or spec.startswith((".", "~")):
        raise SGLangSourceError(f"sglang source {spec!r}: no such path; {ACCEPTED}")
    raise SGLangSourceError(f"sglang source {spec!r}: neither 'installed', an existing path nor a version; {ACCEPTED}")


def _checkout_root(spec: str, path: Path) -> Path:
    """The folder holding ``sglang/`` for a checkout (``python/sglang``), a package dir or an unzipped wheel."""
    path = path.resolve()
    for root in (path / "python", path.parent if path.name == "sglang" else None, path):
        if root is not None and (root / "sglang" / "__init__.py").is_file() and (root / "sglang" / "srt").is_dir():
            return root
    raise SGLangSourceError(
        f"sglang source {spec!r}: {path} is not an SGLang checkout (no python/sglang/ with __init__.py and srt/, "
        f"and not the sglang package folder itself); {ACCEPTED}"
    )


def _tree_version(root: Path) -> str:
    """The version a tree declares (``sglang/_version.py``, else ``pyproject.toml``), or ``unknown``."""
    candidates = [root / "sglang" / "_version.py", root / "sglang" / "version.py"]
    for path in candidates:
        try:
            tree = ast.parse(path.read_text())
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if names & {"__version__", "version"} and isinstance(node.value.value, str):
                    return node.value.value
    for pyproject in (root / "pyproject.toml", root.parent / "pyproject.toml"):
        try:
            match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        except OSError:
            continue
        if match:
            return match.group(1)
    return "unknown"


def _git_rev(path: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(path.resolve()), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", rev) else None


def _check_feature(spec: str, root: Path, version: str) -> None:
    """Refuse a tree without Kimi-K3 owner-deferred preprocessing, by reading its files (nothing imported)."""
    lacking = []
    for rel, marker in _FEATURE_FILES.items():
        path = root / rel
        if not path.is_file():
            lacking.append(f"{rel} is absent")
        elif marker not in path.read_text(encoding="utf-8", errors="replace"):
            lacking.append(f"{rel} has no {marker}")
    if lacking:
        raise SGLangSourceError(
            f"sglang source {spec!r} (version {version}, {root}): no Kimi-K3 CPU-transport deferred preprocessing "
            f"({'; '.join(lacking)}); accepted: a source that has it (releases 0.5.18 and later do)"
        )


def _import(
    spec: str, kind: str, root: Path, version: str, git_rev: str | None, downloaded: bool, wheel: dict[str, str]
) -> Source:
    import numpy  # noqa: F401  - deferlab's own dependencies are imported before any finder is installed,
    import PIL.Image  # noqa: F401  so nothing of theirs can ever be stood in for
    import torch  # noqa: F401

    if kind != "installed" and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    importer = SGLangImporter(root, required=REQUIRED)
    importer.install()
    source = Source(spec, kind, version, root, git_rev, importer, downloaded, wheel=wheel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SGLang warns about CUDA-only features at import; they are not ours
        for name in REQUIRED:
            try:
                importer.import_required(name)
            except RequiredImportError as e:
                raise SGLangSourceError(
                    f"sglang source {spec!r} (version {version}, {root}): importing {e.module} failed inside "
                    f"SGLang: {type(e.cause).__name__}: {e.cause}"
                ) from e
        for name in OPTIONAL:
            if importer.locate(name) is None:
                source.optional_errors[name] = "absent in this version"
                continue
            try:
                importer.import_required(name)
            except RequiredImportError as e:
                source.optional_errors[name] = f"{type(e.cause).__name__}: {e.cause}"
    end_import_phase()
    return source
