"""An engine's own resize-config function, compiled with numba, looped over every size in compiled code.

Why: C13's exhaustive sweep asks each engine's Python function for all
16.7M sizes up to 4096 x 4096 per geometry; interpreted that is about 60 s
per geometry and path (3.6 us a call). Compiled, the same source runs in
about a second. What is compiled is the engine's own source text
(``inspect.getsource`` of the function object the path calls), with one
change numba needs: a ``return {"key": value, ...}`` (every engine returns a
dict, which numba would build as a typed dict per call, no faster than
Python) or a ``return SomeDataclass(...)`` (deferlab's model) becomes a
tuple of the same values, its keys kept beside it. The result is trusted
only after `check` finds it equal to the interpreted function, key by key,
on `check_sizes` (>= 20,000 sizes); otherwise the sweep falls back to the
interpreted function on a reduced set and says so.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from deferlab.reports.report import extras

KEYS = ("new_width", "new_height", "pad_width", "pad_height", "num_tokens")
CHECK_RANDOM = 10_000  # random sizes up to CHECK_MAX_SIDE in the equivalence check
CHECK_MAX_SIDE = 16384


class CompileError(RuntimeError):
    """numba is missing, or the function's source cannot be read or compiled (the message says which)."""


@dataclass
class Compiled:
    """A compiled engine function ``fn(w, h, *args)``: ``grid(widths, heights, args) -> int64 (5, H, W)`` and
    ``pairs(ws, hs, args) -> (5, n)``, in `KEYS` order."""

    name: str
    grid: Callable[[np.ndarray, np.ndarray, tuple[Any, ...]], np.ndarray]
    pairs: Callable[[np.ndarray, np.ndarray, tuple[Any, ...]], np.ndarray]


def source_sha256(fn: Callable[..., Any]) -> str:
    """SHA-256 of the function's source text (what a cached or compiled result is valid for)."""
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = repr(getattr(fn, "__code__", fn))
    return hashlib.sha256(text.encode()).hexdigest()


def _field_names(cls: Any) -> list[str] | None:
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return None


class _Returns(ast.NodeTransformer):
    """Every ``return {...}`` / ``return Dataclass(...)`` becomes ``return (v1, ...)``; ``keys`` records names."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace, self.keys = namespace, None

    def _set(self, keys: list[str]) -> None:
        if self.keys is not None and self.keys != keys:
            raise CompileError(f"returns disagree on their keys ({self.keys} vs {keys})")
        self.keys = keys

    def visit_Return(self, node: ast.Return) -> ast.Return:
        v = node.value
        if isinstance(v, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in v.keys):
            self._set([k.value for k in v.keys])
            return ast.copy_location(ast.Return(ast.Tuple(list(v.values), ast.Load())), node)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
            names = _field_names(self.namespace.get(v.func.id))
            if names is None or len(v.args) > len(names):
                raise CompileError(f"returns a call to {v.func.id}, which is not a dataclass")
            given = dict(zip(names, v.args, strict=False)) | {k.arg: k.value for k in v.keywords if k.arg}
            self._set(list(given))
            return ast.copy_location(ast.Return(ast.Tuple(list(given.values()), ast.Load())), node)
        raise CompileError("a return that is neither a dict with string keys nor a dataclass")


def _tuple_form(fn: Callable[..., Any]) -> tuple[Callable[..., Any], list[str]]:
    """The function rebuilt from its own source with tuple returns, in its own module's globals; and the keys."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        filename = inspect.getsourcefile(fn) or "<engine>"
    except (OSError, TypeError) as e:
        raise CompileError(f"no source for {fn!r}: {e}") from None
    tree = ast.parse(source)
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef):
        raise CompileError(f"{fn.__qualname__} is not a plain function")
    func.decorator_list, func.returns = [], None
    for a in func.args.args + func.args.kwonlyargs:
        a.annotation = None
    namespace = dict(fn.__globals__)
    rewrite = _Returns(namespace)
    tree = ast.fix_missing_locations(rewrite.visit(tree))
    if rewrite.keys is None or not set(KEYS) <= set(rewrite.keys):
        raise CompileError(f"{fn.__qualname__} returns no {', '.join(KEYS)}")
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - the engine's own source, as the engine runs it
    return namespace[func.name], rewrite.keys


# ``f`` is the compiled engine function, a global of these loops (a compile-time constant to numba). Serial: numba's
# parallel pass refuses a tuple of arguments holding None (``fixed_output_tokens``).
_LOOPS = """
def grid(ws, hs, args, out):
    for j in range(hs.size):
        for i in range(ws.size):
            r = f(ws[i], hs[j], *args)
            {assign_grid}

def pairs(ws, hs, args, out):
    for i in range(ws.size):
        r = f(ws[i], hs[i], *args)
        {assign_pairs}
"""


def compile_function(fn: Callable[..., Any], args: tuple[Any, ...], name: str | None = None) -> Compiled:
    """``fn(width, height, *args)`` compiled with numba for arguments typed like ``args`` (`CompileError` when it
    cannot be); other argument types compile on first use."""
    why = extras.missing("numba")
    if why is not None:
        raise CompileError(f"the compiled sweep {why}")
    import numba

    rebuilt, keys = _tuple_form(fn)
    idx = [keys.index(k) for k in KEYS]
    code = _LOOPS.format(
        assign_grid="; ".join(f"out[{n}, j, i] = r[{k}]" for n, k in enumerate(idx)),
        assign_pairs="; ".join(f"out[{n}, i] = r[{k}]" for n, k in enumerate(idx)),
    )
    try:
        loops: dict[str, Any] = {"f": numba.njit(rebuilt)}
        exec(code, loops)  # noqa: S102 - the loop text above, with literal tuple indices
        pair = numba.njit(loops["pairs"])
        probe = np.ones(1, np.int64)
        pair(probe, probe, args, np.empty((5, 1), np.int64))  # compile both now, so a failure is a CompileError
        grid = numba.njit(loops["grid"])
        grid(probe, probe, args, np.empty((5, 1, 1), np.int64))
    except Exception as e:  # noqa: BLE001 - numba's errors are many classes; each means "not compiled"
        first = (str(e).strip().splitlines() or [""])[0]
        raise CompileError(f"numba cannot compile {fn.__qualname__}: {type(e).__name__}: {first}") from None

    def run_grid(ws: np.ndarray, hs: np.ndarray, call_args: tuple[Any, ...]) -> np.ndarray:
        out = np.empty((5, len(hs), len(ws)), np.int64)
        grid(np.asarray(ws, np.int64), np.asarray(hs, np.int64), call_args, out)
        return out

    def run_pairs(ws: np.ndarray, hs: np.ndarray, call_args: tuple[Any, ...]) -> np.ndarray:
        out = np.empty((5, len(ws)), np.int64)
        pair(np.asarray(ws, np.int64), np.asarray(hs, np.int64), call_args, out)
        return out

    return Compiled(name or f"{fn.__module__}.{fn.__qualname__}", run_grid, run_pairs)


def boundary_sides(patch: int, factor: int, max_side: int) -> np.ndarray:
    """Every multiple of ``patch`` and of ``factor`` up to ``max_side``, and each +-1 (where NaViT's floors turn)."""
    s = np.concatenate([np.arange(q, max_side + 1, q) for q in (patch, factor)])
    s = np.concatenate([s - 1, s, s + 1])
    return np.unique(s[(s >= 1) & (s <= max_side)])


def check_sizes(patch: int, factor: int, *, seed: int = 13) -> tuple[np.ndarray, np.ndarray]:
    """(widths, heights) of the equivalence check: every size up to 64 x 64, each boundary side (up to 4096)
    against 4 seeded other sides in both orders, and `CHECK_RANDOM` seeded sizes up to `CHECK_MAX_SIDE`."""
    rng = np.random.default_rng(seed)
    small = np.stack(np.meshgrid(np.arange(1, 65), np.arange(1, 65)), -1).reshape(-1, 2)
    edge = boundary_sides(patch, factor, 4096)
    other = rng.integers(1, 4097, (edge.size, 4))
    cross = np.concatenate(
        [np.stack([np.repeat(edge, 4), other.ravel()], -1), np.stack([other.ravel(), np.repeat(edge, 4)], -1)]
    )
    rand = rng.integers(1, CHECK_MAX_SIDE + 1, (CHECK_RANDOM, 2))
    both = np.concatenate([small, cross, rand]).astype(np.int64)
    return both[:, 0], both[:, 1]


def interpreted(fn: Callable[[int, int], Any], ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
    """int64 (5, n): the interpreted function's `KEYS` per size (a dict or an object with those attributes)."""
    out = np.empty((5, len(ws)), np.int64)
    for i, (w, h) in enumerate(zip(ws.tolist(), hs.tolist(), strict=True)):
        r = fn(w, h)
        out[:, i] = [r[k] for k in KEYS] if isinstance(r, dict) else [getattr(r, k) for k in KEYS]
    return out


def check(
    compiled: Compiled, args: tuple[Any, ...], reference: Callable[[int, int], Any], ws: np.ndarray, hs: np.ndarray
) -> list[str]:
    """Sizes (up to 5, ``WxH: compiled ... != interpreted ...``) where the compiled function disagrees."""
    got, want = compiled.pairs(ws, hs, args), interpreted(reference, ws, hs)
    bad = np.flatnonzero((got != want).any(axis=0))
    return [f"{ws[i]}x{hs[i]}: compiled {got[:, i].tolist()} != interpreted {want[:, i].tolist()}" for i in bad[:5]]
