"""The report's sweep counters: hand-computed tiny cases and brute-force agreement on generated configs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.reference.oracle import gate as oracle_gate
from deferlab.reference.oracle.navit import resize_config, resize_config_arrays
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reports.report.sweeps import collect
from deferlab.reports.report.sweeps import compute as sweeps

# patch 1, merge 1, in_patch_limit 4: every image is shrunk to about 4 patches, so the byte rule is easy by hand.
TINY = PreprocessConfig(patch_size=1, merge_kernel_size=1, in_patch_limit=4, patch_limit_on_one_side=100)


def test_tiny_grid_by_hand() -> None:
    """On 1..5 x 1..5 RGB under TINY: 18 sizes defer, 3 ties ((4,2),(2,4),(4,4)), 5 flips each way."""
    # Worked by hand from semantics §3.2/§4: (4,4): s1 = sqrt(4/16) = 0.5 -> 2x2, processed 12*4 = 48 = raw 3*16 (tie, defers);
    # (4,3): s1 = sqrt(4/12) -> 2x1, processed 24 < raw 36 (eager); (5,5): 2x2, 48 < 75 (eager).
    scan = sweeps.scan_decisions(TINY, 3, max_side=5)
    assert scan.counters() == {"sizes": 25, "deferring": 18, "ties": 3, "flips_width": 5, "flips_height": 5}
    raw, processed, defer = sweeps.decision_grid(TINY, 3, np.arange(1, 6), np.arange(1, 6))
    assert (raw[3, 3], processed[3, 3], bool(defer[3, 3])) == (48, 48, True)
    assert (raw[2, 3], processed[2, 3], bool(defer[2, 3])) == (36, 24, False)
    assert not defer[4, 4]


def test_strict_gate_changes_the_deferring_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate with `<` instead of `<=` loses exactly the 3 tie sizes of the hand case."""

    def strict(w, h, c, cfg):
        raw, processed, _ = oracle_gate.decide_arrays(w, h, c, cfg)
        return raw, processed, raw < processed

    monkeypatch.setattr(sweeps, "decide_arrays", strict)
    assert sweeps.scan_decisions(TINY, 3, max_side=5).counters()["deferring"] == 15


def test_aspect_ray_flips_by_hand() -> None:
    """The 1:1 ray of TINY defers for 1..4 and not at 5: one flip, at width 5."""
    [ray] = sweeps.ray_flips(TINY, 3, max_side=5, aspects={"1:1": 1.0})
    assert (ray["steps"], ray["flips"], ray["first_flip_widths"], ray["deferring"]) == (4, 1, [5], 4)


def test_aggregation_by_hand() -> None:
    """(4,3) and (5,5) RGB alone are eager; with a 2x2 companion (12 <= 48) the request defers and ships them raw."""
    differs, cost = sweeps.aggregation_grid(TINY, (2, 2, 3), 3, np.array([4]), np.array([3]))
    assert bool(differs[0, 0]) and int(cost[0, 0]) == (36 + 12) - (24 + 12)
    differs, cost = sweeps.aggregation_grid(TINY, (2, 2, 3), 3, np.array([5]), np.array([5]))
    assert bool(differs[0, 0]) and int(cost[0, 0]) == (75 + 12) - (48 + 12)  # 87 <= 96: the 5x5 rides along raw
    differs, cost = sweeps.aggregation_grid(TINY, (2, 2, 3), 3, np.array([1]), np.array([1]))
    assert not differs[0, 0] and int(cost[0, 0]) == 0  # both defer alone and together


def _brute_force(cfg: PreprocessConfig, channels: int, n: int) -> dict[str, int]:
    d = {}
    ties = 0
    for w in range(1, n + 1):
        for h in range(1, n + 1):
            rc = resize_config(w, h, cfg)
            raw, processed = channels * w * h, 12 * rc.padded_width * rc.padded_height
            d[w, h] = raw <= processed
            ties += raw == processed
    fw = sum(d[w, h] != d[w + 1, h] for w in range(1, n) for h in range(1, n + 1))
    fh = sum(d[w, h] != d[w, h + 1] for w in range(1, n + 1) for h in range(1, n))
    return {"sizes": n * n, "deferring": sum(d.values()), "ties": ties, "flips_width": fw, "flips_height": fh}


configs = st.builds(
    PreprocessConfig,
    patch_size=st.integers(1, 3),
    merge_kernel_size=st.integers(1, 2),
    in_patch_limit=st.integers(1, 40),
    patch_limit_on_one_side=st.integers(1, 12),
)


@given(cfg=configs, channels=st.sampled_from([3, 4]), n=st.integers(2, 14), chunk=st.integers(1, 6))
@example(cfg=TINY, channels=3, n=5, chunk=2)
def test_scan_matches_brute_force(cfg: PreprocessConfig, channels: int, n: int, chunk: int) -> None:
    """The chunked vectorized scan counts exactly what a per-size loop over semantics §3.2/§4 counts, for any chunk size."""
    assert sweeps.scan_decisions(cfg, channels, max_side=n, chunk_rows=chunk).counters() == _brute_force(
        cfg, channels, n
    )


@given(cfg=configs, n=st.integers(2, 14), chunk=st.integers(1, 6))
def test_area_histogram_accounts_for_every_width_step(cfg: PreprocessConfig, n: int, chunk: int) -> None:
    """Flip density bins hold every one-pixel width step and every width flip exactly once."""
    scan = sweeps.scan_decisions(cfg, 3, max_side=n, chunk_rows=chunk)
    assert int(scan.area_steps.sum()) == n * (n - 1)
    assert int(scan.area_flips.sum()) == scan.flips_width


@given(cfg=configs, seed=st.integers(0, 2**16))
@example(  # a tie image (raw == processed) can be overridden at zero cost: disagreement does not imply extra bytes
    cfg=PreprocessConfig(patch_size=3, merge_kernel_size=1, in_patch_limit=29, patch_limit_on_one_side=6), seed=3214
)
def test_random_requests_invariants(cfg: PreprocessConfig, seed: int) -> None:
    """Per-request payload is never below per-image payload; single-image requests never disagree; seeded = repeatable."""
    a = sweeps.random_requests(cfg, n_requests=200, max_images=4, seed=seed, max_side=300)
    assert a == sweeps.random_requests(cfg, n_requests=200, max_images=4, seed=seed, max_side=300)
    assert a["payload_per_request_bytes"] >= a["payload_per_image_bytes"]
    if a["disagreeing_images"] == 0:
        assert a["payload_per_request_bytes"] == a["payload_per_image_bytes"]
    single = sweeps.random_requests(cfg, n_requests=200, max_images=1, seed=seed, max_side=300)
    assert single["disagreeing_images"] == 0 and single["mixed_requests"] == 0


def test_sides_bad_arguments() -> None:
    """sides() refuses a non-positive max_side or step, naming both."""
    with pytest.raises(ValueError, match="max_side"):
        sweeps.sides(0, 1)
    with pytest.raises(ValueError, match="step"):
        sweeps.sides(10, 0)
    assert sweeps.sides(10, 4).tolist() == [1, 5, 9, 10]


@given(
    cfg=configs,
    w=st.lists(st.integers(1, 5000), min_size=1, max_size=20),
    h=st.integers(1, 5000),
    c=st.sampled_from([1, 3, 4]),
)
def test_the_sweeps_decide_by_the_byte_rule(cfg: PreprocessConfig, w: list[int], h: int, c: int) -> None:
    """The sweeps' gate is semantics §4's byte rule, recomputed here from the NaViT sizes: raw = C*W*H, processed = 3*Pw*Ph*4."""
    ws = np.array(w, dtype=np.int64)
    hs = np.full(len(w), h, dtype=np.int64)
    cs = np.full(len(w), c, dtype=np.int64)
    r = resize_config_arrays(ws, hs, cfg)
    raw, processed = cs * ws * hs, 3 * 4 * r.padded_width * r.padded_height
    for ours, expected in zip(sweeps.decide_arrays(ws, hs, cs, cfg), (raw, processed, raw <= processed), strict=True):
        assert ours.dtype == expected.dtype and np.array_equal(ours, expected)


def test_the_sweeps_call_the_oracle_and_name_it() -> None:
    """No local copy of the rule: the attribute is the oracle's function, and every record names it (report.json)."""
    assert sweeps.decide_arrays is oracle_gate.decide_arrays
    assert sweeps.DECISION_SOURCE == "deferlab.reference.oracle.gate.decide_arrays"
    records = collect.collect_sweeps(TINY, limits=(4,), max_side=5)
    assert records and {r["decision_source"] for r in records} == {sweeps.DECISION_SOURCE}


def test_token_counts_by_hand() -> None:
    """patch 2, merge 2, in_patch_limit 4: a 5x5 image is not shrunk (2x2 patches) but pads to 8x8 = 16 patches."""
    cfg = PreprocessConfig(patch_size=2, merge_kernel_size=2, in_patch_limit=4, patch_limit_on_one_side=100)
    counts = sweeps.token_counts(cfg, max_side=5)
    assert counts["max_tokens"] == 4  # (8 / 4) * (8 / 4)
    rc = resize_config(5, 5, cfg)
    assert (rc.padded_width, rc.padded_height, rc.num_patches) == (8, 8, 16)
    assert counts["sizes_over_limit"] >= 1


@given(cfg=configs, n=st.integers(1, 14), chunk=st.integers(1, 6))
def test_token_counts_match_brute_force(cfg: PreprocessConfig, n: int, chunk: int) -> None:
    """Max tokens and the over-limit count equal a per-size loop over resize_config."""
    rcs = [resize_config(w, h, cfg) for h in range(1, n + 1) for w in range(1, n + 1)]
    got = sweeps.token_counts(cfg, max_side=n, chunk_rows=chunk)
    assert got["max_tokens"] == max(rc.num_tokens for rc in rcs)
    assert got["sizes_over_limit"] == sum(rc.num_patches > cfg.in_patch_limit for rc in rcs)
    best = resize_config(got["max_tokens_width"], got["max_tokens_height"], cfg)
    assert best.num_tokens == got["max_tokens"]
