"""`properties.families`: C14's comparison names the first unexplained value in C order, and each side's level
table is read once per side and config."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.properties import families


def _table() -> np.ndarray:
    return np.stack([(np.arange(256) / 255 - m) / 0.25 for m in (0.4, 0.5, 0.6)]).astype(np.float32)


@given(seed=st.integers(0, 2**32 - 1), share=st.sampled_from([0.0, 0.001, 0.3, 1.0]))
@example(seed=0, share=1.0)
@example(seed=1, share=0.001)
def test_the_first_unexplained_value_is_the_first_in_c_order(seed, share):
    """The report's first unexplained value is ``np.argwhere(bad)[0]``'s (the definition), found without listing
    them all; counts as the definition's."""
    rng = np.random.default_rng(seed)
    table = _table()
    levels = rng.integers(0, 256, (3, 3, 40))
    want = np.stack([table[c][levels[:, c]] for c in range(3)], axis=1)
    moved = np.clip(levels + np.where(rng.random(levels.shape) < share, 5, 0), 0, 255)  # 5 levels: unexplained
    served = np.stack([table[c][moved[:, c]] for c in range(3)], axis=1)
    report = families.compare(served, table, want, table, "float32")
    bad = np.argwhere(np.abs(moved - levels) > 1)  # one level off is explained (the clip at 255 moves less)
    assert report.unexplained == len(bad)
    if len(bad):
        n, c, i = bad[0]
        assert report.first.startswith(f"patch {n} channel {c} element {i}:"), report.first
    else:
        assert report.first == "none"


def test_a_level_table_is_read_once_per_side_and_config():
    class Side:
        def __init__(self) -> None:
            self.reads = 0

        def levels(self, cfg):
            self.reads += 1
            return np.full((3, 256), float(self.reads), np.float32)

    a, b = Side(), Side()
    first = families.levels_of(a, "cfg-1")
    assert families.levels_of(a, "cfg-1") is first and a.reads == 1
    families.levels_of(a, "cfg-2")
    families.levels_of(b, "cfg-1")
    assert (a.reads, b.reads) == (2, 1)
    families.levels_of(a, ["unhashable"])  # a config that cannot key the cache: read every time
    families.levels_of(a, ["unhashable"])
    assert a.reads == 4
