"""`strategies.byte_tie_sizes` keeps its scan on disk: the cached answer is the scan's, and a damaged file rescans.

Why: the scan of every size up to 8192 x 8192 costs about 13 s in every
process that draws sizes (each xdist worker, each release's claim run); a
cache that could answer differently from the scan would change what the
searches draw, so it is checked against the scan itself here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deferlab.properties import strategies
from deferlab.reference.system.profiles import profile


def test_the_cached_ties_are_the_scans_and_a_damaged_cache_is_rescanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path))
    cfg = profile("sglang-gate-test-l1")  # in_patch_limit 1: ties from a few hundred pixels on
    strategies.byte_tie_sizes.cache_clear()
    scanned = strategies._scan_byte_ties(cfg, 3, 300)
    assert scanned, "no tie up to 300 px: pick a config with ties"
    first = strategies.byte_tie_sizes(cfg, 3, 300)
    (cache,) = (tmp_path / "strategies").iterdir()
    strategies.byte_tie_sizes.cache_clear()
    assert first == scanned and strategies.byte_tie_sizes(cfg, 3, 300) == scanned  # the second from the file
    cache.write_text("[[1, 2], [3]")  # cut short
    strategies.byte_tie_sizes.cache_clear()
    assert strategies.byte_tie_sizes(cfg, 3, 300) == scanned
    strategies.byte_tie_sizes.cache_clear()
