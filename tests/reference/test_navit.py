"""NaViT resize decision: hand-computed vectors, SGLang's own cases, vector == scalar."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deferlab.reference.oracle.navit import resize_config, resize_config_arrays
from deferlab.reference.system.profiles import profile
from tests.worked import worked_k3

K3 = profile("kimi-k3")
K25 = profile("kimi-k2.5")

# (w, h) -> (new_w, new_h, pad_w, pad_h, grid, tokens), computed by hand: the table in semantics §3.2.
K3_CASES = list(worked_k3().items())


@pytest.mark.parametrize(("size", "expected"), K3_CASES, ids=[f"{w}x{h}" for (w, h), _ in K3_CASES])
def test_kimi_k3_hand_vectors(size, expected):
    rc = resize_config(*size, K3)
    assert (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height, rc.grid_thw, rc.num_tokens) == expected


def test_kimi_k25_4000x3000():
    rc = resize_config(4000, 3000, K25)
    assert (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height, rc.num_tokens) == (2073, 1554, 27, 14, 4200)


def test_fixed_output_tokens_changes_only_the_token_count():
    rc = resize_config(1024, 1024, K3.with_(fixed_output_tokens=64))
    assert rc.num_tokens == 64 and rc.grid_thw == (1, 74, 74)


@pytest.mark.parametrize(("size", "grid"), [((8, 6), (1, 4, 4)), ((5, 9), (1, 6, 4))])
def test_sglang_epd_test_grids(size, grid):
    assert resize_config(*size, profile("sglang-epd-test")).grid_thw == grid


def test_sglang_gate_case_two_geometry():
    # (3, 1024, 1024) with in_patch_limit 1: scale 1/73 -> 14x14, pad 14 -> 28x28 (semantics §4.2)
    rc = resize_config(1024, 1024, profile("sglang-gate-test-l1"))
    assert (rc.new_width, rc.new_height, rc.padded_width, rc.padded_height) == (14, 14, 28, 28)


@given(
    st.integers(1, 8192),
    st.integers(1, 8192),
    st.sampled_from(["kimi-k3", "kimi-k2.5", "sglang-unit-4096", "sglang-epd-test", "sglang-gate-test-l1"]),
)
def test_vectorized_equals_scalar(w, h, name):
    """For any size and profile, the column form is bit-identical to the scalar form."""
    cfg = profile(name)
    rc = resize_config(w, h, cfg)
    arr = resize_config_arrays(np.array([w]), np.array([h]), cfg)
    got = tuple(int(getattr(arr, f)[0]) for f in ("new_width", "new_height", "pad_width", "pad_height", "num_tokens"))
    assert got == (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height, rc.num_tokens)


@given(st.integers(1, 8192), st.integers(1, 8192))
def test_never_upscales_and_pads_to_factor(w, h):
    """new sizes never exceed the source; padded sides are multiples of merge*patch."""
    rc = resize_config(w, h, K3)
    assert 1 <= rc.new_width <= w and 1 <= rc.new_height <= h
    assert rc.padded_width % K3.factor == 0 and rc.padded_height % K3.factor == 0
    assert 0 <= rc.pad_width < K3.factor and 0 <= rc.pad_height < K3.factor


def test_vectorized_dense_grid_matches_scalar_on_a_sample():
    w, h = np.meshgrid(np.arange(1, 600, 7), np.arange(1, 600, 11))
    arr = resize_config_arrays(w, h, profile("sglang-unit-4096"))
    cfg = profile("sglang-unit-4096")
    for i in range(0, w.size, 97):
        rc = resize_config(int(w.flat[i]), int(h.flat[i]), cfg)
        assert int(arr.num_tokens.flat[i]) == rc.num_tokens and int(arr.new_width.flat[i]) == rc.new_width
