"""`reference.oracle.skew`: served values decompose exactly into level differences and normalization ulps."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deferlab.properties import strategies as s
from deferlab.reference.oracle import skew
from deferlab.reference.oracle.normalize import normalize_checkpoint, normalize_eager, patchify

K3 = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))


def table(normalize, stats) -> np.ndarray:
    probe = skew.level_probe().transpose(2, 0, 1).astype(np.float32)
    return skew.table_from_probe(normalize(probe, *stats))


def test_the_probe_holds_every_level_once_per_channel():
    probe = skew.level_probe()
    assert probe.shape == (16, 16, 3) and probe.dtype == np.uint8
    for c in range(3):
        assert sorted(probe[:, :, c].ravel().tolist()) == list(range(256))


@given(stats=s.normalization_stats())
@example(stats=K3)
def test_levels_are_recovered_exactly_from_either_normalization(stats):
    """The nearest table value is the level (§16.5): the checkpoint's and the eager form's tables alike."""
    levels = np.random.default_rng(0).integers(0, 256, (3, 9, 7)).astype(np.float32)
    for normalize in (normalize_checkpoint, normalize_eager):
        values = normalize(levels, *stats)
        got = skew.recover_levels(values, table(normalize, stats))
        assert np.array_equal(got, levels.astype(np.uint8))


@given(h=st.integers(1, 4), w=st.integers(1, 4), p=st.sampled_from([1, 2, 14]))
def test_unpatchify_inverts_patchify(h, w, p):
    img = np.random.default_rng(h * 7 + w).random((3, h * p, w * p)).astype(np.float32)
    back = skew.unpatchify(patchify(img, p), [1, h, w], p)
    assert np.array_equal(back, img)


def test_split_images_follows_the_grids_and_refuses_a_mismatch():
    a, b = np.ones((3, 4, 2), np.float32), np.zeros((3, 2, 6), np.float32)
    pv = np.concatenate([patchify(a, 2), patchify(b, 2)])
    out = skew.split_images(pv, np.array([[1, 2, 1], [1, 1, 3]]), 2)
    assert [o.shape for o in out] == [a.shape, b.shape] and np.array_equal(out[0], a)
    try:
        skew.split_images(pv[:-1], np.array([[1, 2, 1], [1, 1, 3]]), 2)
    except ValueError as e:
        assert "patches" in str(e)
    else:
        raise AssertionError("a short patch array was accepted")


def test_ulp_distance_counts_float32_steps():
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2.0))
    assert skew.ulp_distance(
        np.array([one, up, -one]), np.array([up, one, -np.nextafter(one, np.float32(2))])
    ).tolist() == [1, 1, 1]
    assert skew.ulp_distance(np.float32([0.0]), np.float32([-0.0])).tolist() == [1]


def test_compare_image_separates_levels_from_ulps():
    """A served image one level off at one pixel and normalized in the eager form: the level difference is 1
    there and the ulps are the eager form's distance from the checkpoint's, nowhere else."""
    levels = np.full((3, 4, 4), 100, np.float32)
    served_levels = levels.copy()
    served_levels[1, 2, 3] = 101
    mean_std = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
    served = normalize_eager(served_levels, *mean_std)
    trained = normalize_checkpoint(levels, *mean_std)
    result, diff = skew.compare_image(
        served, trained, table(normalize_eager, mean_std), table(normalize_checkpoint, mean_std)
    )
    assert diff.max() == 1 and int((diff > 0).sum()) == 1 and diff[1, 2, 3] == 1
    expected_ulps = skew.ulp_distance(served, normalize_checkpoint(served_levels, *mean_std)).max()
    assert result.max_levels == 1 and result.max_ulps == expected_ulps
    assert result.grids_equal and result.elements == 48
    assert result.bitwise_equal == int((served.view(np.uint32) == trained.view(np.uint32)).sum())


def _by_definition(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """`skew.nearest_level` (the definition) on every element, channel by channel: what the shortcuts must give."""
    x, t = np.asarray(values, dtype=np.float64), np.asarray(table, dtype=np.float64)
    out = np.empty(x.shape, dtype=np.uint8)
    for c in range(3):
        order = np.argsort(t[c], kind="stable")
        out[c] = skew.nearest_level(x[c], t[c][order], order)
    return out


SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, -1e30]


@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(
        ["entries", "entries and others", "near entries", "bfloat16", "bfloat16 with specials", "float32", "24 bits"]
    ),
    duplicates=st.integers(0, 40),
)
@example(seed=0, kind="bfloat16 with specials", duplicates=40)
@example(seed=1, kind="entries", duplicates=255)
@example(seed=2, kind="near entries", duplicates=0)
@example(seed=3, kind="24 bits", duplicates=0)
@settings(max_examples=30)  # each example is 196,608 values recovered twice; the kinds and the pins carry it
def test_the_shortcuts_give_the_definitions_level_for_every_element(seed, kind, duplicates):
    """`recover_levels`' shortcuts (a table entry's own level; a bfloat16 array's 65,536-value table) equal the
    definition element by element: ties, duplicate table values, +-0, NaN, infinities and values past the ends."""
    rng = np.random.default_rng(seed)
    table = ((np.arange(256) / 255 - rng.uniform(0.3, 0.7, (3, 1))) / rng.uniform(0.2, 0.3, (3, 1))).astype(np.float32)
    if duplicates:
        table[:, 1 : 1 + duplicates] = table[:, :1]  # a table with repeated values (a coarse BF16 path's)
    n = 1 << 16  # the bfloat16 shortcut's threshold on every channel
    levels = rng.integers(0, 256, n)
    values = np.stack([table[c][levels] for c in range(3)]).astype(np.float32)
    if kind == "near entries":  # a float32 ulp or a few off each entry, either side: none is an entry
        away = np.where(rng.random(values.shape) < 0.5, np.float32(-np.inf), np.float32(np.inf)).astype(np.float32)
        values = np.nextafter(values, away)
    elif kind != "entries":
        values = values + rng.normal(0.0, 0.01, values.shape).astype(np.float32)
    if kind == "entries and others":
        values[:, ::2] = np.stack([table[c][levels[::2]] for c in range(3)])
    if kind.startswith("bfloat16"):
        values = (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    if kind == "24 bits":  # float32 with the low 8 bits zero: not bfloat16, whose shortcut must not take it
        values = (values.view(np.uint32) & np.uint32(0xFFFFFF00)).view(np.float32)
    if kind.endswith("specials"):
        values[:, : len(SPECIAL)] = (np.asarray(SPECIAL, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    if kind == "float32":
        values[0, 0] = np.float32((table[0, 10].astype(np.float64) + table[0, 11]) / 2)  # a tie, as near as float32
        values[:, 1 : 1 + len(SPECIAL)] = np.asarray(SPECIAL, np.float32)
    shaped = values.reshape(3, 1, 1 << 16)
    assert np.array_equal(skew.recover_levels(shaped, table), _by_definition(shaped, table))
    small = values[:, :999].reshape(3, 27, 37)  # under the threshold: the direct path
    assert np.array_equal(skew.recover_levels(small, table), _by_definition(small, table))


def test_the_bfloat16_shortcut_is_taken_and_agrees_with_the_definition():
    """A bfloat16 array takes the 16-bit table (so the test above checks the shortcut, not only the direct path),
    and an array with one float32 value past bfloat16 does not."""
    values = np.linspace(-3, 3, 3 << 16, dtype=np.float32)
    widened = (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    assert skew._bfloat16_keys(widened) is not None and skew._bfloat16_keys(values) is None
    assert skew._bfloat16_keys(widened[:100]) is None  # small: the direct path
