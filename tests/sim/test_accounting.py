"""Accounting identities of sim.accounting, derived from semantics §1, §4, §7 and semantics §15.2 / §15.5."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given

from deferlab.properties.strategies.sim import topologies, workloads
from deferlab.reference.system.policies import INTERIM_418975B, PR_33921, PRE_PR, RELEASED
from deferlab.reference.system.profiles import profile
from deferlab.sim.accounting import account
from deferlab.sim.costmodel import load_cost_model
from deferlab.sim.topology import Topology
from deferlab.sim.workload import Workload

CFG = profile("kimi-k3")
CM = load_cost_model()


def _per_request(wl: Workload, values: np.ndarray) -> np.ndarray:
    return np.bincount(wl.request_of, weights=values, minlength=wl.n_requests).astype(np.int64)


@given(wl=workloads(), topo=topologies())
def test_every_rank_of_the_group_receives_every_item(wl: Workload, topo: Topology) -> None:
    """CPU transport: each rank of a request's group deserializes the request's whole payload, no more, no less."""
    led = account(wl, topo, PR_33921, CFG, CM)
    req_payload = _per_request(wl, led.payload_bytes)
    assert (led.received_bytes == req_payload[:, None]).all()
    assert led.received_bytes.sum() == req_payload.sum() * topo.attn_tp_size


@given(wl=workloads(), topo=topologies())
@example(
    wl=Workload.from_requests([[(1536, 1024, 3)] * 4]),
    topo=Topology(tp_size=8, attn_dp_size=2, nodes=4),
)
def test_bytes_serialized_equal_bytes_deserialized_per_node(wl: Workload, topo: Topology) -> None:
    """Bytes in == bytes out: one serialization per node reached, one clone per rank on it, cross-node = remote ranks."""
    led = account(wl, topo, PR_33921, CFG, CM)
    req_payload = _per_request(wl, led.payload_bytes)
    for r in range(wl.n_requests):
        g = int(led.group[r])
        ranks = list(topo.group_ranks(g))
        nodes = {topo.node_of(x) for x in ranks}
        assert led.serialized_bytes[r] == req_payload[r] * len(nodes)
        assert led.cross_node_bytes[r] == req_payload[r] * sum(topo.node_of(x) != 0 for x in ranks)
        per_node_out = sum(req_payload[r] * sum(topo.node_of(x) == n for x in ranks) for n in nodes)
        assert led.received_bytes[r].sum() == per_node_out


@given(wl=workloads(min_images=1), topo=topologies())
def test_deferred_images_are_preprocessed_exactly_once_with_vision_dp(wl: Workload, topo: Topology) -> None:
    """Deferred + vision DP: one preprocessing run per image, on its owner only; the producer runs none."""
    led = account(wl, topo, PR_33921, CFG, CM, gate_mode="always")
    assert led.deferred.all()
    assert led.producer_preprocess_runs.sum() == 0
    runs_per_request = led.preprocess_runs.sum(axis=1)
    if topo.vision_world > 1:
        assert (runs_per_request == wl.images_per_request).all()
        for i, r in enumerate(wl.request_of):
            assert led.preprocess_runs[r, led.owner[i]] >= 1
    else:
        assert (runs_per_request == wl.images_per_request * topo.attn_tp_size).all()


@given(wl=workloads(min_images=1), topo=topologies())
def test_whitelist_limits_h2d_to_the_owner(wl: Workload, topo: Topology) -> None:
    """After the PR only the owner copies its items to the GPU; before it (no whitelist) every rank copies every item."""
    after = account(wl, topo, PR_33921, CFG, CM, gate_mode="always")
    before = account(wl, topo, PRE_PR, CFG, CM)
    g = topo.attn_tp_size
    if topo.vision_world > 1:
        assert after.h2d_copies.sum() == wl.n_images
        assert after.h2d_bytes.sum() == after.payload_bytes.sum()
    else:
        assert after.h2d_copies.sum() == wl.n_images * g
    assert before.h2d_copies.sum() == wl.n_images * g
    assert before.h2d_bytes.sum() == before.fp32_bytes.sum() * g
    assert not before.deferred.any()


@given(wl=workloads(min_images=1), topo=topologies())
def test_eager_preprocesses_once_in_the_producer(wl: Workload, topo: Topology) -> None:
    """Eager: the producer preprocesses each image once and ships FP32 3*Hp*Wp*4; ranks preprocess nothing."""
    led = account(wl, topo, PR_33921, CFG, CM, gate_mode="never")
    assert led.producer_preprocess_runs.sum() == wl.n_images
    assert led.preprocess_runs.sum() == 0
    assert (led.payload_bytes == led.fp32_bytes).all()
    assert led.producer_d2h_bytes.sum() == led.fp32_bytes.sum()


@given(wl=workloads(min_images=1), topo=topologies(transports=("cuda_ipc", "fabric")))
def test_ipc_transports_never_defer_and_only_readers_copy(wl: Workload, topo: Topology) -> None:
    """cuda_ipc / fabric: nothing defers, nothing is serialized, and only reconstructing ranks copy (semantics §4, §8)."""
    led = account(wl, topo, PR_33921, CFG, CM, gate_mode="always")
    assert not led.deferred.any()
    assert led.serialized_bytes.sum() == 0
    readers = 1 if topo.vision_world > 1 else topo.attn_tp_size
    assert led.received_bytes.sum() == led.fp32_bytes.sum() * readers
    assert led.h2d_bytes.sum() == 0
    g = topo.attn_tp_size
    for r in range(wl.n_requests):
        remote = [i for i in range(g) if topo.node_of(int(led.group[r]) * g + i) != 0]
        assert led.cross_node_bytes[r] == led.received_bytes[r, remote].sum()


@given(wl=workloads(min_images=1), topo=topologies(epd=True))
def test_epd_owner_only_came_with_418975b(wl: Workload, topo: Topology) -> None:
    """EPD: at the PR every encoder rank preprocesses every image; from 418975ba6 on, only the owner (semantics §15.3)."""
    pr = account(wl, topo, PR_33921, CFG, CM)
    later = account(wl, topo, INTERIM_418975B, CFG, CM)
    e = topo.epd_encoders
    assert pr.preprocess_runs.sum() == wl.n_images * e
    assert later.preprocess_runs.sum() == (wl.n_images if topo.vision_world > 1 else wl.n_images * e)
    assert pr.preprocess_on_cpu and not later.preprocess_on_cpu
    assert pr.summary()["redundant_h2d_bytes"] == later.summary()["redundant_h2d_bytes"] == 0
    if topo.vision_world > 1:
        assert pr.h2d_bytes.sum() == pr.fp32_bytes.sum()  # CPU-preprocessed patches go up, not raw pixels
        assert later.h2d_bytes.sum() == later.raw_bytes.sum()


@given(wl=workloads(min_images=1), topo=topologies())
def test_vit_patches_and_padding_are_conserved(wl: Workload, topo: Topology) -> None:
    """Owners' patches sum to the request's patches; padding = G * max rank tokens - tokens (0 for one image)."""
    led = account(wl, topo, RELEASED, CFG, CM)
    req_patches = _per_request(wl, led.patches)
    req_tokens = _per_request(wl, led.tokens)
    if topo.vision_world > 1:
        assert (led.vit_patches.sum(axis=1) == req_patches).all()
        g = topo.attn_tp_size
        expect = np.where(wl.images_per_request > 1, g * led.out_tokens.max(axis=1) - req_tokens, 0)
        assert (led.padding_tokens == expect).all()
        assert (led.padding_tokens >= 0).all()
    else:
        assert (led.padding_tokens == 0).all()


def test_payload_formulas_on_hand_cases() -> None:
    """semantics §4 / semantics §3.2 by hand: 32x32 RGB ships 3*32*32 raw vs 3*56*56*4 FP32; 1536x1024 pads to 1540x1036."""
    wl = Workload.from_requests([[(32, 32, 3)], [(1536, 1024, 3)], [(1536, 1024, 4)]])
    led = account(wl, Topology(tp_size=1), PR_33921, CFG, CM)
    assert led.raw_bytes.tolist() == [3 * 32 * 32, 3 * 1536 * 1024, 4 * 1536 * 1024]
    assert led.fp32_bytes.tolist() == [3 * 56 * 56 * 4, 3 * 1540 * 1036 * 4, 3 * 1540 * 1036 * 4]
    assert led.bf16_bytes.tolist() == [3 * 56 * 56 * 2, 3 * 1540 * 1036 * 2, 3 * 1540 * 1036 * 2]
    assert led.patches.tolist() == [4 * 4, 74 * 110, 74 * 110]
    assert led.deferred.all()


def test_sglang_gate_cases() -> None:
    """SGLang's gate tests: (3,32,32) at in_patch_limit 65536 defers; (3,1024,1024) at in_patch_limit 1 does not."""
    wl = Workload.from_requests([[(32, 32, 3)]])
    assert account(wl, Topology(tp_size=2), PR_33921, profile("sglang-gate-test"), CM).deferred.all()
    wl = Workload.from_requests([[(1024, 1024, 3)]])
    assert not account(wl, Topology(tp_size=2), PR_33921, profile("sglang-gate-test-l1"), CM).deferred.any()


def test_request_level_gate_decides_all_images_together() -> None:
    """The ``request`` call site sums a request's bytes: a tiny image rides along with a huge one; ``artifact`` decides each alone."""
    cfg = profile("sglang-unit-4096")  # in_patch_limit 4096: a 4000x4000 image shrinks to 64x64 patches
    wl = Workload.from_requests([[(4000, 4000, 3), (32, 32, 3)]])
    pr = account(wl, Topology(tp_size=2), PR_33921, cfg, CM, gate_mode="request")
    per = account(wl, Topology(tp_size=2), PR_33921, cfg, CM, gate_mode="artifact")
    assert pr.deferred.tolist() == [False, False]
    assert per.deferred.tolist() == [False, True]


@pytest.mark.parametrize("strategy", ["lpt-patches", "lpt-cost", "round-robin", "optimal"])
def test_every_strategy_gives_each_image_one_owner(strategy: str) -> None:
    """Whatever the strategy, each image has exactly one owner inside the vision group."""
    wl = Workload.from_requests([[(1536, 1024, 3)] * 3 + [(640, 480, 4)], [(32, 32, 3)]])
    led = account(wl, Topology(tp_size=4), PR_33921, CFG, CM, strategy=strategy)
    assert ((led.owner >= 0) & (led.owner < 4)).all()
    assert led.vit_patches.sum() == led.patches.sum()


@given(wl=workloads(min_images=1), topo=topologies())
def test_summary_redundancy_matches_the_ledger(wl: Workload, topo: Topology) -> None:
    """Redundant received bytes = (G - 1) copies of every payload under CPU transport."""
    led = account(wl, topo, PR_33921, CFG, CM)
    s = led.summary()
    assert s["redundant_received_bytes"] == int(led.payload_bytes.sum()) * (topo.attn_tp_size - 1)
    assert s["h2d_copies"] == int(led.h2d_copies.sum())
