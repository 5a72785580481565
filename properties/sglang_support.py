"""Loading the real SGLang in tests: one rule for when a test may skip instead of fail.

Why: a released version's wheel that is not cached and cannot be downloaded
says nothing about SGLang or about the driver, so a test may skip on it, with
the reason. Every other load failure (an import error inside SGLang, a module
the driver does not stand in for, a source without the feature) is a finding
and must fail the test that hit it. The rule lives here once, keyed on
`impl.sglang.sources.SGLangFetchError`, so no test matches messages of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from impl.sglang.sources import FETCH_FAILED, SGLangFetchError

T = TypeVar("T")


def _reason(spec: str, error: str) -> str:
    return f"sglang {spec} is not cached and pip cannot reach the package index: {error}"


def load_or_skip(factory: Callable[[str], T], spec: str) -> T:
    """``factory(spec)`` (a driver, a seam, a loaded source); a skip only when the wheel cannot be fetched."""
    try:
        return factory(spec)
    except SGLangFetchError as e:
        pytest.skip(_reason(spec, str(e)))


def skip_if_unfetched(spec: str, error_text: str) -> None:
    """The same rule for a child process, which can only print its load error: skip on the fetch failure."""
    if FETCH_FAILED in error_text:
        pytest.skip(_reason(spec, error_text.strip()[-2000:]))
