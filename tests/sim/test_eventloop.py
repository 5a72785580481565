"""The scheduler's event loop (sim.eventloop) and the released request path (sim.service), by hand and by property."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deferlab.reference.system.policies import PR_33921, RELEASED
from deferlab.reference.system.profiles import profile
from deferlab.sim.accounting import account
from deferlab.sim.costmodel import load_cost_model
from deferlab.sim.des import simulate
from deferlab.sim.eventloop import run_loops
from deferlab.sim.latency import compare_modes, simulate_mode
from deferlab.sim.service import META_BYTES_PER_ITEM, META_BYTES_PER_REQUEST, RequestPath, StageTimes, request_path
from deferlab.sim.topology import Topology
from deferlab.sim.workload import Workload, WorkloadSpec, generate

CFG = profile("kimi-k3")
CM = load_cost_model("gb300-class")


def _path(service: list[float], tokens: int, *, cpu: float = 0.0, world: int = 1) -> RequestPath:
    """One image per request whose vision costs ``service[r]`` seconds on the device; nothing else costs anything."""
    n = len(service)
    z, zi = np.zeros(n), np.zeros(n, np.int64)
    return RequestPath(
        mode="shm",
        world=world,
        vision_world=1,
        producer_s=z,
        encoder_s=None,
        recv_s=np.full(n, cpu),
        bcast_pickle_s=z,
        bcast_bytes=z,
        bcast_unpickle_s=z,
        shm_items=z,
        tokens=np.full(n, tokens, np.int64),
        offsets=np.arange(n + 1, dtype=np.int64),
        img_start=zi,
        patches=np.ones(n, np.int64),
        out_tokens=np.ones(n, np.int64),
        load=np.ones(n),
        own_host_s=z,
        own_dev_s=z,
        all_host_s=z,
        all_dev_s=np.asarray(service, dtype=np.float64),
        deferred=np.zeros(n, bool),
        prefill_s_per_token=0.0,
    )


QUIET = replace(CM, sched_s_per_iteration=0.0, preprocess_fixed_s=0.0, prefill_token_budget=100.0)


@settings(max_examples=80)
@given(gaps=st.lists(st.floats(0.0, 4.0), min_size=1, max_size=40), data=st.data(), overlap=st.booleans())
def test_loop_reduces_to_one_fifo_stage(gaps: list[float], data: st.DataObject, overlap: bool) -> None:
    """No CPU costs and one request per batch (each fills the token budget): the loop is one FIFO server, and gives
    the DES's timeline exactly (so the queueing-theory check of sim.des covers it too)."""
    ready = np.cumsum(np.array(gaps))
    service = data.draw(st.lists(st.floats(0.001, 3.0), min_size=len(gaps), max_size=len(gaps)))
    loop = run_loops(_path(service, 100), ready, np.zeros(len(gaps), np.int64), QUIET, overlap=overlap)
    fifo = simulate(ready, StageTimes(("s",), np.array(service)[:, None], np.zeros((len(gaps), 1), np.int64)))
    assert np.allclose(loop.finish, fifo.finish, rtol=1e-12, atol=1e-9)
    assert loop.batches == len(gaps)


def test_requests_that_arrive_together_are_received_and_prefilled_together() -> None:
    """Three requests of 30 tokens ready at 0 under a 100-token budget: one CPU phase, one batch, one finish time."""
    path = _path([1.0, 1.0, 1.0], 30, cpu=0.5)
    loop = run_loops(path, np.zeros(3), np.zeros(3, np.int64), QUIET, overlap=False)
    assert loop.batches == 1 and loop.summary(1.0, 1)["mean_batch_requests"] == 3.0
    # CPU phase 3 x 0.5, then one ViT call over the three images (a sum of 1 s each, no vision DP)
    assert loop.finish.tolist() == [4.5, 4.5, 4.5]


def test_a_request_over_the_token_budget_is_chunked() -> None:
    """250 tokens under a 100-token budget: three iterations; its image is encoded in the first chunk only."""
    loop = run_loops(_path([2.0], 250), np.zeros(1), np.zeros(1, np.int64), QUIET, overlap=False)
    assert loop.batches == 3 and loop.finish[0] == pytest.approx(2.0)
    assert loop.host_vision_s == 0.0 and loop.device_s == pytest.approx(2.0)


def test_overlap_hides_the_cpu_phase_behind_the_device() -> None:
    """Two requests 0.1 s apart, CPU 0.5 s each, device 1 s each: with overlap the second CPU phase runs while the
    device works (finish 1.5, 2.5); without, the host waits for the device first (1.5, 3.0)."""
    path = _path([1.0, 1.0], 100, cpu=0.5)
    ready = np.array([0.0, 0.1])
    serial = run_loops(path, ready, np.zeros(2, np.int64), QUIET, overlap=False)
    over = run_loops(path, ready, np.zeros(2, np.int64), QUIET, overlap=True)
    assert serial.finish.tolist() == pytest.approx([1.5, 3.0])
    assert over.finish.tolist() == pytest.approx([1.5, 2.5])


def test_every_iteration_of_a_group_broadcasts_even_when_nothing_arrived() -> None:
    """world > 1: an empty broadcast_pyobj still costs its latency (it sends the size)."""
    path = _path([1.0], 100, world=8)
    loop = run_loops(path, np.zeros(1), np.zeros(1, np.int64), QUIET, overlap=False)
    assert loop.cpu_phase_s == pytest.approx(QUIET.bcast(path.bcast_bytes[0], 8))


@pytest.mark.parametrize("nodes", [1, 2])
def test_what_the_broadcast_carries_follows_the_transport(nodes: int) -> None:
    """One node: shared memory, the broadcast carries names (metadata bytes only). Two nodes: the FP32 (eager) or
    uint8 (deferred) bytes themselves, pickled by the tokenizer, again by broadcast_pyobj."""
    wl = Workload.from_requests([[(1536, 1024, 3)] * 4])
    topo = Topology(tp_size=8, nodes=nodes)
    meta = META_BYTES_PER_REQUEST + 4 * META_BYTES_PER_ITEM
    for gate in ("never", None):
        led = account(wl, topo, PR_33921, CFG, CM, gate_mode=gate)
        path = request_path(led, wl, CM)
        assert path.mode == ("shm" if nodes == 1 else "inline")
        carried = path.bcast_bytes[0] - meta
        assert carried == (0 if nodes == 1 else led.payload_bytes.sum())
        assert (path.shm_items[0] == 4) == (nodes == 1)


def test_only_the_owner_copies_under_the_whitelist() -> None:
    """Vision DP with the whitelist (RELEASED): an image's H2D is on its owner; without it (PRE_PR-like) on every rank."""
    wl = Workload.from_requests([[(1536, 1024, 3)] * 4])
    led = account(wl, Topology(tp_size=8), RELEASED, CFG, CM)
    owner = request_path(led, wl, CM, whitelist=True)
    everyone = request_path(led, wl, CM, whitelist=False)
    assert (owner.own_host_s > 0).all() and not owner.all_host_s.any()
    assert (everyone.all_host_s > 0).all()


def test_deferral_removes_the_eager_fp32_work_of_the_docs_request() -> None:
    """Per request on two nodes: the deferred tokenizer and scheduler CPU cost less than the eager ones (4x fewer
    bytes through pickle, socket and gloo), while the device's work is about the same."""
    wl = generate(WorkloadSpec(family="docs", n_requests=50, arrival="closed"))
    res = compare_modes(wl, Topology(tp_size=8, nodes=2), PR_33921, CFG, CM)
    e, d = res["eager"], res["deferred"]
    assert d["per_request_tokenizer_s"] < e["per_request_tokenizer_s"]
    assert d["per_request_scheduler_cpu_s"] < e["per_request_scheduler_cpu_s"] / 3
    assert abs(d["per_request_device_s"] - e["per_request_device_s"]) < 0.2 * e["per_request_device_s"]


def test_epd_language_loop_sees_no_images() -> None:
    """EPD: the encoder stage does the vision; the language server's loop only prefills."""
    wl = generate(WorkloadSpec(family="mixed", n_requests=40, arrival="poisson", rate=5.0, seed=2))
    tl, diag = simulate_mode(wl, Topology(tp_size=8, epd_encoders=4), PR_33921, CFG, CM, gate_mode=None)
    assert diag["per_request_owner_host_s"] == 0.0 and (tl.ttft > 0).all()
