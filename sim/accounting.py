"""Exact byte / copy / work ledgers per image, per request and per rank (vectorized).

The facts this encodes (semantics §1, §7, §15.2, §15.5):

* CPU transport: every rank of the request's group receives a full copy of
  every item (one shm segment or pickle per node reached, one private clone
  per rank); eager ships FP32 ``3*Hp*Wp*4`` bytes, deferred ``C*H*W`` uint8.
* IPC transports (``cuda_ipc`` / ``fabric``) never defer; nothing is
  serialized, and only the ranks that reconstruct copy the feature.
* H2D: with the scheduler whitelist (the PR adds K3) and vision DP only the
  owner copies its own items; without the whitelist, or without vision DP,
  every rank copies every item.
* Preprocessing: eager runs once per image in the producer; deferred runs on
  the owner (exactly once per image with vision DP) or on every rank without
  vision DP. Under EPD the encoder ranks preprocess: owner-only from
  418975ba6 on, every encoder rank over all images at the PR (semantics §15.3).

Routing across attention-DP groups is round-robin by request index.

`account` is `account_images` (per image: sizes, the decision, the owner
cost) then `place` (owners, per-rank matrices). Outside EPD the latency path
needs only the first: its event loop places owners per batch, and placing
every request's owners up front cost a fifth of a 100k-request run.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from deferlab.reference.oracle.navit import resize_config_arrays
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.policies import Policy
from deferlab.sim.costmodel import CostModel
from deferlab.sim.gate import decide, default_mode
from deferlab.sim.placement.strategies import assign, owner_cost
from deferlab.sim.topology import Topology
from deferlab.sim.workload import Workload

ALL_RANKS = -1


def epd_owner_only(policy: Policy) -> bool:
    """EPD owner-only materialization came with the EPD contract (418975ba6); the PR ran all images on every encoder."""
    return policy.epd_contract != "pr-dict"


@dataclass
class ImageLedger:
    """Per-image columns: sizes, the gate's decision, what ships, the owner's marginal cost; see module doc.

    All `sim.service.request_path` reads outside EPD (the event loop places owners per batch itself).
    """

    topology: Topology
    patches: np.ndarray
    tokens: np.ndarray
    raw_bytes: np.ndarray
    fp32_bytes: np.ndarray
    bf16_bytes: np.ndarray
    encoded_bytes: np.ndarray
    deferred: np.ndarray
    payload_bytes: np.ndarray
    owner_costs: np.ndarray  # marginal owner seconds (`sim.placement.strategies.owner_cost`): the lpt-cost load
    whitelist: bool  # only the owner copies an image to its GPU (with vision DP); resolved from the policy
    preprocess_on_cpu: bool  # PR-era EPD encoders run the checkpoint's CPU processor
    notes: list[str]


@dataclass
class Ledger(ImageLedger):
    """`ImageLedger` plus each image's owner, the (request x rank) matrices and the producer columns."""

    owner: np.ndarray  # local rank in the vision group, ALL_RANKS without vision DP
    group: np.ndarray  # per request
    # per request x vision rank
    received_bytes: np.ndarray
    h2d_bytes: np.ndarray
    h2d_copies: np.ndarray
    preprocess_runs: np.ndarray
    vit_patches: np.ndarray
    out_tokens: np.ndarray
    device_bytes: np.ndarray
    # per request (producer / transport)
    serialized_bytes: np.ndarray
    cross_node_bytes: np.ndarray
    producer_h2d_bytes: np.ndarray
    producer_d2h_bytes: np.ndarray
    producer_preprocess_runs: np.ndarray
    hashed_bytes: np.ndarray
    embedding_bytes: np.ndarray
    padding_tokens: np.ndarray

    @property
    def n_requests(self) -> int:
        return self.received_bytes.shape[0]

    def per_rank(self, matrix: np.ndarray) -> np.ndarray:
        """Fold a (request x vision-rank) matrix onto global ranks (TP ranks, or encoder ranks under EPD)."""
        t = self.topology
        if t.epd_encoders:
            return matrix.sum(axis=0)
        r = matrix.shape[1]
        out = np.zeros(t.tp_size, dtype=matrix.dtype)
        for g in range(t.attn_dp_size):
            out[g * r : (g + 1) * r] += matrix[self.group == g].sum(axis=0)
        return out

    def per_rank_peak(self, matrix: np.ndarray) -> np.ndarray:
        """Largest single-request value per global rank (requests staged one at a time)."""
        t = self.topology
        if t.epd_encoders:
            return matrix.max(axis=0, initial=0)
        r = matrix.shape[1]
        out = np.zeros(t.tp_size, dtype=matrix.dtype)
        for g in range(t.attn_dp_size):
            out[g * r : (g + 1) * r] = matrix[self.group == g].max(axis=0, initial=0)
        return out

    def summary(self) -> dict[str, float | int | list]:
        """Totals, payload alternatives side by side, and redundant work on non-owners."""
        enc = self.encoded_bytes
        has_file = enc >= 0
        owned_runs = int(self.deferred.sum()) if self.topology.vision_world > 1 else 0
        return {
            "requests": self.n_requests,
            "images": len(self.patches),
            "deferred_images": int(self.deferred.sum()),
            "payload_alternatives_bytes": {
                "fp32_patches": int(self.fp32_bytes.sum()),
                "bf16_patches": int(self.bf16_bytes.sum()),
                "raw_uint8": int(self.raw_bytes.sum()),
                "encoded_file": int(enc[has_file].sum()) if has_file.any() else None,
                "encoded_file_images": int(has_file.sum()),
            },
            "shipped_payload_bytes": int(self.payload_bytes.sum()),
            "serialized_bytes": int(self.serialized_bytes.sum()),
            "deserialized_bytes": int(self.received_bytes.sum()) if self.topology.transport == "cpu" else 0,
            "ipc_copy_bytes": int(self.received_bytes.sum()) if self.topology.transport != "cpu" else 0,
            "cross_node_bytes": int(self.cross_node_bytes.sum()),
            "h2d_copies": int(self.h2d_copies.sum()),
            "h2d_bytes": int(self.h2d_bytes.sum()),
            "producer_h2d_bytes": int(self.producer_h2d_bytes.sum()),
            "producer_d2h_bytes": int(self.producer_d2h_bytes.sum()),
            "preprocess_runs_producer": int(self.producer_preprocess_runs.sum()),
            "preprocess_runs_ranks": int(self.preprocess_runs.sum()),
            "redundant_preprocess_runs": int(self.preprocess_runs.sum()) - owned_runs,
            "redundant_received_bytes": int(self.received_bytes.sum() - self.payload_bytes.sum()),
            "redundant_h2d_bytes": int(self.h2d_bytes.sum() - self.h2d_useful_bytes()),
            "allgather_padding_tokens": int(self.padding_tokens.sum()),
            "embedding_transfer_bytes": int(self.embedding_bytes.sum()),
            "peak_staged_producer_bytes": int(self.hashed_bytes.max(initial=0)),
            "peak_staged_host_bytes_per_rank": self.per_rank_peak(self.received_bytes).tolist(),
            "peak_staged_device_bytes_per_rank": self.per_rank_peak(self.device_bytes).tolist(),
            "received_bytes_per_rank": self.per_rank(self.received_bytes).tolist(),
            "h2d_bytes_per_rank": self.per_rank(self.h2d_bytes).tolist(),
            "preprocess_runs_per_rank": self.per_rank(self.preprocess_runs).tolist(),
            "vit_patches_per_rank": self.per_rank(self.vit_patches).tolist(),
        }

    def h2d_useful_bytes(self) -> int:
        """H2D bytes that feed a computation: one copy per image on the rank that uses it (IPC: none)."""
        if self.topology.transport != "cpu":
            return 0
        if self.topology.vision_world > 1:
            return int((self.fp32_bytes if self.preprocess_on_cpu else self.payload_bytes).sum())
        return int(self.h2d_bytes.sum())


def _request_matrix(req: np.ndarray, owner: np.ndarray, weights: np.ndarray, n_req: int, ranks: int) -> np.ndarray:
    """Sum ``weights`` into (request, owner) cells; ALL_RANKS images add to every rank of the request."""
    out = np.zeros((n_req, ranks), dtype=np.int64)
    own = owner >= 0
    if own.any():
        flat = np.bincount(req[own] * ranks + owner[own], weights=weights[own], minlength=n_req * ranks)
        out += flat.reshape(n_req, ranks).astype(np.int64)
    if (~own).any():
        out += np.bincount(req[~own], weights=weights[~own], minlength=n_req).astype(np.int64)[:, None]
    return out


def place_owners(
    workload: Workload,
    patches: np.ndarray,
    costs: np.ndarray,
    num_ranks: int,
    strategy: str,
) -> np.ndarray:
    """Per image, its owner's local rank (``ALL_RANKS`` with one rank); cached by load signature."""
    n = workload.n_images
    if num_ranks <= 1:
        return np.full(n, ALL_RANKS if num_ranks < 1 else 0, dtype=np.int64)
    owner = np.empty(n, dtype=np.int64)
    cache: dict[tuple, np.ndarray] = {}
    offsets = workload.offsets.tolist()
    p_list = patches.tolist()
    c_list = costs.tolist()
    for r in range(workload.n_requests):
        a, b = offsets[r], offsets[r + 1]
        if a == b:
            continue
        key = (tuple(p_list[a:b]), tuple(c_list[a:b]))
        local = cache.get(key)
        if local is None:
            owners = assign(strategy, key[0], key[1], num_ranks)
            local = np.empty(b - a, dtype=np.int64)
            for rank, idxs in enumerate(owners):
                local[idxs] = rank
            cache[key] = local
        owner[a:b] = local
    return owner


def account_images(
    workload: Workload,
    topology: Topology,
    policy: Policy,
    config: PreprocessConfig,
    cost_model: CostModel,
    *,
    gate_mode: str | None = None,
    whitelist: bool | None = None,
) -> ImageLedger:
    """Every image's sizes, the gate's decision and its owner cost under one topology and policy.

    ``gate_mode`` (`sim.gate.GATE_MODES`) defaults to the policy's default call
    site (``artifact`` from 3d3194f6c on, else ``request``); ``whitelist`` to
    whether the policy includes the PR (only ``PRE_PR`` lacks it).
    """
    t = topology
    gate_mode = gate_mode or default_mode(policy)
    notes: list[str] = []
    w, h, c = workload.width, workload.height, workload.channels
    rc = resize_config_arrays(w, h, config) if len(w) else None
    p = config.patch_size
    pw = rc.padded_width if rc is not None else np.zeros(0, np.int64)
    ph = rc.padded_height if rc is not None else np.zeros(0, np.int64)
    patches = (pw // p) * (ph // p)
    raw = c * w * h
    fp32 = 3 * pw * ph * 4
    epd = t.epd_encoders > 0
    if epd:
        deferred = np.ones(len(w), bool)  # the encoder receives raw pixels and preprocesses them itself
        notes.append("EPD: raw images travel to the encoder ranks (transport forced to cpu, semantics §15.3)")
    elif t.transport != "cpu" or not policy.defer_enabled:
        deferred = np.zeros(len(w), bool)
    else:
        deferred = decide(w, h, c, workload.offsets, config, gate_mode)
    cpu_pre = bool(epd and not epd_owner_only(policy))
    if cpu_pre:
        notes.append(f"{policy.name}: every EPD encoder rank preprocesses every image (owner-only came with 418975ba6)")
    return ImageLedger(
        topology=t,
        patches=patches,
        tokens=patches // (config.merge_kernel_size**2),
        raw_bytes=raw,
        fp32_bytes=fp32,
        bf16_bytes=fp32 // 2,
        encoded_bytes=workload.encoded_bytes,
        deferred=deferred,
        payload_bytes=np.where(deferred, raw, fp32),
        owner_costs=owner_cost(patches, raw + 3 * pw * ph, raw, deferred, cost_model),
        whitelist=policy.defer_enabled if whitelist is None else whitelist,
        preprocess_on_cpu=cpu_pre,
        notes=notes,
    )


def account(
    workload: Workload,
    topology: Topology,
    policy: Policy,
    config: PreprocessConfig,
    cost_model: CostModel,
    *,
    strategy: str = "lpt-patches",
    **gate: Any,
) -> Ledger:
    """Every request's bytes, copies and work under one topology and policy (`account_images`, then `place`).

    ``gate``: `account_images`'s keywords (``gate_mode``, ``whitelist``).
    """
    images = account_images(workload, topology, policy, config, cost_model, **gate)
    return place(images, workload, cost_model, strategy)


def place(images: ImageLedger, workload: Workload, cost_model: CostModel, strategy: str = "lpt-patches") -> Ledger:
    """Each image's owner under ``strategy`` (`place_owners`), and the (request x rank) and producer ledgers."""
    t = images.topology
    n_req = workload.n_requests
    req = workload.request_of
    n_img = workload.n_images
    patches, tokens, deferred = images.patches, images.tokens, images.deferred
    payload, fp32, raw = images.payload_bytes, images.fp32_bytes, images.raw_bytes
    epd = t.epd_encoders > 0
    ranks = t.vision_ranks
    group = np.zeros(n_req, np.int64) if epd else np.arange(n_req, dtype=np.int64) % t.attn_dp_size
    owner = place_owners(workload, patches, images.owner_costs, t.vision_world, strategy)
    if t.vision_world == 1:
        owner[:] = ALL_RANKS if ranks > 1 else 0

    def mat(weights: np.ndarray, who: np.ndarray) -> np.ndarray:
        return _request_matrix(req, who, weights.astype(np.float64), n_req, ranks)

    everyone = np.full(n_img, ALL_RANKS, np.int64)
    ones = np.ones(n_img, np.int64)
    readers = everyone if t.transport == "cpu" else owner
    received = mat(payload, readers)
    cpu_pre = images.preprocess_on_cpu
    if t.transport == "cpu":
        h2d_who = owner if (images.whitelist and t.vision_world > 1) else everyone
        # PR-era EPD encoders preprocess on the CPU, so the owner uploads FP32 patches, not raw pixels
        h2d_bytes = mat(fp32 if cpu_pre else payload, h2d_who)
        h2d_copies = mat(ones, h2d_who)
    else:
        h2d_bytes = np.zeros((n_req, ranks), np.int64)
        h2d_copies = np.zeros((n_req, ranks), np.int64)
    pre_who = everyone if cpu_pre else owner  # PR-era EPD: every encoder rank preprocesses every image
    preprocess_runs = mat(deferred.astype(np.int64), pre_who)
    vit_patches = mat(patches, owner)
    out_tokens = mat(tokens, owner)
    gpu_work = np.where(deferred & (not cpu_pre), fp32, 0)  # float32 working buffers of GPU preprocessing
    device_bytes = h2d_bytes + mat(gpu_work, pre_who) + mat(images.bf16_bytes, owner)

    counts = workload.images_per_request
    req_payload = np.bincount(req, weights=payload, minlength=n_req).astype(np.int64)
    nodes_reached = np.array([t.nodes_reached(g) for g in range(t.attn_dp_size)])[group] if not epd else 1
    cpu = t.transport == "cpu"
    serialized = req_payload * nodes_reached if cpu else np.zeros(n_req, np.int64)
    if epd:
        cross_node = np.zeros(n_req, np.int64)  # encoders are modelled on the producer's node
    else:
        # every byte a rank off node 0 receives crossed a node boundary (pickled, or a fabric read)
        remote_mask = np.array(
            [[t.node_of(g * ranks + r) != 0 for r in range(ranks)] for g in range(t.attn_dp_size)], dtype=np.int64
        )
        cross_node = (received * remote_mask[group]).sum(axis=1)
    eager = ~deferred
    producer_h2d = np.bincount(req, weights=np.where(eager, raw, 0), minlength=n_req).astype(np.int64)
    producer_d2h = np.bincount(req, weights=np.where(eager & cpu, fp32, 0), minlength=n_req).astype(np.int64)
    producer_runs = np.bincount(req, weights=eager.astype(np.int64), minlength=n_req).astype(np.int64)
    embed = (
        (
            np.bincount(req, weights=tokens, minlength=n_req)
            * cost_model.embedding_hidden_bytes_per_token
            * t.attn_tp_size
        ).astype(np.int64)
        if epd
        else np.zeros(n_req, np.int64)
    )
    if t.vision_world > 1:
        padding = np.where(counts > 1, ranks * out_tokens.max(axis=1) - out_tokens.sum(axis=1), 0)
    else:
        padding = np.zeros(n_req, np.int64)
    return Ledger(
        **{f.name: getattr(images, f.name) for f in fields(ImageLedger)},
        owner=owner,
        group=group,
        received_bytes=received,
        h2d_bytes=h2d_bytes,
        h2d_copies=h2d_copies,
        preprocess_runs=preprocess_runs,
        vit_patches=vit_patches,
        out_tokens=out_tokens,
        device_bytes=device_bytes,
        serialized_bytes=serialized,
        cross_node_bytes=cross_node,
        producer_h2d_bytes=producer_h2d,
        producer_d2h_bytes=producer_d2h,
        producer_preprocess_runs=producer_runs,
        hashed_bytes=req_payload,
        embedding_bytes=embed,
        padding_tokens=padding.astype(np.int64),
    )
