"""Proof that a property can catch a broken SGLang: the real code with a one-line break patched in.

Why a patched copy of SGLang's own function and not a deferlab stand-in: the
point is that the *same* driver, pointed at *SGLang's* code, fails a property
when that code changes by one token. `gate_tie_break` recompiles the gate
method from SGLang's loaded source with ``raw_bytes <= processed_bytes``
turned into ``<`` (ties stay eager, contradicting semantics §4), and installs it on
``KimiK3ImageProcessor`` only while a `BrokenSGLangGateTie` method runs, so a real
`SGLangImpl` in the same process keeps the shipped gate. No file is edited.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from deferlab.impl.sglang import runtime
from deferlab.impl.sglang.driver import SGLangImpl
from deferlab.impl.sglang.sources import GATE, Source

TIE_LINE = ("return raw_bytes <= processed_bytes", "return raw_bytes < processed_bytes")


@contextlib.contextmanager
def gate_tie_break(source: Source) -> Iterator[None]:
    """``KimiK3ImageProcessor._should_defer_gpu_preprocessing`` with its ``<=`` made ``<``, for the block."""
    pk3 = source.module("multimodal.processors.kimi_k3")
    cls = pk3.KimiK3ImageProcessor
    real = cls.__dict__[GATE]
    text = textwrap.dedent(inspect.getsource(real))
    old, new = TIE_LINE
    if text.count(old) != 1:
        raise RuntimeError(f"{source.name}: the gate does not contain {old!r} exactly once; cannot break it")
    namespace = dict(pk3.__dict__)
    exec(compile(text.replace(old, new), f"<deferlab broken {GATE}>", "exec"), namespace)  # noqa: S102
    with runtime.patched(source, cls, GATE, namespace[GATE], f"BROKEN on purpose: {old!r} -> {new!r}"):
        yield


def _within(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def run(self: BrokenSGLangGateTie, *args: Any, **kwargs: Any) -> Any:
        with gate_tie_break(self.source):
            return method(self, *args, **kwargs)

    return run


class BrokenSGLangGateTie(SGLangImpl):
    """`SGLangImpl` whose gate keeps ties eager (``<`` for ``<=``): the tie rule (semantics §4) must catch it."""

    def __init__(self, spec: str | Source | None = None, **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        self.name = f"{self.name}-broken-gate-tie"

    # gate_bytes reads the shipped gate's locals as it returns; the tie break does not change the bytes it counts.
    defer_decisions = _within(SGLangImpl.defer_decisions)
    process = _within(SGLangImpl.process)
    features = _within(SGLangImpl.features)
