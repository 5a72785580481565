"""Every implementation behind the seam takes each protocol method's parameters as the protocol declares them.

Tests call the seam by keyword (``properties/SEAM.md`` names the parameters), so an implementation whose
parameter is renamed, reordered, made positional-only or given another default breaks only the calls that
use it; this reads the signatures off the classes (nothing is instantiated, so no SGLang wheel is loaded).

The rule, per protocol method (`reference.system.seam.Impl`, ``self`` left out): the protocol's parameters
come first, in order, each with the protocol's name, kind and default; an implementation may give a default
to a parameter the protocol requires (SGLang ignores ``policy``, so it defaults it to None), and may add
trailing keyword-only parameters that have defaults. A method that passes the rest through (``*args`` /
``**kwargs``, as the broken implementations do) must match up to them, and the method it overrides must match.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from deferlab.impl.seam import DeferlabImpl
from deferlab.impl.sglang.broken import BrokenSGLangGateTie
from deferlab.impl.sglang.driver import SGLangImpl
from deferlab.properties import broken
from deferlab.reference.system.seam import Impl, call_methods

P = inspect.Parameter
PASS_THROUGH = (P.VAR_POSITIONAL, P.VAR_KEYWORD)

IMPLEMENTATIONS = [
    DeferlabImpl,
    *(cls for _, cls in inspect.getmembers(broken, inspect.isclass) if issubclass(cls, DeferlabImpl)),
    SGLangImpl,
    BrokenSGLangGateTie,
]


def _params(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())[1:]  # without self


def _mismatch(want: list[inspect.Parameter], got: list[inspect.Parameter]) -> str | None:
    """Why ``got`` does not take ``want`` as the protocol declares it (None: it does, or passes the rest on)."""
    for k, w in enumerate(want):
        if k >= len(got):
            return f"lacks {w.name!r}"
        g = got[k]
        if g.kind in PASS_THROUGH:
            return None  # the rest is passed on: the overridden method is checked as well
        if (g.name, g.kind) != (w.name, w.kind):
            theirs = f"the protocol's {w.name!r} ({w.kind.description})"
            return f"parameter {k + 1} is {g.name!r} ({g.kind.description}), {theirs}"
        if w.default is not P.empty and g.default != w.default:
            return f"{w.name!r} defaults to {g.default!r}, the protocol's to {w.default!r}"
    for g in got[len(want) :]:
        if g.kind in PASS_THROUGH:
            continue
        if g.kind is not P.KEYWORD_ONLY or g.default is P.empty:
            return f"extra parameter {g.name!r} is not keyword-only with a default"
    return None


def _defined(cls: type, name: str) -> list[tuple[str, Callable[..., Any]]]:
    """Every definition of method ``name`` along ``cls``'s MRO, nearest first (an override and what it calls)."""
    return [(base.__qualname__, base.__dict__[name]) for base in cls.__mro__ if name in base.__dict__]


def seam_mismatches(cls: type) -> list[str]:
    """Each protocol method ``cls`` lacks or whose parameters (name, kind, default) are not the protocol's."""
    out = []
    for name in call_methods():
        want = _params(getattr(Impl, name))
        if not callable(getattr(cls, name, None)):
            out.append(f"{cls.__qualname__}.{name}: missing")
            continue
        for owner, fn in _defined(cls, name):
            if owner == Impl.__qualname__:
                break
            why = _mismatch(want, _params(fn))
            if why:
                out.append(f"{owner}.{name}: {why}")
            if not any(p.kind in PASS_THROUGH for p in _params(fn)):
                break  # a full signature: what it overrides is not called through it
    return out


def test_the_protocol_names_every_method_it_declares():
    assert all(callable(getattr(Impl, name, None)) for name in call_methods())
    assert len(IMPLEMENTATIONS) >= 7  # deferlab, its four broken copies, SGLang and its broken gate


@pytest.mark.parametrize("cls", IMPLEMENTATIONS, ids=lambda c: c.__qualname__)
def test_every_implementation_takes_the_protocol_parameters(cls):
    assert seam_mismatches(cls) == []


def test_a_renamed_parameter_is_reported():
    class Renamed(DeferlabImpl):
        def deliver(self, items: Any, ranks: int, *, policy: Any) -> list[list[Any]]:
            return []

    class Reordered(DeferlabImpl):
        def resize(self, x: Any, out_w: int, out_h: int, device: str = "cpu") -> Any:
            return x

    class OtherDefault(DeferlabImpl):
        def epd_items(self, images: Any, config: Any, *, policy: Any, backend: str = "cpu") -> list[Any]:
            return []

    class RequiredExtra(DeferlabImpl):
        def gate_paths(self, policy: Any, strict: bool) -> list[tuple[str, bool]]:
            return []

    assert seam_mismatches(Renamed) == [
        "test_a_renamed_parameter_is_reported.<locals>.Renamed.deliver: parameter 2 is 'ranks' (positional or "
        "keyword), the protocol's 'num_ranks' (positional or keyword)"
    ]
    assert [m.split(": ", 1)[1] for m in seam_mismatches(Reordered)] == [
        "parameter 2 is 'out_w' (positional or keyword), the protocol's 'out_h' (positional or keyword)"
    ]
    assert [m.split(": ", 1)[1] for m in seam_mismatches(OtherDefault)] == [
        "'backend' defaults to 'cpu', the protocol's to 'gpu'"
    ]
    assert [m.split(": ", 1)[1] for m in seam_mismatches(RequiredExtra)] == [
        "extra parameter 'strict' is not keyword-only with a default"
    ]


def test_a_pass_through_override_is_checked_up_to_its_rest_and_through_what_it_overrides():
    class Base(DeferlabImpl):
        def process(self, images: Any, configuration: Any, **kwargs: Any) -> Any:
            return None

    class PassesOn(Base):
        def process(self, images: Any, *args: Any, **kwargs: Any) -> Any:
            return super().process(images, *args, **kwargs)

    assert [m.rsplit(".", 1)[1] for m in seam_mismatches(PassesOn)] == [
        "process: parameter 2 is 'configuration' (positional or keyword), the protocol's 'config' (positional or "
        "keyword)"
    ]
