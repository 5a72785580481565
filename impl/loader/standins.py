"""Stand-in objects for what an engine imports but a CPU-only deferlab environment lacks.

Why: an engine's modules sit inside a serving stack (ZMQ, Triton, CUDA
kernels, ...). To run *its* functions here, the module bodies around them
must execute, so every import that cannot be satisfied gets a stand-in and a
record (`provenance.StandIn`). Stand-ins are only scaffolding for module bodies: during the
import phase a call returns another stand-in (or passes a decorated function
through, as ``@triton.jit`` needs); once the driver declares the import phase
over (`end_import_phase`), any *call* of a stand-in raises `StandInUsedError`
naming it. So an engine function the driver reports as "real" cannot quietly
compute with a stand-in: it would crash loudly instead.
"""

from __future__ import annotations

import importlib.machinery
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_STATE: dict = {"importing": True, "depth": 0, "who": "engine"}


class StandInUsedError(RuntimeError):
    """Engine code called a stand-in after the import phase: the run is not all-real, so we stop it."""


def end_import_phase(who: str = "engine") -> None:
    """From now on, calling any stand-in raises `StandInUsedError` (naming ``who``'s code as the caller)."""
    _STATE["importing"] = False
    _STATE["who"] = who


def importing() -> bool:
    """True while stand-ins may be called: the import phase, or any engine module body running later."""
    return _STATE["importing"] or _STATE["depth"] > 0


@contextmanager
def module_body() -> Iterator[None]:
    """Around an engine module body imported lazily at run time: its top-level code may call stand-ins."""
    _STATE["depth"] += 1
    try:
        yield
    finally:
        _STATE["depth"] -= 1


def _refuse(name: str) -> None:
    if not importing():
        raise StandInUsedError(
            f"{name} is a deferlab stand-in (its module is missing or failed to import here); "
            f"{_STATE['who']} code called it at run time, so this path cannot run for real on this machine"
        )


def _itself(obj: Any, other: Any) -> Any:
    """``obj[k]``, ``obj | x`` and ``x | obj`` of a stand-in class or instance: ``obj`` itself."""
    return obj


class _StandInMeta(type):
    """Metaclass of stand-in classes: attribute access, subscription and ``|`` give more stand-ins."""

    def __getattr__(cls, attr: str) -> Any:
        return _attribute(f"{cls.__qualname__}.", attr)

    __getitem__ = __or__ = __ror__ = _itself

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if not cls.__dict__.get("__deferlab_standin__"):
            return super().__call__(*args, **kwargs)  # a real engine class that subclasses a stand-in
        _refuse(cls.__qualname__)
        # Used as a bare decorator (``@standin``): keep the decorated function or class real.
        if len(args) == 1 and not kwargs and (isinstance(args[0], (types.FunctionType, type))):
            return args[0]
        return super().__call__(*args, **kwargs)


class _StandInBase(metaclass=_StandInMeta):
    """Instances: decorator factories, constants, objects a module body builds at import time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:  # subclasses may pass class keywords
        pass

    def __getattr__(self, attr: str) -> Any:
        return _attribute(f"{type(self).__qualname__}().", attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _refuse(f"{type(self).__qualname__}()")
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # ``@factory(...)`` decorators pass the function through
        return standin_class(f"{type(self).__qualname__}()()")()

    def __bool__(self) -> bool:
        # Feature probes (``is_npu()``, ``has_flashinfer()``) built from stand-ins read as "absent":
        # the truth for a CPU-only machine.
        return False

    def __iter__(self) -> Any:
        return iter(())

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (type(self),)

    __getitem__ = __or__ = __ror__ = _itself


def _attribute(prefix: str, attr: str) -> Any:
    """A stand-in class ``prefix + attr`` for an attribute a module body reads; dunders stay missing."""
    if attr.startswith("__") and attr.endswith("__"):
        raise AttributeError(attr)
    return standin_class(prefix + attr)


def standin_class(qualname: str) -> type:
    """A fresh stand-in class named ``qualname`` (subclassable, callable, decorator-transparent)."""
    name = qualname.rsplit(".", 1)[-1]
    cls = _StandInMeta(name, (_StandInBase,), {"__module__": "deferlab.standin", "__deferlab_standin__": True})
    cls.__qualname__ = qualname
    return cls


def is_standin(obj: Any) -> bool:
    """True for stand-in classes and their instances."""
    return isinstance(obj, _StandInMeta) or isinstance(obj, _StandInBase)


class StandInModule(types.ModuleType):
    """A module whose every missing attribute is a stand-in class (a package, so submodules resolve too)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        self.__deferlab_standin__ = True

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        value = standin_class(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


def module_getattr_for(module_name: str) -> Any:
    """A PEP 562 ``__getattr__`` that fills a partly-imported module's missing names with stand-ins."""

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return standin_class(f"{module_name}.{attr}")

    return __getattr__
