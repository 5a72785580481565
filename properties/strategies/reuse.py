"""One strategy object per factory call: the claims' composites call the factories on every draw.

A fresh strategy object is validated, and its emptiness and labels computed, on its first draw; the claims'
request composites build their image, config and key strategies anew on every draw, and that was about a
third of drawing a request. `reused` keeps one object per (hashable) arguments. A strategy is immutable and
its label depends on its structure, not on the object, so a reused one draws the same choices as a fresh
one: every example, and every shrunk counterexample, stays what it was (`tests/claims/test_strategy_reuse.py`
checks the examples against fresh strategies').
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def reused(factory: F) -> F:
    """``factory`` (a strategy factory) giving the same strategy object for the same (hashable) arguments.

    Why: the claims' composites call these factories on every draw, and a fresh strategy object is validated
    and its emptiness and labels computed on its first draw: about a third of drawing a request went there.
    A strategy is immutable, so one object serves every draw; it draws the same choices as a fresh one (same
    structure, same labels), so every example, and every shrunk counterexample, is what it was. Unhashable
    arguments (a list of modes) build a fresh strategy, as before."""
    cached = lru_cache(maxsize=1024)(factory)

    @wraps(factory)
    def build(*args: Any, **kwargs: Any) -> Any:
        try:
            return cached(*args, **kwargs)
        except TypeError:  # an unhashable argument
            return factory(*args, **kwargs)

    return build  # type: ignore[return-value]
