"""One release listing and one version-range rule (issue 29, item 4).

Why a test of its own: the engines' releases (``versions``) and the companions' (the loader) were two parsings of
``pip index versions``, and the range checks of an engine's family path (`engines.Served.covers`) and of a
claims.toml expectation (`claims.EngineRange.covers`) were two rules; each must now agree with the one it stands
for, above all on a spec that is not a release (a checkout, ``installed``).
"""

from __future__ import annotations

from typing import Any

import pytest

from deferlab.impl.loader import wheels
from deferlab.reference.system.claims import EngineRange
from deferlab.reference.system.engines import Served
from deferlab.reference.system.releases import at_least, in_range, is_release
from deferlab.reports.versions import matrix

SPECS = ("0.5.16", "0.5.17", "0.5.17.post1", "0.5.20", "0.5.23", "0.6.0", "installed", "/src/sglang", "main")
RANGES = (("0.5.17", "0.5.23"), ("0.5.17", ""), ("0.5.20", "0.5.20"))


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize(("low", "high"), RANGES)
def test_every_range_check_is_the_one_rule(spec: str, low: str, high: str) -> None:
    rule = in_range(spec, low, high)
    assert Served("sglang", low, high, "served", True, ()).covers("sglang", spec) == rule
    if high:  # claims.toml's rows are closed ranges (`parse_engine_key`)
        assert EngineRange(f"sglang {low}-{high}", "sglang", low, high, "holds").covers("sglang", spec) == rule
    assert at_least(spec, low) == (is_release(spec) and in_range(spec, low))  # a release in the open range


@pytest.mark.parametrize("spec", ("installed", "/src/sglang", "main"))
def test_a_spec_that_is_not_a_release_is_in_open_ranges_only(spec: str) -> None:
    """A checkout is taken to be at least the newest release by every caller: an open-ended path serves it, a
    closed claims.toml range never documents it, and it is never a release the listing keeps."""
    assert Served("sglang", "0.5.17", "", "served", True, ()).covers("sglang", spec)
    assert not Served("sglang", "0.5.17", "0.5.23", "served", True, ()).covers("sglang", spec)
    assert not EngineRange("sglang 0.5.17-0.5.23", "sglang", "0.5.17", "0.5.23", "fails").covers("sglang", spec)
    assert not at_least(spec, "0.5.17")


def _pip(listing: str, rc: int | None = 0, err: str = "") -> tuple[list[list[str]], Any]:
    seen: list[list[str]] = []

    def capture(cmd: list[str], **kw: Any) -> tuple[int | None, str, str]:
        seen.append(list(cmd))
        return rc, listing, err

    return seen, capture


def test_the_engines_and_the_loaders_listing_are_one_pip_call() -> None:
    """``versions``' listing of SGLang and the loader's listing of a distribution run the same command and read
    the same answer; ``versions`` keeps the releases from the first checked one, in release order (a name that
    is no release, which no index lists but a mirror might, is dropped)."""
    listing = "sglang (0.5.23)\nAvailable versions: 0.5.23, main, 0.5.18, 0.5.17.post1, 0.5.17, 0.5.16\n"
    seen_engine, capture = _pip(listing)
    assert matrix.index_versions(capture=capture) == ["0.5.17", "0.5.17.post1", "0.5.18", "0.5.23"]
    seen_loader, capture = _pip(listing)
    assert wheels.index_versions("sglang", capture=capture) == ["0.5.23", "main", "0.5.18", "0.5.17.post1", "0.5.17",
                                                                 "0.5.16"]  # fmt: skip
    assert seen_engine == seen_loader and len(seen_engine) == 1


def test_an_unreadable_index_is_refused_by_both_in_their_own_words() -> None:
    _, capture = _pip("", rc=1, err="ERROR: No matching distribution found for sglang\n")
    with pytest.raises(wheels.IndexUnreadable, match=r"^pip index versions sglang: ERROR: No matching"):
        wheels.index_versions("sglang", capture=capture)
    with pytest.raises(RuntimeError, match=r"^cannot list sglang releases on the package index \(ERROR: No matching"):
        matrix.index_versions(capture=capture)
    _, timed_out = _pip("", rc=None)
    with pytest.raises(wheels.IndexUnreadable, match="timed out after 300 s"):
        wheels.index_versions("vllm", capture=timed_out)
