"""Which SGLang to run: the installed one, a source checkout, or a release wheel; one per process.

``load(spec)`` resolves the spec, checks that the tree has a Kimi-K3
multimodal processor at all, imports the modules the driver runs (through
`importer.SGLangImporter`, which records every stand-in) and returns a
`Source`. Whether that processor has the owner-deferred path
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

from deferlab.impl.sglang import cache as _cache
from deferlab.impl.sglang.importer import RequiredImportError, SGLangImporter
from deferlab.impl.sglang.standins import StandIn, end_import_phase
from deferlab.reference.system.errors import SourceError

ACCEPTED = (
    "accepted: 'installed' (the sglang importable here), a path to an SGLang source checkout "
    "(a folder holding python/sglang/, or the sglang package folder itself), or a release version "
    "such as '0.5.23' (fetched with pip download into the deferlab cache)"
)
_VERSION = re.compile(r"^\d+(\.\d+){1,3}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")

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


# The start of the message of a fetch that failed: a child process that prints the error is read by it.
FETCH_FAILED = "could not fetch the wheel"


class SGLangFetchError(SGLangSourceError):
    """A released version's wheel is not cached and ``pip download`` could not get it (offline, no index,
    timed out); a wheel that arrived but is unusable is a plain `SGLangSourceError`.

    Its own class because it is the one load failure that says nothing about SGLang or the driver: a test
    may skip on it, and on no other."""


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
    required: tuple[str, ...] = REQUIRED  # the modules imported for real as required (driver runs them)
    whitelist_module: str = "sglang.srt.managers.mm_schedule"  # where _can_skip_pre_embed_feature_move lives
    deferred_parts: dict[str, bool] = field(default_factory=dict)  # each piece of the deferred path: present?
    absent: dict[str, types.ModuleType] = field(default_factory=dict)  # see `_absent_kip`

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
        if full in self.absent:
            return self.absent[full]
        return self.importer.import_required(full)

    def has(self, name: str) -> bool:
        full = name if name.startswith("sglang") else f"sglang.srt.{name}"
        return full in sys.modules and full not in self.optional_errors

    def patch(self, module: str, why: str) -> None:
        """Record that the driver replaced something real at run time (a ``patched`` stand-in record)."""
        self.importer.record(module, "patched", why)


_ACTIVE: Source | None = None  # the source this process loaded, if any (one SGLang per process)


def load(spec: str = "installed", *, cache: Path | None = None, downloader: _cache.Downloader | None = None) -> Source:
    """Resolve ``spec``, import SGLang's Kimi-K3 modules from it for real, and return the `Source`."""
    global _ACTIVE
    if not isinstance(spec, str) or not spec.strip():
        raise SGLangSourceError(f"sglang source {spec!r}: not a non-empty string; {ACCEPTED}")
    spec = spec.strip()
    t0 = time.perf_counter()
    kind, root, version, git_rev, downloaded, wheel = _resolve(spec, cache, downloader)
    _check_processor(spec, root, version)
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
            if not e.download_failed:
                raise SGLangSourceError(
                    f"sglang source {spec!r}: the fetched wheel is unusable ({e}); {ACCEPTED}"
                ) from None
            raise SGLangFetchError(
                f"sglang source {spec!r}: {FETCH_FAILED} with pip download ({e}); "
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


def _check_processor(spec: str, root: Path, version: str) -> None:
    """Refuse a tree without a Kimi-K3 multimodal processor, by reading its files (nothing imported)."""
    if not (root / _PROCESSOR_FILE).is_file():
        raise SGLangSourceError(
            f"sglang source {spec!r} (version {version}, {root}) has no Kimi-K3 multimodal processor "
            f"({_PROCESSOR_FILE} is absent): no eager Kimi-K3 preprocessing and no Kimi-K3 CPU-transport deferred "
            "preprocessing; accepted: 0.5.17 and later (or a checkout that has that processor)"
        )


def _deferred_parts(importer: SGLangImporter) -> dict[str, bool]:
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


def _import(
    spec: str, kind: str, root: Path, version: str, git_rev: str | None, downloaded: bool, wheel: dict[str, str]
) -> Source:
    import numpy  # noqa: F401  - deferlab's own dependencies are imported before any finder is installed,
    import PIL.Image  # noqa: F401  so nothing of theirs can ever be stood in for
    import torch  # noqa: F401

    if kind != "installed" and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    importer = SGLangImporter(root)
    # The deferred module is imported first where the tree has it (its failures are the ones to name);
    # whether the path is complete is decided from the loaded code below.
    if importer.locate(KIP) is not None:
        required, whitelist = REQUIRED, WHITELIST[0]
    else:
        whitelist = next((w for w in WHITELIST if importer.locate(w) is not None), WHITELIST[0])
        required = (*EAGER_REQUIRED, whitelist)
    importer.required |= set(required)
    importer.install()
    source = Source(spec, kind, version, root, git_rev, importer, downloaded, wheel=wheel)
    source.required, source.whitelist_module = required, whitelist
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SGLang warns about CUDA-only features at import; they are not ours
        for name in required:
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
