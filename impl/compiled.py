"""An engine's own geometry function compiled with numba and swept over every size against a vectorized oracle.

Why: C13's exhaustive part (semantics §18) asks an engine's geometry function for all 16,777,216 sizes up to
4096 x 4096; interpreted that is a minute or more per function, compiled about a second. One machinery for both
users: the report's Kimi NaViT step (`reports.report.sweeps.geometry`) and the families' check
(`properties.geometry_sweep`, `properties.family_geometry`). It lives with the systems under test because it
is a way of running an engine's own code (as the drivers are), which both the CLI and the checks may import (the
CLI never imports the checks). What is compiled is the function object the engine
calls, from its own code, with only the changes numba needs: the plain functions of its own module it calls are
compiled the same way first (vLLM's ``find_closest_aspect_ratio``); keyword-only parameters become
positional-or-keyword (every call here passes them by name, so binding is unchanged); and, asked
(``tuple_returns``, `rewrite_returns`), a ``return {"key": ...}`` or ``return SomeDataclass(...)`` becomes a tuple of the same
values (numba would build a typed dict per call, no faster than Python). The loop catches a raise per size and
writes `REFUSED` there. A compiled result is trusted only once its caller finds it equal to the interpreted
function on `check_sizes`.

`sweep_grids` is the chunked comparison: rows of heights against every width, the oracle computed once per chunk
for every engine, the first differing sizes (row-major in height, then width) the counterexamples.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deferlab.reference.system.extras import module_missing

REFUSED = -1  # what the loop (and an oracle) writes where the function refuses the size
CHUNK_ROWS = 256  # heights per chunk of the exhaustive sweep (5 x 256 x 4096 int64 = 42 MB)
Grid = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (widths (1, W), heights (H, 1)) -> int64 (K, H, W)


def numba_missing() -> str | None:
    """None when numba is installed; else the one line naming the extra that installs it (never imported here:
    numba takes seconds to import)."""
    return module_missing("numba")


class CompileError(RuntimeError):
    """numba is missing, or the function's source cannot be read or compiled (the message says which, in one line)."""


@dataclass(frozen=True)
class Call:
    """How the loop calls the function and reads its result: ``call`` a Python expression in ``w``, ``h`` and the
    arguments ``a0``, ``a1``, ...; ``outputs`` expressions in its result ``r``, one per compared value (with
    ``tuple_returns``: the names of the returned keys)."""

    call: str
    outputs: tuple[str, ...]


@dataclass
class Compiled:
    """``grid(widths, heights) -> int64 (K, H, W)`` and ``pairs(ws, hs) -> (K, n)`` of a compiled function; both
    take other ``args`` (typed otherwise: compiled again on first use)."""

    name: str
    grid: Callable[..., np.ndarray]
    pairs: Callable[..., np.ndarray]


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
            cls = self.namespace.get(v.func.id)
            names = (
                [f.name for f in dataclasses.fields(cls)]
                if isinstance(cls, type) and dataclasses.is_dataclass(cls)
                else None
            )
            if names is None or len(v.args) > len(names):
                raise CompileError(f"returns a call to {v.func.id}, which is not a dataclass")
            given = dict(zip(names, v.args, strict=False)) | {k.arg: k.value for k in v.keywords if k.arg}
            self._set(list(given))
            return ast.copy_location(ast.Return(ast.Tuple(list(given.values()), ast.Load())), node)
        raise CompileError("a return that is neither a dict with string keys nor a dataclass")


def rewrite_returns(fn: Callable[..., Any], keys: tuple[str, ...]) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """``fn`` rebuilt from its own source with tuple returns, in a copy of its module's globals; and ``r[i]``,
    the output expression of each of ``keys``."""
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
    if rewrite.keys is None or not set(keys) <= set(rewrite.keys):
        raise CompileError(f"{fn.__qualname__} returns no {', '.join(keys)}")
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - the engine's own source, as the engine runs it
    return namespace[func.name], tuple(f"r[{rewrite.keys.index(k)}]" for k in keys)


def _positional(fn: types.FunctionType, namespace: dict[str, Any]) -> types.FunctionType:
    """``fn``'s code with keyword-only parameters made positional-or-keyword (defaults dropped: every call here
    passes every argument), resolving globals in ``namespace``."""
    code, defaults = fn.__code__, fn.__defaults__
    if code.co_kwonlyargcount:
        code = code.replace(co_argcount=code.co_argcount + code.co_kwonlyargcount, co_kwonlyargcount=0)
        defaults = None
    return types.FunctionType(code, namespace, fn.__name__, defaults, fn.__closure__)


def jit_tree(fn: Callable[..., Any]) -> Any:
    """``fn`` compiled with numba (lazily), the plain functions of its own module it calls compiled first."""
    import numba

    if not inspect.isfunction(fn):
        raise CompileError(f"{fn!r} is not a plain Python function")
    namespace = dict(fn.__globals__)
    for name in fn.__code__.co_names:
        callee = namespace.get(name)
        if inspect.isfunction(callee) and callee is not fn and callee.__globals__ is fn.__globals__:
            namespace[name] = jit_tree(callee)
    return numba.njit(_positional(fn, namespace))


_LOOPS = """
def grid(ws, hs, {params}, out):
    for j in range(hs.size):
        h = hs[j]
        for i in range(ws.size):
            w = ws[i]
{grid}

def pairs(ws, hs, {params}, out):
    for i in range(ws.size):
        w = ws[i]
        h = hs[i]
{pairs}
"""


def compile_call(
    fn: Callable[..., Any],
    call: Call,
    args: tuple[Any, ...],
    name: str,
    *,
    tuple_returns: bool = False,
    refusals: bool = True,
) -> Compiled:
    """``fn`` compiled (`jit_tree`; with ``tuple_returns`` rebuilt by `rewrite_returns` first) inside the two loops
    ``call`` describes, for arguments typed like ``args``; `CompileError` in one line when numba is missing or
    cannot compile it. ``refusals`` False: no try block (a raise propagates; numba then compiles in half the
    time)."""
    why = numba_missing()
    if why is not None:
        raise CompileError(f"the compiled sweep {why}")
    import numba

    outputs = call.outputs
    if tuple_returns:
        fn, outputs = rewrite_returns(fn, outputs)
    k, n_args = len(outputs), max(3, len(args))
    pad = lambda a: (*a, *(0,) * (n_args - len(a)))  # noqa: E731

    def body(index: str, indent: int) -> str:
        lines = [f"r = {call.call}", "; ".join(f"out[{n}, {index}] = {v}" for n, v in enumerate(outputs))]
        if refusals:
            refused = "; ".join(f"out[{n}, {index}] = {REFUSED}" for n in range(k))
            lines = ["try:", *(f"    {line}" for line in lines), "except Exception:", f"    {refused}"]
        return textwrap.indent("\n".join(lines), " " * indent)

    code = _LOOPS.format(params=", ".join(f"a{i}" for i in range(n_args)), grid=body("j, i", 12), pairs=body("i", 8))
    try:
        loops: dict[str, Any] = {"f": jit_tree(fn)}
        exec(code, loops)  # noqa: S102 - the loop text above, around the engine's own function
        grid, pair = numba.njit(loops["grid"]), numba.njit(loops["pairs"])
        probe = np.ones(1, np.int64)
        pair(probe, probe, *pad(args), np.empty((k, 1), np.int64))  # compile both now: a failure is a CompileError
        grid(probe, probe, *pad(args), np.empty((k, 1, 1), np.int64))
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - numba's errors are many classes; each means "not compiled"
        first = (str(e).strip().splitlines() or [""])[0]
        raise CompileError(f"numba cannot compile {name}: {type(e).__name__}: {first}"[:300]) from None

    def run_grid(ws: np.ndarray, hs: np.ndarray, args: tuple[Any, ...] = args) -> np.ndarray:
        ws, hs = np.asarray(ws, np.int64).ravel(), np.asarray(hs, np.int64).ravel()
        out = np.empty((k, hs.size, ws.size), np.int64)
        grid(ws, hs, *pad(args), out)
        return out

    def run_pairs(ws: np.ndarray, hs: np.ndarray, args: tuple[Any, ...] = args) -> np.ndarray:
        out = np.empty((k, len(ws)), np.int64)
        pair(np.asarray(ws, np.int64), np.asarray(hs, np.int64), *pad(args), out)
        return out

    return Compiled(name, run_grid, run_pairs)


def interpreted(fn: Callable[..., Any], call: Call, args: tuple[Any, ...]) -> Callable[[int, int], list[int]]:
    """The interpreted function called as the loop calls it: ``(w, h) -> [outputs]``, `REFUSED` where it raises."""
    names = {f"a{i}": a for i, a in enumerate(args)}
    expr = compile(call.call, "<call>", "eval")
    outputs = [compile(o, "<output>", "eval") for o in call.outputs]

    def run(w: int, h: int) -> list[int]:
        try:
            r = eval(expr, {"f": fn}, {"w": w, "h": h, **names})  # noqa: S307 - the call text of a `Call`
        except Exception:  # noqa: BLE001 - the processor refusing the size
            return [REFUSED] * len(outputs)
        return [int(eval(o, {}, {"r": r})) for o in outputs]  # noqa: S307

    return run


def evaluate(scalar: Callable[[int, int], list[int]], ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
    """int64 (K, n): ``scalar`` per (width, height), in Python."""
    rows = [scalar(w, h) for w, h in zip(np.asarray(ws).tolist(), np.asarray(hs).tolist(), strict=True)]
    return np.asarray(rows, np.int64).reshape(len(rows), -1).T


def interpreted_grid(scalar: Callable[[int, int], list[int]]) -> Grid:
    """``scalar`` as a `Grid` (in Python: for grids small enough to need no compiling)."""

    def grid(ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
        w2, h2 = np.broadcast_arrays(ws, hs)
        return evaluate(scalar, w2.ravel(), h2.ravel()).reshape(-1, *w2.shape)

    return grid


def boundary_sides(steps: tuple[int, ...], max_side: int, *, ends: bool = True) -> np.ndarray:
    """Every multiple of each step up to ``max_side``, and each +-1 (where the rules turn); with ``ends`` also
    1, 2 and ``max_side``."""
    s = np.concatenate([np.arange(q, max_side + 1, q) for q in steps])
    s = np.concatenate([s - 1, s, s + 1, *([[1, 2, max_side]] if ends else [])])
    return np.unique(s[(s >= 1) & (s <= max_side)])


def check_sizes(
    steps: tuple[int, ...],
    max_side: int,
    *,
    n_random: int = 10_000,
    small: int = 48,
    random_side: int = 0,
    ends: bool = True,
    seed: int = 13,
) -> tuple[np.ndarray, np.ndarray]:
    """(widths, heights) a compiled function is checked on: every size up to ``small`` x ``small``, each boundary
    side against 4 seeded others in both orders, and ``n_random`` seeded sizes up to ``max(max_side,
    random_side)`` (no size beyond it)."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(np.arange(1, small + 1), np.arange(1, small + 1)), -1).reshape(-1, 2)
    edge = boundary_sides(steps, max_side, ends=ends)
    other = rng.integers(1, max_side + 1, (edge.size, 4)).ravel()
    cross = np.concatenate([np.stack([np.repeat(edge, 4), other], -1), np.stack([other, np.repeat(edge, 4)], -1)])
    top = max(max_side, random_side)
    both = np.concatenate([grid, cross, rng.integers(1, top + 1, (n_random, 2))]).astype(np.int64)
    both = both[(both <= top).all(axis=1)]
    return both[:, 0], both[:, 1]


def disagreements(
    got: np.ndarray, want: np.ndarray, ws: np.ndarray, hs: np.ndarray, what: str, versus: str = ""
) -> list[str]:
    """Up to five ``WxH: <what> [..] != <versus>[..]`` lines where two (K, n) answers differ."""
    bad = np.flatnonzero((got != want).any(axis=0))
    return [f"{ws[i]}x{hs[i]}: {what} {got[:, i].tolist()} != {versus}{want[:, i].tolist()}" for i in bad[:5]]


class Tally:
    """How many sizes of a sweep differ, and the first ``keep`` as (width, height, engine, oracle)."""

    def __init__(self, keep: int = 1) -> None:
        self.keep, self.count, self.found = keep, 0, []

    def add(self, ws: np.ndarray, hs: np.ndarray, got: np.ndarray, want: np.ndarray) -> None:
        if np.array_equal(got, want):
            return
        k = got.shape[0]
        g, o = got.reshape(k, -1), want.reshape(k, -1)
        bad = np.flatnonzero((g != o).any(axis=0))
        self.count += int(bad.size)
        ww, hh = (np.broadcast_to(a, np.broadcast(ws, hs).shape).ravel() for a in (ws, hs))
        for i in bad[: self.keep - len(self.found)]:
            self.found.append((int(ww[i]), int(hh[i]), g[:, i].tolist(), o[:, i].tolist()))


def sweep_grids(
    engines: Sequence[Grid], oracle: Grid, max_side: int, *, chunk_rows: int = CHUNK_ROWS, keep: int = 1
) -> list[Tally]:
    """Every width x height in 1..``max_side``, ``chunk_rows`` heights at a time, each engine against the oracle
    (computed once per chunk)."""
    tallies = [Tally(keep) for _ in engines]
    ws = np.arange(1, max_side + 1, dtype=np.int64)[None, :]
    for lo in range(1, max_side + 1 if engines else 1, chunk_rows):
        hs = np.arange(lo, min(lo + chunk_rows, max_side + 1), dtype=np.int64)[:, None]
        want = oracle(ws, hs)
        for engine, tally in zip(engines, tallies, strict=True):
            tally.add(ws, hs, engine(ws, hs), want)
    return tallies
