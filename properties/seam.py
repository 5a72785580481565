"""The seam harness: how ``--impl`` picks who answers the properties, and what each test called.

Why a seam: the properties are the product, the implementation is a
parameter. The same suite checks deferlab's torch ``impl/``, a deliberately
broken copy of it (the proof that each property can fail), or another
system with the same functions (e.g. SGLang's on a GPU box), without editing
a test. The protocol itself (`Impl`, `to_numpy`, `is_real_code`) is the
description's, `reference.system.seam`; it is re-exported here because the
tests reach it as ``seam.Impl`` / ``seam.to_numpy``.

``--impl NAME`` looks ``NAME`` up in `REGISTRY` (a factory, or a
``module:object`` path imported on use, so this module imports no
implementation); ``--impl module:object`` imports ``module`` and takes
``object`` (an instance, or a class / factory called with no arguments).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from deferlab.reference.system.seam import FACTS, METHODS, Impl, call_methods, is_real_code, to_numpy

__all__ = [
    "ACTIVE",
    "DEFAULT_IMPL",
    "REGISTRY",
    "Impl",
    "Recording",
    "call_methods",
    "evidence",
    "is_real_code",
    "register",
    "resolve_impl",
    "to_numpy",
]

DEFAULT_IMPL = "deferlab"


class Recording:
    """The implementation under test, noting which of its methods a test called.

    Why: a claim's verdict is only as real as the code behind the methods
    its test called. The recorder reads `called` when it records a verdict
    and writes each method's provenance beside it (real code, patched, or
    modelled and why), so the report can say, per claim, what ran.
    """

    def __init__(self, impl: Any) -> None:
        object.__setattr__(self, "_impl", impl)
        object.__setattr__(self, "called", set())

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._impl, name)
        if name in METHODS or name in FACTS[:-1]:

            def traced(*args: Any, **kwargs: Any) -> Any:
                self.called.add(name)
                return value(*args, **kwargs)

            return traced
        return value

    def evidence(self) -> dict[str, str]:
        """Provenance of every method called since the last `reset`."""
        table = self._impl.provenance() if hasattr(self._impl, "provenance") else {}
        return {m: table.get(m, "unknown") for m in sorted(self.called)}

    def reset(self) -> None:
        self.called.clear()


ACTIVE: Recording | None = None  # the session's implementation, set by the plugin's ``impl`` fixture


def evidence() -> dict[str, str]:
    """What the current test's claim ran on (empty outside a session)."""
    return ACTIVE.evidence() if ACTIVE is not None else {}


Factory = Callable[[], Impl] | str  # a factory, or "module:object" imported when the name is resolved
REGISTRY: dict[str, Factory] = {"deferlab": "deferlab.impl.seam:DeferlabImpl"}


def __getattr__(name: str) -> Any:
    """``seam.DeferlabImpl``: deferlab's model, imported on first use (this module imports no implementation)."""
    if name == "DeferlabImpl":
        from deferlab.impl.seam import DeferlabImpl

        return DeferlabImpl
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(name: str, factory: Factory) -> None:
    """Add an implementation under a short name (for ``--impl NAME``)."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"implementation name must be a non-empty str without ':', got {name!r}")
    REGISTRY[name] = factory


def resolve_impl(spec: str | Impl, registry: Mapping[str, Factory] | None = None) -> Impl:
    """The implementation named by ``spec``: a registered name, ``module:object``, or an `Impl` itself."""
    registry = REGISTRY if registry is None else registry
    if not isinstance(spec, str):
        obj = spec
    elif spec in registry:
        factory = registry[spec]
        obj = _imported(spec, factory) if isinstance(factory, str) else factory()
    elif ":" in spec:
        obj = _imported(spec, spec)
    else:
        raise ValueError(f"--impl {spec!r}: not a registered name ({', '.join(registry)}) nor module:object")
    missing = [m for m in ("name", *METHODS, *FACTS) if not hasattr(obj, m)]
    if missing:
        raise TypeError(f"--impl {spec!r}: {type(obj).__name__} lacks {missing}; see properties/SEAM.md")
    return obj


def _imported(spec: str, path: str) -> Any:
    """The object at ``path`` ("module:object"), called when it is a class or factory; errors name ``spec``."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--impl {spec!r}: cannot import module {module_name!r}: {e}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"--impl {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Impl)):
        obj = obj()
    return obj
