"""``deferlab versions``: a named release that cannot be had is refused before any release runs.

Why: the matrix runs releases one after another for about a minute each; a
typo in the last one used to cost every run before it and end in exit 3
with a column of nothing. The check reads the wheel cache first and asks the
package index (one call per engine) only for releases not cached.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reports.versions.cli import refuse_unlisted

LISTED = ["0.5.17", "0.5.18", "0.5.21", "0.5.22", "0.5.23"]


def _cache(tmp: Path, *versions: str) -> Path:
    """A wheel cache holding complete trees of ``versions`` (what `wheels.cached_tree` accepts)."""
    for v in versions:
        (tmp / v / "sglang").mkdir(parents=True)
        (tmp / v / "deferlab-source.json").write_text("{}")
    return tmp


def test_an_unlisted_release_is_refused_naming_the_nearest_and_the_newest(tmp_path: Path) -> None:
    calls = []

    def index(minimum: str, engine: str) -> list[str]:
        calls.append(engine)
        return LISTED

    with pytest.raises(UsageError) as info:
        refuse_unlisted({"sglang": ["0.5.21", "0.5.24"]}, index=index, cache=_cache(tmp_path, "0.5.21"))
    assert str(info.value) == (
        "'0.5.24': the package index has no sglang==0.5.24 (nearest: 0.5.23; newest: 0.5.21, 0.5.22, 0.5.23; "
        "5 listed); accepted: sglang releases 0.5.17 and later on the index"
    )
    assert calls == ["sglang"]


def test_cached_releases_ask_nothing_and_an_unreachable_index_refuses_nothing(tmp_path: Path) -> None:
    def never(minimum: str, engine: str) -> list[str]:
        raise AssertionError("the index was asked although every release is cached")

    refuse_unlisted({"sglang": ["0.5.21", "0.5.23"]}, index=never, cache=_cache(tmp_path, "0.5.21", "0.5.23"))
    refuse_unlisted({"sglang": None}, index=never, cache=tmp_path)  # every release of the index: nothing named

    def offline(minimum: str, engine: str) -> list[str]:
        raise RuntimeError("cannot list sglang releases on the package index")

    refuse_unlisted({"sglang": ["0.5.99"]}, index=offline, cache=tmp_path)  # each release then says why itself


def test_a_listed_but_uncached_release_passes(tmp_path: Path) -> None:
    refuse_unlisted({"sglang": ["0.5.22"]}, index=lambda minimum, engine: LISTED, cache=tmp_path)
