"""Per-request service times of each simulated stage, from a ledger and a cost model.

Stages, in order (sim.des serves each as a FIFO queue):

1. ``producer``: the tokenizer process (one server). Eager images: H2D of the
   raw pixels, GPU preprocessing, GPU hash of the FP32 result, D2H (CPU
   transport) and the shm write. Deferred images: the uint8 staging copy,
   a CPU hash of the raw feature (facts 6.2), the shm write. Remote nodes
   get the payload pickled once each.
2. ``encoder`` (EPD only): the encoder group, ranks in lockstep.
3. ``group``: the request's attention-TP group, ranks in lockstep: each rank
   clones its copies out of shm, does its H2D copies, preprocesses what it
   owns, runs the ViT on its patches; the slowest rank sets the pace, then the
   padded all-gather, then prefill of text + image tokens (TP-sharded).

Per-rank queues in lockstep (broadcast, all-gather and TP prefill are
barriers) collapse into one queue per group whose service time is the
slowest rank's; each rank's own vision seconds are kept (``rank_vision_s``)
so per-rank utilization and idle time can be reported. No cross-request
batching (one request per forward) and no overlap of a rank's vision work
with another request's prefill: stated model limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.accounting import Ledger
from sim.costmodel import CostModel
from sim.workload import Workload


@dataclass(frozen=True)
class StageTimes:
    """Seconds per request for each stage; ``group`` also says which queue serves it."""

    stages: tuple[str, ...]
    times: np.ndarray  # float64 [n_requests, n_stages]
    server: np.ndarray  # int64 [n_requests, n_stages]: server index inside the stage
    rank_vision_s: np.ndarray | None = None  # float64 [n_requests, vision ranks]: each rank's own vision work


def _per_request(ledger: Ledger, workload: Workload, values: np.ndarray) -> np.ndarray:
    return np.bincount(workload.request_of, weights=values.astype(np.float64), minlength=workload.n_requests)


def stage_times(ledger: Ledger, workload: Workload, cm: CostModel, *, decode_on_gpu: bool = False) -> StageTimes:
    """Vectorized service times for every request and stage.

    ``decode_on_gpu``: JPEGs decoded by nvJPEG arrive as CUDA uint8 tensors
    (the PR's ``gpu_image_decode=True``, facts 6.1): eager skips the raw H2D,
    deferred hashes on the GPU and copies the raw pixels back (D2H) before
    the shm write. Otherwise PIL decodes on the CPU.
    """
    t = ledger.topology
    n = workload.n_requests
    d, e = ledger.deferred, ~ledger.deferred
    cpu = t.transport == "cpu"
    raw, fp32 = ledger.raw_bytes, ledger.fp32_bytes
    elements = raw + fp32 // 4
    per_req = lambda v: _per_request(ledger, workload, v)  # noqa: E731
    has_eager = per_req(e.astype(np.int64)) > 0
    producer = np.full(n, cm.fixed_s_per_request)
    raw_in = 0.0 if decode_on_gpu else cm.h2d(raw)
    producer += per_req(np.where(e, raw_in + cm.gpu_preprocess(elements, 0.0) + fp32 / cm.gpu_hash_bytes_per_s, 0))
    producer += has_eager * cm.preprocess_fixed_s
    if cpu:
        producer += per_req(np.where(e, cm.d2h(fp32) + cm.memcpy(fp32), 0))
        if decode_on_gpu:
            staged = raw / cm.gpu_hash_bytes_per_s + cm.d2h(raw) + cm.memcpy(raw)
        else:
            staged = cm.memcpy(raw) * 2 + raw / cm.cpu_hash_bytes_per_s
        producer += per_req(np.where(d, staged, 0))
        remote_nodes = ledger.serialized_bytes // np.maximum(per_req(ledger.payload_bytes).astype(np.int64), 1) - 1
        producer += np.maximum(remote_nodes, 0) * per_req(ledger.payload_bytes) / cm.pickle_bytes_per_s
    else:
        producer += per_req(np.where(e, fp32 / cm.hbm_bytes_per_s, 0))  # copy into the IPC pool slot
    ranks = ledger.received_bytes.shape[1]
    rank_time = ledger.received_bytes / (cm.memcpy_bytes_per_s if cpu else cm.hbm_bytes_per_s)
    rank_time = rank_time + cm.h2d(ledger.h2d_bytes)
    pre_elements = np.zeros_like(rank_time)
    runs = ledger.preprocess_runs
    if runs.any():
        # elements preprocessed on each rank: spread each request's deferred elements by its run counts
        per_image_elem = np.where(d, elements, 0).astype(np.float64)
        req_elem = per_req(per_image_elem)
        req_runs = per_req(d.astype(np.int64))
        share = np.divide(req_elem, req_runs, out=np.zeros(n), where=req_runs > 0)
        pre_elements = runs * share[:, None]
    if ledger.preprocess_on_cpu:
        rank_time = rank_time + cm.cpu_preprocess(pre_elements / 2)  # HF processor on the CPU
    else:
        rank_time = rank_time + cm.gpu_preprocess(pre_elements, (runs > 0).astype(np.float64))
    tp_vit = ranks if t.vision_world == 1 else 1  # without vision DP the tower is TP-sharded over all images
    rank_time = rank_time + cm.vit(ledger.vit_patches / tp_vit)
    gather = cm.allgather(ledger.out_tokens.max(axis=1).astype(np.float64), ranks if t.vision_world > 1 else 1)
    vision = rank_time.max(axis=1) + gather
    image_tokens = per_req(ledger.tokens)
    prefill = cm.prefill(workload.text_tokens + image_tokens, t.attn_tp_size)
    group_server = ledger.group
    if t.epd_encoders:
        embed = ledger.embedding_bytes / cm.allgather_bytes_per_s
        times = np.stack([producer, vision + embed, prefill], axis=1)
        servers = np.stack([np.zeros(n, np.int64), np.zeros(n, np.int64), np.arange(n) % t.attn_dp_size], axis=1)
        return StageTimes(("producer", "encoder", "group"), times, servers, rank_time)
    times = np.stack([producer, vision + prefill], axis=1)
    servers = np.stack([np.zeros(n, np.int64), group_server], axis=1)
    return StageTimes(("producer", "group"), times, servers, rank_time)
