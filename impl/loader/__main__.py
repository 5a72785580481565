"""The loader's command line: the one child process deferlab starts to load an engine outside a claims run.

    python -m deferlab.impl.loader check ENGINE SPEC            # does SPEC load? one JSON line, or one error line
    python -m deferlab.impl.loader run ENGINE SPEC -- ARGS...   # load SPEC, then pytest ARGS in this process
    python -m deferlab.impl.loader run ENGINE SPEC --companions transformers,torchvision -- ARGS...

Why a module and not code in strings: a process holds one copy of an engine (its modules cannot be
unloaded), so loading "to see whether it loads" (``check``) and running tests against a loaded copy that
imports nothing of deferlab (``run``: a reproducer, a checkout's own unit tests) happen in a child; this is
that child's program, with its own tests (``tests/impl/loader/test_main.py``).

Which callable loads an engine is the registry's (`reference.system.systems.EngineFacts.load_check`):
SGLang's ``sources.load``, vLLM's driver (a tree "loads" when the driver builds on it). ``--companions`` makes
the libraries the release pins that a family path computes with (`impl.loader.companions.KNOWN`) active at the
release's versions before any of its code is imported (`EngineFacts.sources`' ``load(spec, companions=...)``),
so a reproducer of a Qwen or InternVL path imports the transformers the release runs. Exit status:
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


def load(engine_name: str, spec: str, companions: Sequence[str] = ()) -> Any:
    """Load ``spec`` of ``engine_name`` in this process as its load check does (`EngineFacts.load_check`), with
    ``companions`` made active first (the engine's ``sources.load``; the load check then finds the tree loaded)."""
    facts = engine(engine_name)
    if companions:
        from deferlab.impl.loader.companions import KNOWN

        unknown = [c for c in companions if c not in KNOWN]
        if unknown:
            raise DeferlabInputError(f"--companions: unknown {unknown[0]!r}; accepted: {', '.join(KNOWN)}")
        importlib.import_module(facts.sources).load(spec, companions=tuple(companions))
    return _callable(facts.load_check)(spec)


def describe(loaded: Any) -> dict[str, Any]:
    """What a check reports of what loaded: its name (``sglang-0.5.23``), and its description where it has one."""
    source = getattr(loaded, "source", loaded)
    name = getattr(source, "name", None) or str(loaded)
    return {"name": str(name), "version": str(getattr(source, "version", "") or "")}


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0] or type(e).__name__


def _options(args: list[str]) -> tuple[list[str], list[str]] | None:
    """(companions, what follows ``--``) of the words after SPEC; None when they are not ``[--companions A,B]
    [-- ARGS]``."""
    companions: list[str] = []
    if args[:1] == ["--companions"]:
        if len(args) < 2 or not args[1].strip() or args[1] == "--":
            return None
        companions = [c.strip() for c in args[1].split(",") if c.strip()]
        args = args[2:]
    if args and args[0] != "--":
        return None
    return companions, args[1:]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = (
        "usage: python -m deferlab.impl.loader check|run ENGINE SPEC [--companions A,B] [-- ARGS]; ENGINE one of "
        f"{', '.join(ENGINES)}"
    )
    options = _options(args[3:]) if len(args) >= 3 else None
    if options is None or args[0] not in ("check", "run") or (args[0] == "run" and "--" not in args[3:6]):
        print(usage, file=sys.stderr)
        return 2
    (verb, engine_name, spec), (companions, rest) = args[:3], options
    try:
        loaded = load(engine_name, spec, companions)
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

    return int(pytest.main(rest))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
