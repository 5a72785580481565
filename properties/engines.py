"""Loading a real engine inside a check: the one rule for when a check may skip instead of fail.

Why: a released version's wheel that is not cached and cannot be downloaded says nothing about the engine
or about deferlab's driver, so a check (or a benchmark) may skip on it, with the reason. Every other load
failure (an import error inside the engine, a module the driver does not stand in for, a source without the
feature) is a finding and must fail the check that hit it. Keyed on the loader's `FetchError`, so nothing
matches messages of its own.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import TypeVar

import pytest

from deferlab.impl.loader.engine import FETCH_FAILED, FetchError
from deferlab.reference.system.engines import engine as engine_facts

T = TypeVar("T")


def default_spec(engine: str = "sglang") -> str:
    """The release a check loads: ``DEFERLAB_<ENGINE>`` (``DEFERLAB_SGLANG``, ``DEFERLAB_VLLM``...), else the
    driver's own default (its plugin's ``hooks.default_version()``)."""
    hooks = importlib.import_module(engine_facts(engine).hooks)
    return os.environ.get(f"DEFERLAB_{engine.upper()}", hooks.default_version())


def _reason(engine: str, spec: str, error: str) -> str:
    return f"{engine} {spec} is not cached and pip cannot reach the package index: {error}"


def load_or_skip(factory: Callable[[str], T], spec: str, engine: str = "sglang") -> T:
    """``factory(spec)`` (a driver, a seam, a loaded source); a skip only when the wheel cannot be fetched."""
    try:
        return factory(spec)
    except FetchError as e:
        pytest.skip(_reason(engine, spec, str(e)))


def skip_if_unfetched(spec: str, error_text: str, engine: str = "sglang") -> None:
    """The same rule for a child process, which can only print its load error: skip on the fetch failure."""
    if FETCH_FAILED in error_text:
        pytest.skip(_reason(engine, spec, error_text.strip()[-2000:]))
