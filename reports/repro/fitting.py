"""What the reproducer templates share: a template's type, and reading a recorded counterexample back.

Why apart: SGLang's templates (`reports.repro.templates`), the served-vs-trained ones (`reports.repro.served`)
and the C9 replay (`reports.repro.ipc`) all read the same recorded forms (a repr'd list, a config's geometry
fields, a PIL image's description, a (mean, std) pair); one reading of each keeps them from drifting apart.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GEOMETRY = ("patch_size", "merge_kernel_size", "in_patch_limit", "patch_limit_on_one_side", "fixed_output_tokens")
K3_GEOMETRY = {"patch_size": 14, "merge_kernel_size": 2, "in_patch_limit": 16384, "patch_limit_on_one_side": 512,
               "fixed_output_tokens": None}  # fmt: skip
# A PIL image as deferlab's counterexamples describe it (mode, size, info, data, palette): groups 1-6.
PIL_IMAGE = (
    r"PIL\.Image\(mode='([^']+)', size=\((\d+), (\d+)\), info=(\{.*?\}), data=bytes\.fromhex\('([0-9a-f]*)'\)"
    r"(?:, palette=bytes\.fromhex\('([0-9a-f]*)'\))?\)"
)


@dataclass(frozen=True)
class Template_:
    """A claim's template: ``fit(counterexample, failure, row)`` gives the placeholders (None: does not apply);
    ``row`` is the whole verdict row (its provenance says, e.g., which image processor vLLM served with)."""

    text: str
    fit: Callable[..., dict[str, Any] | None]
    what: str  # the flaw it reproduces, for the header


def literal(value: Any) -> Any:
    """A recorded value read back (a repr string as the Python value it shows; anything else as it is)."""
    if isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def ints(text: str, names: tuple[str, ...]) -> dict[str, int | None] | None:
    """``name=N`` (or ``None``) for each of ``names`` in a config's repr; None when one is missing."""
    out: dict[str, int | None] = {}
    for name in names:
        m = re.search(rf"\b{name}=(\d+|None)\b", text)
        if m is None:
            return None
        out[name] = None if m.group(1) == "None" else int(m.group(1))
    return out


def stats_pair(ce: Any, failure: str, says: str) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The (mean, std) a normalization claim's counterexample names, when its failure ``says`` what the template
    reproduces; None otherwise."""
    stats = literal(ce)
    if says not in failure or not (isinstance(stats, list | tuple) and len(stats) == 2):
        return None
    try:
        mean, std = (tuple(float(v) for v in part) for part in stats)
    except (TypeError, ValueError):
        return None
    return mean, std
