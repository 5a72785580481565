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
    """``request`` mode: every image of a request gets the request's semantics §4 decision; ``artifact`` each its own."""
    cfg = profile(name)
    pr = decide(wl.width, wl.height, wl.channels, wl.offsets, cfg, "request")
    per = decide(wl.width, wl.height, wl.channels, wl.offsets, cfg, "artifact")
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


def test_the_default_mode_is_the_policys_default_call_site() -> None:
    """Every policy's default call site, by its name: ``artifact`` where it decides per image, else ``request``."""
    from deferlab.reference.system.policies import POLICIES
    from deferlab.sim.gate import GATE_MODES, default_mode

    for policy in POLICIES.values():
        name, per_image = policy.gate_path(None)
        assert default_mode(policy) == name and per_image == (name == "artifact"), policy.name
        assert name in GATE_MODES
    assert {default_mode(p) for p in POLICIES.values()} == {"request", "artifact"}


def test_the_rule_is_the_oracles(monkeypatch: pytest.MonkeyPatch) -> None:
    """sim.gate compares through reference.oracle.gate (no copy): a strict `<` there turns a request-sum tie eager."""
    import deferlab.sim.gate as sim_gate
    from deferlab.reference.system.config import PreprocessConfig

    tiny = PreprocessConfig(patch_size=1, merge_kernel_size=1, in_patch_limit=4, patch_limit_on_one_side=100)
    wl = Workload.from_requests([[(4, 4, 3)], [(4, 4, 3), (4, 4, 3)]])  # raw 48 == processed 48 per image: ties
    args = (wl.width, wl.height, wl.channels, wl.offsets, tiny)
    assert sim_gate.decide(*args, "request").all() and sim_gate.decide(*args, "artifact").all()
    monkeypatch.setattr(sim_gate, "defers", lambda raw, processed: raw < processed)
    assert not sim_gate.decide(*args, "request").any()
    assert sim_gate.GATE_SOURCE == "deferlab.reference.oracle.gate.decide_arrays"
