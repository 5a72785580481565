"""`reference.oracle.step3_vl`: Step3-VL's windowing rule as semantics §18.9 restates it.

What is checked against what: the oracle at sizes worked by hand from §18.9's rule (each branch: no window, the
short side, 504, ``min(short, 504)``, the square pad, the 3024 cap, the 0.2 snap either way); the two readings'
difference over every size up to 4096 per side against §18.9's count written before the code ran (1,155, first
728 x 1); an array and its elements one by one agree; bad input refused in one line. SGLang's own functions are
checked against it in ``tests/impl/sglang/test_step3_vl_geometry.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from deferlab.reference.oracle import step3_vl as oracle

KEYS = ("width", "height", "window", "crop_width", "crop_height", "cols", "rows", "breaks", "tokens")
# (width, height) -> the values of KEYS, by hand from semantics §18.9's rule
WORKED = {
    (600, 600): (600, 600, 0, 0, 0, 0, 0, 0, 171),  # long side within 728, ratio 1: no window
    (728, 400): (728, 400, 400, 800, 400, 2, 1, 0, 337),  # ratio 1.82: the short side; 728/400 snaps up
    (729, 400): (729, 400, 504, 1008, 400, 2, 1, 0, 337),  # past 728: 504, the short side under it kept
    (1920, 1080): (1920, 1080, 504, 2016, 1008, 4, 2, 1, 836),  # 1080/504 = 2.14: the fraction 0.14 snaps down
    # ratio 5.2: min(500, 504); the fraction 2600/500 - 5 is 0.20000000000000018 in float64, over 0.2: one more
    # window (an integer test, 2600 % 500 > 0.2 * 500, would not snap up)
    (2600, 500): (2600, 500, 500, 3000, 500, 6, 1, 0, 669),
    (4000, 3000): (3024, 2268, 504, 3024, 2520, 6, 5, 4, 2665),  # the cap: int(3000 * 0.756) = 2268
    (10, 50): (50, 50, 0, 0, 0, 0, 0, 0, 171),  # short side under 32, ratio 5: squared, then no window
    (100, 600): (100, 600, 100, 100, 600, 1, 6, 5, 674),
}


@pytest.mark.parametrize("size", list(WORKED), ids=[f"{w}x{h}" for w, h in WORKED])
def test_the_worked_sizes(size):
    g = oracle.geometry(*size)
    assert tuple(int(g[k]) for k in KEYS) == WORKED[size]


def test_the_readings_differ_only_at_728_as_semantics_18_9_counts():
    """Every size up to 4096 x 4096, in the sweep's order (height, then width): 1,155 differ, first 728 x 1."""
    count, first, edge_only = 0, None, True
    w = np.arange(1, 4097, dtype=np.int64)
    for start in range(1, 4097, 512):
        hs, ws = np.meshgrid(np.arange(start, start + 512, dtype=np.int64), w, indexing="ij")
        a, b = oracle.geometry(ws, hs, "<="), oracle.geometry(ws, hs, "<")
        differ = np.zeros(ws.shape, dtype=bool)
        for key in KEYS:
            differ |= a[key] != b[key]
        edge_only &= bool((np.maximum(a["width"], a["height"])[differ] == 728).all())
        count += int(differ.sum())
        if first is None and differ.any():
            i, j = np.argwhere(differ)[0]
            first = (int(ws[i, j]), int(hs[i, j]))
    assert (count, first, edge_only) == (1155, (728, 1), True)


def test_an_array_is_its_elements_one_by_one():
    rng = np.random.default_rng(29)
    ws, hs = rng.integers(1, 5000, 300), rng.integers(1, 5000, 300)
    ws[:20], hs[:20] = 728, rng.integers(1, 728, 20)  # the boundary's sizes among them
    whole = oracle.geometry(ws, hs, "<")
    for i in range(len(ws)):
        one = oracle.geometry(int(ws[i]), int(hs[i]), "<")
        assert all(int(one[k]) == int(whole[k][i]) for k in KEYS)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 5), "width must be positive integers"),
        ((5, 2.5), "height must be positive integers"),
        ((5, 5, "<<"), "boundary must be one of ['<', '<=']"),
    ],
)
def test_bad_input_is_refused_in_one_line(args, message):
    with pytest.raises(ValueError, match=None) as e:
        oracle.geometry(*args)
    assert message in str(e.value) and "\n" not in str(e.value)
