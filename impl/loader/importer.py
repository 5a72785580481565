"""Import an engine's own modules on a CPU-only machine, standing in only for what fails, and keep the record.

Four rules keep the run honest (the model is Sphinx autodoc's mock importer):

1. **Packages are bare.** Every package of the engine is registered with the
   right ``__path__`` and its ``__init__.py`` is *not* run (it pulls in the
   server). If an engine file imports a *name* from a package, that
   package's real ``__init__.py`` runs then, on demand, and the record says
   who asked for what.
2. **Real first.** Every engine module is imported from its own file. If its
   body raises here, the names it defined before the failure stay real, the
   rest become stand-ins, and the record keeps the error. Modules the driver
   *runs* are `required`: for those a failure is an error, never a stand-in.
3. **Missing modules only where the engine imports them unguarded.** A module
   that is not installed gets a stand-in only when the importing line is an
   engine ``import`` statement outside any ``try ... except ImportError``; a
   guarded import fails as on any machine without it, so the engine's own
   fallback runs. Imports from torch, the stdlib or deferlab never get one
   (which statements are guarded: `guards`, a reading of the file's text).
4. **Never the engine's own Python.** A module of the engine's package that its wheel ships as a ``.py``
   (the tree's ``deferlab-RECORD`` says so) but the tree lacks is a damaged tree, not a missing dependency:
   `IncompleteTreeError` naming the module, however it is imported. A compiled module the wheel ships
   (``.so``, never unpacked for vLLM) may be stood in for as any missing module, and the record says so.

Stand-ins raise if the engine *calls* them after the import phase
(`standins.end_import_phase`), so nothing reported as real can depend on one.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from deferlab.impl.loader import bytecode, guards, release_files
from deferlab.impl.loader.engine import Engine
from deferlab.impl.loader.provenance import Records
from deferlab.impl.loader.standins import StandInModule, module_body, module_getattr_for
from deferlab.reference.system.errors import Stopped

_THIS_DIR = os.path.dirname(os.path.abspath(__file__))


class RequiredImportError(ImportError):
    """A module the driver runs could not be imported for real (carries the module name and the cause)."""

    def __init__(self, module: str, cause: BaseException) -> None:
        super().__init__(f"{module}: {type(cause).__name__}: {cause}")
        self.module = module
        self.cause = cause


class IncompleteTreeError(RuntimeError):
    """A module of the engine's own package that its wheel ships as Python is missing from the tree.

    Not an ImportError, so no ``except ImportError`` fallback of the engine swallows it; the importer also
    keeps it (`Importer.incomplete`), so the load fails even where the engine catches every exception."""

    def __init__(self, module: str, message: str) -> None:
        super().__init__(message)
        self.module = module


class Importer:
    """The import machinery for one source tree of ``engine`` (``root`` holds its package)."""

    def __init__(
        self, engine: Engine, root: Path, required: Iterable[str] = (), records: Records | None = None
    ) -> None:
        self.engine = engine
        self.root = Path(root).resolve()
        self.pkg_dir = self.root / engine.package
        self.required = set(required)
        self.records = Records() if records is None else records  # a companion writes into its engine's record
        self._skip = {_THIS_DIR, *(os.path.abspath(d) for d in engine.driver_dirs)}
        self.live_standins: set[str] = set()  # permissive stand-ins now in sys.modules
        self._front = _FrontFinder(self)
        self._missing = _MissingFinder(self)
        self._installed = False
        self._shipped: dict[str, tuple[str, str]] | None = None
        self.incomplete: list[IncompleteTreeError] = []  # every missing module of the engine's own Python met

    # -- bookkeeping ------------------------------------------------------------------------------------------
    def record(self, module: str, kind: str, why: str) -> None:
        self.records.add(module, kind, why)

    def hide_standins(self) -> None:
        """Take stand-in modules out of ``sys.modules`` once the engine module that imported them is done.

        They stay bound where the engine imported them; out of ``sys.modules`` no third party (torch probing
        for ``triton`` when a ``@torch.compile`` decorator runs, say) can mistake one for the real package.
        """
        while self.live_standins:
            name = self.live_standins.pop()
            module = sys.modules.get(name)
            if module is not None and getattr(module, "__deferlab_standin__", False):
                del sys.modules[name]

    def install(self) -> None:
        """Put the finders on ``sys.meta_path`` (the front one for the engine, the last one for missing modules)."""
        if self._installed:
            return
        sys.meta_path.insert(0, self._front)
        sys.meta_path.append(self._missing)
        self._installed = True

    def import_required(self, name: str) -> types.ModuleType:
        """Import ``name`` for real; a failure of it (or of another required module) raises `RequiredImportError`."""
        self.required.add(name)
        try:
            module = importlib.import_module(name)
        except (RequiredImportError, IncompleteTreeError):
            raise
        except Exception as e:  # noqa: BLE001 - any failure of a required module is reported with its cause
            raise RequiredImportError(name, e) from e
        failed = getattr(module, "__deferlab_failed__", None)
        if failed is not None:
            raise RequiredImportError(name, failed)
        return module

    # -- what the wheel shipped -------------------------------------------------------------------------------
    def shipped(self, name: str) -> tuple[str, str] | None:
        """("python" | "compiled", path in the wheel) when the tree's wheel ships module ``name``; None when it
        does not, or when the tree has no RECORD (a checkout, the installed copy, a wheel without one)."""
        if self._shipped is None:
            self._shipped = release_files.shipped_modules(self.root)
        return self._shipped.get(name)

    def unpacked(self, name: str) -> tuple[str, str] | None:
        """`shipped`, for a module of the engine that unpacking its wheel puts in the tree (a ``.py`` the
        engine keeps, `Engine.wheel_members`); None for any other."""
        found = self.shipped(name) if self.engine.owns(name) else None
        keep = self.engine.wheel_members
        if found is None or found[0] != "python" or (keep is not None and not keep(found[1])):
            return None
        return found

    def refuse_missing(self, name: str) -> None:
        """`IncompleteTreeError` (kept in `incomplete`) if ``name`` is the engine's own Python the tree lacks."""
        found = self.unpacked(name)
        if found is None:
            return
        error = IncompleteTreeError(
            name,
            f"{self.engine.title}'s own module {name} is missing from {self.root}: the tree is incomplete (its "
            f"wheel ships {found[1]}); deferlab never stands in for the engine's own Python",
        )
        self.incomplete.append(error)
        raise error

    # -- where things are -------------------------------------------------------------------------------------
    def in_tree(self, filename: str) -> bool:
        try:
            return os.path.abspath(filename).startswith(str(self.pkg_dir) + os.sep)
        except (TypeError, ValueError):
            return False

    def locate(self, name: str) -> tuple[str, Path] | None:
        """("package", dir) / ("module", file) / ("extension", file) for a name of the engine, or None."""
        parts = name.split(".")
        base = self.root.joinpath(*parts)
        if base.is_dir():
            return ("package", base)
        py = base.with_suffix(".py")
        if py.is_file():
            return ("module", py)
        parent = base.parent
        if parent.is_dir():
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                ext = parent / (parts[-1] + suffix)
                if ext.is_file():
                    return ("extension", ext)
        return None

    def importing_line(self) -> tuple[str, int, bool] | None:
        """(file, line, guarded) of the engine ``import`` statement that is running, if that is who is importing."""
        frame = sys._getframe(2)
        while frame is not None:
            fn = frame.f_code.co_filename
            if fn.startswith("<frozen importlib") or os.path.dirname(os.path.abspath(fn)) in self._skip:
                frame = frame.f_back
                continue
            if fn.endswith(os.path.join("importlib", "__init__.py")):
                return None  # importlib.import_module(...): a call the engine guards itself, never a stand-in
            if not self.in_tree(fn):
                return None
            guarded = guards.guarded(fn, frame.f_lineno)
            if guarded is None:
                return None  # not an import statement (find_spec probes, __import__ calls)
            return (fn, frame.f_lineno, guarded)
        return None

    def rel(self, path: str | Path) -> str:
        try:
            return str(Path(path).resolve().relative_to(self.root))
        except ValueError:
            return str(path)


class _FrontFinder(importlib.abc.MetaPathFinder):
    """Finds the engine's modules in the chosen tree: packages bare (a companion's run their ``__init__.py``,
    guarded), modules through a loader that records failures."""

    def __init__(self, importer: Importer) -> None:
        self.importer = importer

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not self.importer.engine.owns(name):
            return None
        found = self.importer.locate(name)
        if found is None:
            return None
        kind, where = found
        if kind == "package" and not self.importer.engine.bare_packages and (where / "__init__.py").is_file():
            init = str(where / "__init__.py")
            loader = _GuardedLoader(self.importer, _CachedSourceLoader(name, init))
            return importlib.util.spec_from_file_location(
                name, init, loader=loader, submodule_search_locations=[str(where)]
            )
        if kind == "package":
            init = where / "__init__.py"
            if not init.is_file():
                self.importer.refuse_missing(name)
            spec = importlib.machinery.ModuleSpec(
                name, _BareLoader(self.importer, where), origin=str(init) if init.is_file() else None, is_package=True
            )
            spec.submodule_search_locations = [str(where)]
            spec.has_location = init.is_file()
            return spec
        inner: importlib.abc.Loader
        if kind == "module":
            inner = _CachedSourceLoader(name, str(where))
        else:
            inner = importlib.machinery.ExtensionFileLoader(name, str(where))
        return importlib.util.spec_from_file_location(name, str(where), loader=_GuardedLoader(self.importer, inner))


class _CachedSourceLoader(importlib.machinery.SourceFileLoader):
    """An engine file's code from `bytecode` (keyed by its exact bytes) instead of compiling it on every load."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        return bytecode.code_for(path, data, lambda: self.source_to_code(data, path))


class _GuardedLoader(importlib.abc.Loader):
    """Runs an engine module's own file; if its body raises, keeps what it defined and stands in for the rest."""

    def __init__(self, importer: Importer, inner: importlib.abc.Loader) -> None:
        self.importer = importer
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        try:
            with module_body():
                self.inner.exec_module(module)
        except (KeyboardInterrupt, SystemExit, Stopped, RequiredImportError, IncompleteTreeError):
            raise
        except BaseException as e:  # noqa: BLE001 - any failure of a module body is what we record
            _mark_failed(self.importer, name, module, e)
        finally:
            self.importer.hide_standins()


def _mark_failed(importer: Importer, name: str, module: types.ModuleType, e: BaseException, prefix: str = "") -> None:
    """A module body (or a package's ``__init__.py``) raised: a required module's failure is an error;
    any other keeps what it defined, stands in for the rest, and the record says why and where."""
    if name in importer.required:
        raise RequiredImportError(name, e) from e
    importer.record(name, "failed", f"{prefix}{type(e).__name__}: {e}{_failure_line(e, importer)}")
    module.__dict__["__getattr__"] = module_getattr_for(name)
    module.__dict__["__deferlab_failed__"] = e


def _failure_line(e: BaseException, importer: Importer) -> str:
    tb = e.__traceback__
    last = None
    while tb is not None:
        if importer.in_tree(tb.tb_frame.f_code.co_filename):
            last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    return f" (at {importer.rel(last.tb_frame.f_code.co_filename)}:{last.tb_lineno})"


class _BareLoader(importlib.abc.Loader):
    """An engine package without its ``__init__.py``; the init runs only if a name from it is imported."""

    def __init__(self, importer: Importer, where: Path) -> None:
        self.importer = importer
        self.where = where

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        init = self.where / "__init__.py"
        if init.is_file():
            self.importer.record(name, "bare", self.importer.engine.bare_why)
            module.__file__ = str(init)
        module.__dict__["__getattr__"] = _lazy_init(self.importer, module, self.where)


def _lazy_init(importer: Importer, module: types.ModuleType, where: Path) -> Any:
    """The bare package's ``__getattr__``: a requested non-submodule name runs the real ``__init__.py`` once."""
    state = {"ran": False}

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__") and attr != "__all__":
            raise AttributeError(attr)  # ``__all__``: a star import wants the real init's names
        if importer.locate(f"{module.__name__}.{attr}") is not None or state["ran"]:
            raise AttributeError(f"module {module.__name__!r} has no attribute {attr!r}")
        init = where / "__init__.py"
        if not init.is_file():
            raise AttributeError(f"module {module.__name__!r} has no attribute {attr!r}")
        state["ran"] = True
        who = importer.importing_line()
        asker = f" by {importer.rel(who[0])}:{who[1]}" if who else ""
        importer.record(module.__name__, "init", f"ran the real __init__.py on demand: {attr!r} was requested{asker}")
        del module.__dict__["__getattr__"]
        try:
            with module_body():
                exec(compile(init.read_text(encoding="utf-8"), str(init), "exec"), module.__dict__)  # noqa: S102
        except (KeyboardInterrupt, SystemExit, Stopped, RequiredImportError, IncompleteTreeError):
            raise
        except BaseException as e:  # noqa: BLE001
            _mark_failed(importer, module.__name__, module, e, prefix="__init__.py: ")
        if attr in module.__dict__:
            return module.__dict__[attr]
        fallback = module.__dict__.get("__getattr__")
        if fallback is not None:
            return fallback(attr)
        raise AttributeError(f"module {module.__name__!r} has no attribute {attr!r}")

    return __getattr__


class _MissingFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a stand-in for a module nobody has, when an engine line imports it unguarded."""

    def __init__(self, importer: Importer) -> None:
        self.importer = importer

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        self.importer.refuse_missing(name)  # the engine's own Python: never a stand-in, guarded or not
        who = self.importer.importing_line()
        if who is None or who[2]:
            return None
        build, note = self.importer.engine.functional.get(name, (None, ""))
        shipped = self.importer.shipped(name) if self.importer.engine.owns(name) else None
        where = f"imported unguarded at {self.importer.rel(who[0])}:{who[1]}"
        kind = "a compiled module" if shipped and shipped[0] == "compiled" else "a module"
        why = (
            f"{kind} its wheel ships ({shipped[1]}), not unpacked here; {where}"
            if shipped
            else f"not installed here; {where}"
        )
        self.importer.record(name, "missing", f"{why}; {note}" if note else why)
        return importlib.machinery.ModuleSpec(name, _StandInLoader(self.importer, build), is_package=True)


class _StandInLoader(importlib.abc.Loader):
    """A permissive stand-in (hidden again after the importing module, `hide_standins`), or a functional
    one from `Engine.functional` (its builder keeps one module per name for the process)."""

    def __init__(self, importer: Importer, build: Callable[[str], types.ModuleType] | None) -> None:
        self.importer = importer
        self.build = build

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if self.build is None:
            self.importer.live_standins.add(spec.name)
            return StandInModule(spec.name)
        return self.build(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None
