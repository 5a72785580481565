"""What each step of SGLang's released request path costs, per request and per image (0.5.23; map in README).

The path (``sim/README.md`` cites file:function for each step):

1. Tokenizer (one process, ``producer``): the K3 processor's eager work
   (stage the decoded image, preprocess on the tokenizer's GPU, hash the FP32
   result there, copy it back) or the deferred staging (uint8 CHW copy,
   sha256 of the raw bytes); then ``wrap_shm_features`` and ``sock_send``.
   On one node every CPU feature goes into its own POSIX shared-memory
   segment and the message carries only its name (mode ``shm``); across
   nodes (``determine_tensor_transport_mode`` is "default") the tensors are
   pickled into the message itself (mode ``inline``). IPC transports ship
   handles (mode ``ipc``).
2. Scheduler, attention-TP rank 0, inside its event loop (`sim.eventloop`):
   ``recv_requests`` unpickles every message that arrived, ``broadcast_pyobj``
   pickles the list again and sends it over gloo to the other ranks of the
   group, each of which copies it out and unpickles it; with shared memory,
   ``_finalize_shm_features`` puts a barrier and an all-reduce around every
   rank's ``materialize`` (open, private map, unlink per item).
3. The prefill batch: the owner of each image (vision DP) reads its pages
   and copies them to the GPU (pageable memory, so the host waits), runs the
   deferred preprocessing (its grid check syncs the host) and the ViT; the
   padded all-gather; then prefill of the batch's tokens.

Every cost is built from `sim.costmodel.CostModel`; nothing is fitted. Vectorized:
one pass over the workload, the event loops only add the numbers up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deferlab.sim.accounting import ImageLedger, Ledger
from deferlab.sim.costmodel import CostModel
from deferlab.sim.workload import Workload

# Assumption: pickled metadata of one item (grid tensor, deferred config, shm name) and of one request's message
# (token ids aside); calibrate's 16 tiny items pickle to about 1 KiB each. Only the broadcast's byte count uses them.
META_BYTES_PER_ITEM = 1024
META_BYTES_PER_REQUEST = 2048


@dataclass(frozen=True)
class StageTimes:
    """Seconds per request for each FIFO stage (`sim.des`); ``server`` says which queue of the stage serves it."""

    stages: tuple[str, ...]
    times: np.ndarray  # float64 [n_requests, n_stages]
    server: np.ndarray  # int64 [n_requests, n_stages]


@dataclass(frozen=True)
class RequestPath:
    """The released path's costs: per request (producer, receive, broadcast) and per image (the owner's work)."""

    mode: str
    world: int  # ranks of the attention-TP group: the broadcast's world
    vision_world: int  # owner-assignment world (1: every rank does every image)
    producer_s: np.ndarray  # tokenizer service per request
    encoder_s: np.ndarray | None  # EPD encoder stage per request (None when colocated)
    recv_s: np.ndarray  # rank 0: unpickle of the request's message, shm attach
    bcast_pickle_s: np.ndarray  # rank 0: pickling it again for broadcast_pyobj
    bcast_bytes: np.ndarray  # its bytes in the broadcast
    bcast_unpickle_s: np.ndarray  # each other rank: copy out of the received tensor, unpickle, shm attach
    shm_items: np.ndarray  # items in shared memory (the barrier and all-reduce of _finalize_shm_features)
    tokens: np.ndarray  # prompt tokens per request
    offsets: np.ndarray  # images of request r: offsets[r]:offsets[r+1]
    img_start: np.ndarray  # token position of each image's first token in its request (images first, then text)
    patches: np.ndarray  # LPT load (t*h*w) per image
    out_tokens: np.ndarray  # vision output rows per image
    load: np.ndarray  # placement cost per image (the lpt-cost strategy)
    own_host_s: np.ndarray  # on its owner, host-blocking: page reads, H2D, deferred preprocessing
    own_dev_s: np.ndarray  # on its owner, device only: ViT, IPC pool copy
    all_host_s: np.ndarray  # on every rank of the group whoever owns it
    all_dev_s: np.ndarray
    deferred: np.ndarray  # per image
    prefill_s_per_token: float  # prefill seconds per token on the group (TP-sharded)


def transport_mode(ledger: ImageLedger) -> str:
    """``shm`` (one node), ``inline`` (nodes > 1: determine_tensor_transport_mode -> "default") or ``ipc``."""
    t = ledger.topology
    if t.epd_encoders:
        return "shm" if t.nodes == 1 else "inline"
    if t.transport != "cpu":
        return "ipc"
    return "inline" if t.nodes > 1 else "shm"


def _per_request(workload: Workload, values: np.ndarray) -> np.ndarray:
    return np.bincount(workload.request_of, weights=values.astype(np.float64), minlength=workload.n_requests)


def producer_parts(
    ledger: ImageLedger, workload: Workload, cm: CostModel, *, decode_on_gpu: bool = False
) -> dict[str, np.ndarray]:
    """The tokenizer's seconds per request: ``processing`` (the K3 processor) and ``send`` (wrap + sock_send).

    ``decode_on_gpu``: nvJPEG (the K3 processor's ``gpu_image_decode``) gives
    CUDA uint8 tensors: eager skips the raw H2D and the CPU staging, deferred
    hashes on the GPU and copies the raw pixels back. Otherwise PIL decodes and
    both paths stage the image into a uint8 CHW tensor on the CPU.
    """
    mode = transport_mode(ledger)
    d, e = ledger.deferred, ~ledger.deferred
    raw, fp32 = ledger.raw_bytes.astype(np.float64), ledger.fp32_bytes.astype(np.float64)
    per_req = lambda v: _per_request(workload, v)  # noqa: E731
    items = np.diff(workload.offsets).astype(np.float64)
    stage = 0.0 if decode_on_gpu else raw / cm.stage_bytes_per_s
    eager = stage + (0.0 if decode_on_gpu else cm.h2d(raw)) + cm.gpu_preprocess(raw + fp32 / 4, 0.0)
    eager = eager + fp32 / cm.gpu_hash_bytes_per_s
    eager = eager + (fp32 / cm.hbm_bytes_per_s if mode == "ipc" else cm.d2h(fp32))
    if decode_on_gpu:
        deferred = raw / cm.gpu_hash_bytes_per_s + cm.d2h(raw)
    else:
        deferred = stage + raw / cm.cpu_hash_bytes_per_s
    processing = cm.fixed_s_per_request + per_req(np.where(e, eager, deferred))
    processing = processing + (per_req(e.astype(np.int64)) > 0) * cm.preprocess_fixed_s
    payload = ledger.payload_bytes.astype(np.float64)
    meta = META_BYTES_PER_REQUEST + META_BYTES_PER_ITEM * items
    if mode == "shm":
        send = per_req(cm.shm_write(payload, 1.0)) + cm.pickle(0.0, 0.0, items) + cm.socket(meta)
    elif mode == "inline":
        fp32_in, u8_in = per_req(np.where(e, payload, 0)), per_req(np.where(d, payload, 0))
        send = cm.pickle(fp32_in, u8_in, items) + cm.socket(fp32_in + u8_in + meta)
    else:
        send = cm.pickle(0.0, 0.0, items) + cm.socket(meta)
    return {"processing": processing, "send": send}


def producer_times(
    ledger: ImageLedger, workload: Workload, cm: CostModel, *, decode_on_gpu: bool = False
) -> np.ndarray:
    """The tokenizer's service time per request (`producer_parts` summed)."""
    parts = producer_parts(ledger, workload, cm, decode_on_gpu=decode_on_gpu)
    return parts["processing"] + parts["send"]


def encoder_times(ledger: Ledger, workload: Workload, cm: CostModel) -> np.ndarray:
    """EPD: the encoder group per request (ranks in lockstep: the slowest rank, the all-gather, the embedding
    transfer to the language server). PR-era encoders run the CPU processor."""
    raw, fp32 = ledger.raw_bytes, ledger.fp32_bytes
    per_req = lambda v: _per_request(workload, v)  # noqa: E731
    rank_time = ledger.received_bytes / cm.memcpy_bytes_per_s + cm.h2d(ledger.h2d_bytes)
    req_elem = per_req(np.where(ledger.deferred, raw + fp32 // 4, 0))
    req_runs = per_req(ledger.deferred.astype(np.int64))
    share = np.divide(req_elem, req_runs, out=np.zeros(workload.n_requests), where=req_runs > 0)
    pre = ledger.preprocess_runs * share[:, None]
    if ledger.preprocess_on_cpu:
        rank_time = rank_time + cm.cpu_preprocess(pre / 2)  # the checkpoint's HF processor, per source pixel
    else:
        rank_time = rank_time + cm.gpu_preprocess(pre, (ledger.preprocess_runs > 0).astype(np.float64))
    rank_time = rank_time + cm.vit(ledger.vit_patches)
    ranks = ledger.received_bytes.shape[1]
    gather = cm.allgather(ledger.out_tokens.max(axis=1).astype(np.float64), ranks)
    embed = ledger.embedding_bytes / cm.allgather_bytes_per_s
    return rank_time.max(axis=1) + gather + embed


def request_path(
    ledger: ImageLedger,
    workload: Workload,
    cm: CostModel,
    *,
    whitelist: bool | None = None,
    decode_on_gpu: bool = False,
) -> RequestPath:
    """Every cost of the released path for one workload under one ledger (topology, policy, gate).

    ``whitelist`` (default: the ledger's, i.e. the policy's): the model is on ``_can_skip_pre_embed_feature_move``'s
    list (every policy from the PR on), so only an image's owner copies it to its GPU; otherwise
    ``_move_items_to_device`` copies every item on every rank. Under EPD the encoders' ranks matter, so the ledger
    must be the full `Ledger` (`sim.accounting.account`); otherwise the per-image columns are enough.
    """
    t = ledger.topology
    mode = transport_mode(ledger)
    n = workload.n_requests
    per_req = lambda v: _per_request(workload, v)  # noqa: E731
    items = np.diff(workload.offsets).astype(np.float64)
    d, e = ledger.deferred, ~ledger.deferred
    payload = ledger.payload_bytes.astype(np.float64)
    image_tokens = per_req(ledger.tokens)
    tokens = (workload.text_tokens + image_tokens).astype(np.int64)
    starts = np.zeros(workload.n_images, np.int64)
    if workload.n_images:
        cum = np.cumsum(ledger.tokens) - ledger.tokens
        starts = cum - cum[workload.offsets[:-1]][workload.request_of]
    epd = t.epd_encoders > 0
    encoder = None
    if epd:  # the language server receives embeddings, not images: its loop sees no vision work
        if not isinstance(ledger, Ledger):
            raise TypeError("EPD: request_path needs the full Ledger (sim.accounting.account), not its image columns")
        encoder = encoder_times(ledger, workload, cm)
        items = np.zeros(n)
    inline = mode == "inline" and not epd
    fp32_in = per_req(np.where(e, payload, 0)) if inline else np.zeros(n)
    u8_in = per_req(np.where(d, payload, 0)) if inline else np.zeros(n)
    attach = cm.shm_attach_s * items if mode == "shm" and not epd else np.zeros(n)
    recv = cm.unpickle(fp32_in, u8_in, items) + attach
    world = t.attn_tp_size
    nbytes = fp32_in + u8_in + META_BYTES_PER_REQUEST + META_BYTES_PER_ITEM * items
    if world > 1:
        bpickle = cm.pickle(fp32_in, u8_in, items)
        bunpickle = cm.memcpy(nbytes) + cm.unpickle(fp32_in, u8_in, items) + attach
    else:
        bpickle = bunpickle = np.zeros(n)
    vw = t.vision_world
    zeros = np.zeros(workload.n_images)
    read = payload / cm.shm_read_bytes_per_s if mode == "shm" else zeros
    if mode == "ipc":
        host, dev = zeros, payload / cm.hbm_bytes_per_s  # the reader copies its slice out of the pool
    else:
        host, dev = read + cm.h2d(payload), zeros
    pre = np.where(d, cm.gpu_preprocess(ledger.raw_bytes + ledger.fp32_bytes // 4, 0.0), 0.0)
    vit = cm.vit(ledger.patches.astype(np.float64))
    whitelist = (ledger.whitelist if whitelist is None else whitelist) or mode == "ipc"
    if epd:
        own_h = own_d = all_h = all_d = zeros
    elif vw > 1:
        own_h, own_d = host + pre, dev + vit
        all_h, all_d = (zeros, zeros) if whitelist else (host, zeros)
        if not whitelist:
            own_h = pre  # every rank copies every item; the owner adds its preprocessing
    else:
        own_h = own_d = zeros
        all_h, all_d = host + pre, dev + vit / max(world, 1)  # without vision DP the tower is TP-sharded
    return RequestPath(
        mode=mode,
        world=world,
        vision_world=1 if epd else vw,
        producer_s=producer_times(ledger, workload, cm, decode_on_gpu=decode_on_gpu),
        encoder_s=encoder,
        recv_s=recv,
        bcast_pickle_s=bpickle,
        bcast_bytes=nbytes,
        bcast_unpickle_s=bunpickle,
        shm_items=items if mode == "shm" and not epd else np.zeros(n),
        tokens=tokens,
        offsets=np.zeros(n + 1, np.int64) if epd else workload.offsets,  # EPD: the loop sees no images
        img_start=starts,
        patches=ledger.patches,
        out_tokens=ledger.tokens,
        load=ledger.owner_costs,
        own_host_s=own_h,
        own_dev_s=own_d,
        all_host_s=all_h,
        all_dev_s=all_d,
        deferred=d,
        prefill_s_per_token=cm.prefill(1, t.attn_tp_size),
    )
