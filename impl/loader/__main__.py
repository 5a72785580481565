"""The loader's command line: the one child process deferlab starts to load an engine outside a claims run.

    python -m deferlab.impl.loader check ENGINE SPEC            # does SPEC load? one JSON line, or one error line
    python -m deferlab.impl.loader run ENGINE SPEC -- ARGS...   # load SPEC, then pytest ARGS in this process

Why a module and not code in strings: a process holds one copy of an engine (its modules cannot be
unloaded), so loading "to see whether it loads" (``check``) and running tests against a loaded copy that
imports nothing of deferlab (``run``: a reproducer, a checkout's own unit tests) happen in a child; this is
that child's program, with its own tests (``tests/impl/loader/test_main.py``).

Which callable loads an engine is the registry's (`reference.system.systems.EngineFacts.load_check`):
SGLang's ``sources.load``, vLLM's driver (a tree "loads" when the driver builds on it). Exit status:
0 loaded (``check``) or pytest's own (``run``); `LOAD_FAILED` (99) with the loader's one line on stderr, after
`ERROR_MARK`, when SPEC cannot be loaded; 2 bad usage.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from deferlab.reference.system.errors import DeferlabInputError
from deferlab.reference.system.systems import ENGINES, engine

LOAD_FAILED = 99
ERROR_MARK = "deferlab-load: "  # the start of the one stderr line a load failure prints
RESULT_MARK = "deferlab-loaded: "  # the start of the one stdout line a check prints (then JSON)


def _callable(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def load(engine_name: str, spec: str) -> Any:
    """Load ``spec`` of ``engine_name`` in this process as its load check does (`EngineFacts.load_check`)."""
    return _callable(engine(engine_name).load_check)(spec)


def describe(loaded: Any) -> dict[str, Any]:
    """What a check reports of what loaded: its name (``sglang-0.5.23``), and its description where it has one."""
    source = getattr(loaded, "source", loaded)
    name = getattr(source, "name", None) or str(loaded)
    return {"name": str(name), "version": str(getattr(source, "version", "") or "")}


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0] or type(e).__name__


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: python -m deferlab.impl.loader check|run ENGINE SPEC [-- ARGS]; ENGINE one of {', '.join(ENGINES)}"
    if len(args) < 3 or args[0] not in ("check", "run") or (args[0] == "run" and "--" not in args[3:4]):
        print(usage, file=sys.stderr)
        return 2
    verb, engine_name, spec = args[:3]
    try:
        loaded = load(engine_name, spec)
    except DeferlabInputError as e:
        print(ERROR_MARK + _first_line(e), file=sys.stderr)
        return LOAD_FAILED
    except Exception as e:  # noqa: BLE001 - building the driver on a broken tree: still one line, named
        print(f"{ERROR_MARK}{type(e).__name__}: {_first_line(e)}", file=sys.stderr)
        return LOAD_FAILED
    if verb == "check":
        print(RESULT_MARK + json.dumps(describe(loaded)), flush=True)
        return 0
    import pytest

    return int(pytest.main(args[4:]))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
