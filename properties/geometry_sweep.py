"""The families' exhaustive sweep (C13, semantics §18): one engine geometry function, compiled, against an oracle.

Why: C13's exhaustive part asks an engine's geometry function for all 16,777,216 sizes up to 4096 x 4096. The
machinery (compiling the engine's own function with numba, the check sizes, the chunked comparison) is the one the
report's Kimi NaViT step uses, `impl.compiled` (shared by the report and the checks); this
module adds the family check's record (`Sweep`, its evidence line) and `sweep_function`. The compiled
result is trusted only after it equals the interpreted function on `check_sizes`; otherwise (or when numba cannot
compile it) the sweep runs the interpreted function on a reduced set and says so (`Sweep.route`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deferlab.impl import compiled as gc


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


def sweep_function(
    fn: Callable[..., Any] | None,
    call: gc.Call | None,
    args: tuple[Any, ...],
    name: str,
    oracle: gc.Grid,
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
    missing = gc.numba_missing()
    if missing is not None:
        return Sweep(name, "skipped", note=f"the compiled sweep {missing}; the claim decides on the drawn sizes")
    why, compiled, checked = why_not, None, 0
    if fn is not None and call is not None:
        try:
            compiled = gc.compile_call(fn, call, args, name)
        except gc.CompileError as e:
            why = str(e)
        if compiled is not None:
            cw, ch = gc.check_sizes(steps, max_side)
            checked = int(cw.size)
            bad = gc.disagreements(
                compiled.pairs(cw, ch), gc.evaluate(gc.interpreted(fn, call, args), cw, ch), cw, ch, ""
            )
            if bad:
                compiled, why = None, f"the compiled function disagrees with the interpreted one at {bad[0]}"
    if compiled is not None:
        tally = gc.sweep_grids([compiled.grid], oracle, max_side)[0]
        found = Sweep(name, "compiled", sizes=max_side * max_side, checked=checked)
    else:
        scalar = fallback or gc.interpreted(fn, call, args)  # type: ignore[arg-type]
        rw, rh = reduced() if reduced is not None else gc.check_sizes(steps, max_side)
        tally = gc.Tally()
        tally.add(rw, rh, gc.evaluate(scalar, rw, rh), oracle(rw, rh))
        found = Sweep(name, "interpreted-reduced", sizes=int(rw.size), note=f"not compiled because {why}")
    found.mismatches = tally.count
    if tally.found:
        w, h, found.engine, found.oracle = tally.found[0]
        found.first = (w, h)
    found.seconds = time.perf_counter() - t0
    return found
