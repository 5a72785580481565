"""The workload-level gate (sim.gate) against semantics §4 evaluated request by request with scalar reference code."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.properties.strategies.sim import workloads
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.system.profiles import profile
from deferlab.sim.gate import decide
from deferlab.sim.workload import Workload

CONFIGS = ["kimi-k3", "kimi-k2.5", "sglang-unit-4096", "sglang-gate-test-l1"]


def _spec4_request(images: list[tuple[int, int, int]], cfg) -> bool:
    """semantics §4 by hand: sum C*W*H against sum 3*Hp*Wp*4 over the request; ties defer."""
    raw = processed = 0
    for w, h, c in images:
        rc = resize_config(w, h, cfg)
        raw += c * w * h
        processed += 3 * rc.padded_width * rc.padded_height * 4
    return raw <= processed


@given(wl=workloads(max_requests=5, max_images=4), name=st.sampled_from(CONFIGS))
@example(
    wl=Workload.from_requests([[(7169, 7169, 3)], [(7170, 7170, 3)], [(4000, 4000, 3), (32, 32, 3)]]), name="kimi-k3"
)
def test_request_gate_matches_spec4(wl: Workload, name: str) -> None:
    """``pr`` mode: every image of a request gets the request's semantics §4 decision; ``per-image`` each its own."""
    cfg = profile(name)
    pr = decide(wl.width, wl.height, wl.channels, wl.offsets, cfg, "pr")
    per = decide(wl.width, wl.height, wl.channels, wl.offsets, cfg, "per-image")
    for r in range(wl.n_requests):
        a, b = wl.offsets[r], wl.offsets[r + 1]
        imgs = list(zip(wl.width[a:b].tolist(), wl.height[a:b].tolist(), wl.channels[a:b].tolist(), strict=True))
        assert (pr[a:b] == _spec4_request(imgs, cfg)).all()
        assert per[a:b].tolist() == [_spec4_request([img], cfg) for img in imgs]


def test_always_and_never() -> None:
    wl = Workload.from_requests([[(10, 10, 3), (20000, 20000, 4)]])
    cfg = profile("kimi-k3")
    assert decide(wl.width, wl.height, wl.channels, wl.offsets, cfg, "always").all()
    assert not decide(wl.width, wl.height, wl.channels, wl.offsets, cfg, "never").any()
    with pytest.raises(ValueError, match="gate mode must be one of"):
        decide(wl.width, wl.height, wl.channels, wl.offsets, cfg, "sometimes")
    assert decide(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.array([0]), cfg).size == 0
