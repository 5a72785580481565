"""`reference.oracle.skew`: served values decompose exactly into level differences and normalization ulps."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
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
