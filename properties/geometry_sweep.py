"""An engine's own geometry function compiled with numba and swept over every size against a vectorized oracle.

Why: C13's exhaustive part (semantics §18) asks an engine's geometry function for all 16,777,216 sizes up to
4096 x 4096; interpreted that is a minute or more per function, compiled about a second. What is compiled is
the function object the engine calls, from its own code, with two changes numba needs and nothing else: the plain
functions of its own module it calls are compiled the same way first (vLLM's ``find_closest_aspect_ratio``),
and keyword-only parameters become positional-or-keyword (every call here passes them by name, so binding is
unchanged). The loop catches a raise per size and writes `REFUSED` there. The compiled result is trusted only
after `check` finds it equal to the interpreted function on boundary and random sizes; otherwise (or when numba
cannot compile it) the sweep runs the interpreted function on a reduced set and says so (`Sweep.route`).

`sweep_grid` is the chunked comparison: rows of heights against every width, the first differing size (row-major
in height, then width) the counterexample.
"""

from __future__ import annotations

import inspect
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deferlab.reports.report import extras

REFUSED = -1  # what the loop (and an oracle) writes where the function refuses the size
CHUNK_ROWS = 256  # heights per chunk of the exhaustive sweep
Grid = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (widths (1, W), heights (H, 1)) -> int64 (K, H, W)


class CompileError(RuntimeError):
    """numba is missing, or cannot compile the function (the message says which, in one line)."""


@dataclass(frozen=True)
class Call:
    """How the loop calls the function and reads its result: ``call`` a Python expression in ``w``, ``h`` and the
    arguments ``a0``, ``a1``, ``a2``; ``outputs`` expressions in its result ``r``, one per compared value."""

    call: str
    outputs: tuple[str, ...]


@dataclass
class Compiled:
    """``grid(widths, heights) -> int64 (K, H, W)`` and ``pairs(ws, hs) -> (K, n)`` of a compiled function."""

    name: str
    grid: Callable[[np.ndarray, np.ndarray], np.ndarray]
    pairs: Callable[[np.ndarray, np.ndarray], np.ndarray]


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
def grid(ws, hs, a0, a1, a2, out):
    for j in range(hs.size):
        h = hs[j]
        for i in range(ws.size):
            w = ws[i]
            try:
                r = {call}
                {grid_ok}
            except Exception:
                {grid_bad}

def pairs(ws, hs, a0, a1, a2, out):
    for i in range(ws.size):
        w = ws[i]
        h = hs[i]
        try:
            r = {call}
            {pairs_ok}
        except Exception:
            {pairs_bad}
"""


def compile_call(fn: Callable[..., Any], call: Call, args: tuple[Any, ...], name: str) -> Compiled:
    """``fn`` compiled (`jit_tree`) inside the two loops ``call`` describes, for arguments typed like ``args`` (at
    most three); `CompileError` in one line when numba is missing or cannot compile it."""
    why = extras.missing("numba")
    if why is not None:
        raise CompileError(f"the compiled sweep {why}")
    import numba

    k = len(call.outputs)
    padded = (*args, *(0,) * (3 - len(args)))

    def assign(index: str, values: tuple[str, ...]) -> str:
        return "; ".join(f"out[{n}, {index}] = {v}" for n, v in enumerate(values))

    code = _LOOPS.format(
        call=call.call,
        grid_ok=assign("j, i", call.outputs),
        grid_bad=assign("j, i", (str(REFUSED),) * k),
        pairs_ok=assign("i", call.outputs),
        pairs_bad=assign("i", (str(REFUSED),) * k),
    )
    try:
        loops: dict[str, Any] = {"f": jit_tree(fn)}
        exec(code, loops)  # noqa: S102 - the loop text above, around the engine's own function
        grid, pair = numba.njit(loops["grid"]), numba.njit(loops["pairs"])
        probe = np.ones(1, np.int64)
        pair(probe, probe, *padded, np.empty((k, 1), np.int64))  # compile both now: a failure is a CompileError
        grid(probe, probe, *padded, np.empty((k, 1, 1), np.int64))
    except CompileError:
        raise
    except Exception as e:  # noqa: BLE001 - numba's errors are many classes; each means "not compiled"
        first = (str(e).strip().splitlines() or [""])[0]
        raise CompileError(f"numba cannot compile {name}: {type(e).__name__}: {first}"[:300]) from None

    def run_grid(ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
        ws, hs = np.asarray(ws, np.int64).ravel(), np.asarray(hs, np.int64).ravel()
        out = np.empty((k, hs.size, ws.size), np.int64)
        grid(ws, hs, *padded, out)
        return out

    def run_pairs(ws: np.ndarray, hs: np.ndarray) -> np.ndarray:
        out = np.empty((k, len(ws)), np.int64)
        pair(np.asarray(ws, np.int64), np.asarray(hs, np.int64), *padded, out)
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


def boundary_sides(steps: tuple[int, ...], max_side: int) -> np.ndarray:
    """Every multiple of each step up to ``max_side``, and each +-1 (where the rules turn)."""
    s = np.concatenate([np.arange(q, max_side + 1, q) for q in steps])
    s = np.concatenate([s - 1, s, s + 1, [1, 2, max_side]])
    return np.unique(s[(s >= 1) & (s <= max_side)])


def check_sizes(
    steps: tuple[int, ...], max_side: int, *, n_random: int = 10_000, seed: int = 13
) -> tuple[np.ndarray, np.ndarray]:
    """(widths, heights) the compiled function is checked on: every size up to 48 x 48, each boundary side against
    4 seeded others in both orders, and ``n_random`` seeded sizes up to ``max_side``."""
    rng = np.random.default_rng(seed)
    small = np.stack(np.meshgrid(np.arange(1, 49), np.arange(1, 49)), -1).reshape(-1, 2)
    edge = boundary_sides(steps, max_side)
    other = rng.integers(1, max_side + 1, (edge.size, 4)).ravel()
    cross = np.concatenate([np.stack([np.repeat(edge, 4), other], -1), np.stack([other, np.repeat(edge, 4)], -1)])
    both = np.concatenate([small, cross, rng.integers(1, max_side + 1, (n_random, 2))]).astype(np.int64)
    both = both[(both <= max_side).all(axis=1)]
    return both[:, 0], both[:, 1]


def disagreements(got: np.ndarray, want: np.ndarray, ws: np.ndarray, hs: np.ndarray, what: str) -> list[str]:
    """Up to five ``WxH: <what> [..] != [..]`` lines where two (K, n) answers differ."""
    bad = np.flatnonzero((got != want).any(axis=0))
    return [f"{ws[i]}x{hs[i]}: {what} {got[:, i].tolist()} != {want[:, i].tolist()}" for i in bad[:5]]


@dataclass
class Sweep:
    """One sweep's record: ``route`` "compiled" (every size), "interpreted-reduced" or "skipped"; ``first`` the
    first differing (width, height) with both answers, ``mismatches`` how many differ."""

    function: str
    route: str
    sizes: int = 0
    seconds: float = 0.0
    mismatches: int = 0
    first: tuple[int, int] | None = None
    engine: list[int] = field(default_factory=list)
    oracle: list[int] = field(default_factory=list)
    checked: int = 0
    note: str = ""

    def evidence(self, oracle: str, outputs: tuple[str, ...]) -> str:
        """One line: what was swept, how, in how long, and the first difference."""
        if self.route == "skipped":
            return f"exhaustive sweep skipped: {self.note}"
        how = (
            f"compiled with numba (equal to the interpreted function on {self.checked:,} check sizes)"
            if self.route == "compiled"
            else f"interpreted, on a reduced set ({self.note})"
        )
        found = "every size agrees"
        if self.first is not None:
            names = ", ".join(outputs)
            found = (
                f"{self.mismatches:,} sizes differ, first {self.first[0]}x{self.first[1]}: ({names}) engine "
                f"{self.engine} != oracle {self.oracle}"
            )
        return f"exhaustive: {self.sizes:,} sizes of {self.function}, {how}, against {oracle}: {found} ({self.seconds:.1f} s)"


class Tally:
    """The first differing size of a sweep and how many differ."""

    def __init__(self) -> None:
        self.count, self.first, self.engine, self.oracle = 0, None, [], []

    def add(self, ws: np.ndarray, hs: np.ndarray, got: np.ndarray, want: np.ndarray) -> None:
        k = got.shape[0]
        bad = np.flatnonzero((got.reshape(k, -1) != want.reshape(k, -1)).any(axis=0))
        self.count += int(bad.size)
        if bad.size and self.first is None:
            ww, hh = (np.broadcast_to(a, np.broadcast(ws, hs).shape).ravel() for a in (ws, hs))
            i = bad[0]
            self.first = (int(ww[i]), int(hh[i]))
            self.engine, self.oracle = got.reshape(k, -1)[:, i].tolist(), want.reshape(k, -1)[:, i].tolist()


def sweep_grid(engine: Grid, oracle: Grid, max_side: int, chunk_rows: int = CHUNK_ROWS) -> Tally:
    """Every width x height in 1..``max_side``, ``chunk_rows`` heights at a time, engine against oracle."""
    tally = Tally()
    ws = np.arange(1, max_side + 1, dtype=np.int64)[None, :]
    for lo in range(1, max_side + 1, chunk_rows):
        hs = np.arange(lo, min(lo + chunk_rows, max_side + 1), dtype=np.int64)[:, None]
        tally.add(ws, hs, engine(ws, hs), oracle(ws, hs))
    return tally


def sweep_function(
    fn: Callable[..., Any] | None,
    call: Call | None,
    args: tuple[Any, ...],
    name: str,
    oracle: Grid,
    *,
    steps: tuple[int, ...],
    max_side: int = 4096,
    fallback: Callable[[int, int], list[int]] | None = None,
    reduced: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None,
    why_not: str = "",
) -> Sweep:
    """``fn`` (called as ``call`` with ``args``) against ``oracle`` over every size up to ``max_side``, compiled;
    or, when numba is missing, the record says skipped; when there is nothing to compile (``fn`` None, ``why_not``),
    it cannot compile or the compiled function disagrees with the interpreted one, ``fallback`` (default the
    interpreted ``fn``) on ``reduced()`` sizes."""
    t0 = time.perf_counter()
    missing = extras.missing("numba")
    if missing is not None:
        return Sweep(name, "skipped", note=f"the compiled sweep {missing}; the claim decides on the drawn sizes")
    why, compiled, checked = why_not, None, 0
    if fn is not None and call is not None:
        try:
            compiled = compile_call(fn, call, args, name)
        except CompileError as e:
            why = str(e)
        if compiled is not None:
            cw, ch = check_sizes(steps, max_side)
            checked = int(cw.size)
            bad = disagreements(compiled.pairs(cw, ch), evaluate(interpreted(fn, call, args), cw, ch), cw, ch, "")
            if bad:
                compiled, why = None, f"the compiled function disagrees with the interpreted one at {bad[0]}"
    if compiled is not None:
        tally = sweep_grid(compiled.grid, oracle, max_side)
        found = Sweep(name, "compiled", sizes=max_side * max_side, checked=checked)
    else:
        scalar = fallback or interpreted(fn, call, args)  # type: ignore[arg-type]
        rw, rh = reduced() if reduced is not None else check_sizes(steps, max_side)
        tally = Tally()
        tally.add(rw, rh, evaluate(scalar, rw, rh), oracle(rw, rh))
        found = Sweep(name, "interpreted-reduced", sizes=int(rw.size), note=f"not compiled because {why}")
    found.mismatches, found.first, found.engine, found.oracle = tally.count, tally.first, tally.engine, tally.oracle
    found.seconds = time.perf_counter() - t0
    return found
