"""Owner-side materialization (semantics §6) and the whole vision-DP flow around it (semantics §1.4, §7).

`materialize` is upstream's ``materialize_item_features`` loader for one
rank's image indices, under a policy: the PR (all deferred or all eager,
first item's mean/std/background), the interim version with the local-index
grid bug, and the released version (mixed batches, backend groups, grid
check with global indices). `get_image_features` runs every rank of the
attention-TP group in turn, simulates the padded all-gather by a concat and
restores request order.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from deferlab.impl.consumer import DeferredView, read_deferred
from deferlab.impl.device import resolve_device
from deferlab.impl.items import MultimodalItem, item_grid
from deferlab.impl.pipeline import preprocess_with
from deferlab.impl.placement import assign_owners
from deferlab.impl.scheduler import TransferLog, can_skip_pre_embed_feature_move, copy_to_device, move_items_to_device
from deferlab.impl.staging import to_chw_uint8
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.contract import DEFERRED_PREPROCESSING_KEY
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.policies import PR_33921, Policy, get_policy


def _run_deferred(
    features: Sequence[object],
    views: Sequence[DeferredView],
    first: DeferredView,
    device: torch.device,
    patch_size: int,
    log: TransferLog,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The owner pipeline over deferred features: per-item resize configs, the FIRST item's mean/std/bg."""
    # deferlab has no checkpoint (PIL) processor: a "cpu"-backend group runs the same torch pipeline on the CPU.
    run_on = torch.device("cpu") if first.backend == "cpu" else device

    def stage(img: object) -> torch.Tensor:
        x = to_chw_uint8(img)  # type: ignore[arg-type]
        return copy_to_device(x, run_on, log)

    pv, grids = preprocess_with(
        features,  # type: ignore[arg-type]
        [v.resize_config for v in views],
        first.image_mean,
        first.image_std,
        first.transparent_bg_config,
        patch_size,
        run_on,
        stage=stage,
    )
    log.preprocess_calls += 1
    log.images_preprocessed += len(features)
    return pv.to(device), grids


# The backends an owner that reads ``backend`` (418975ba6 on) knows; any other is refused (semantics §6.2).
KNOWN_BACKENDS = ("gpu", "cpu")


def _check_backend(view: DeferredView, policy: Policy) -> None:
    """Refuse a deferred group of a backend the owner does not know, naming it.

    Why: before, any backend but ``"cpu"`` ran the GPU pipeline silently, so an item a producer wrote for a
    backend this owner cannot run ("npu", a typo) was materialized as if it were "gpu"; upstream's loader
    raises instead. The PR's owner reads no backend, so it has none to refuse.
    """
    if policy.consumer_reads_backend and view.backend not in KNOWN_BACKENDS:
        raise ValueError(f"Unsupported Kimi-K3 deferred preprocessing backend: {view.backend}")


def _eager_feature(feature: object) -> torch.Tensor:
    if not isinstance(feature, torch.Tensor):
        raise TypeError(f"Kimi-K3 image feature must be a torch.Tensor, got {type(feature).__name__}")
    return feature


def _check_indices(owner_indices: Sequence[int], n: int) -> list[int]:
    out = list(owner_indices)
    for k, i in enumerate(out):
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
            raise InputValueError(f"owner_indices[{k}]={i!r} is not an image index in 0..{n - 1}")
    return out


@dataclass(frozen=True)
class _Owner:
    """What the owner's loader runs with, whichever batch rule its policy has (`materialize` resolves them)."""

    device: torch.device
    policy: Policy
    dtype: torch.dtype
    patch_size: int
    log: TransferLog


def _materialize_pr(selected: list[MultimodalItem], configs: list, owner: _Owner) -> torch.Tensor:
    """PR #33921: all deferred or a ValueError; one pipeline run with the first item's mean/std/background."""
    if not all(c is not None for c in configs):
        raise ValueError("Kimi-K3 cannot mix deferred and preprocessed image features")
    views = [read_deferred(c, owner.policy, owner.patch_size) for c in configs]
    if owner.policy.consumer_reads_backend and len({v.backend for v in views}) > 1:
        raise ValueError("Kimi-K3 cannot mix deferred preprocessing backends")
    _check_backend(views[0], owner.policy)
    pv, _ = _run_deferred([it.feature for it in selected], views, views[0], owner.device, owner.patch_size, owner.log)
    return pv.to(owner.dtype)


def _materialize_mixed(
    selected: list[MultimodalItem],
    configs: list,
    owner_indices: list[int],
    grids_host: torch.Tensor,
    owner: _Owner,
) -> torch.Tensor:
    """3d3194f6c+: eager items pass through, deferred ones run per backend group with a grid check."""
    device, policy, dtype, patch_size, log = owner.device, owner.policy, owner.dtype, owner.patch_size, owner.log
    parts: list[torch.Tensor | None] = [None] * len(selected)
    views = {k: read_deferred(c, policy, patch_size) for k, c in enumerate(configs) if c is not None}
    by_backend: dict[str, list[int]] = {}
    for k, view in views.items():
        by_backend.setdefault(view.backend, []).append(k)
    for positions in by_backend.values():
        group = [views[k] for k in positions]
        _check_backend(group[0], policy)
        pv, produced = _run_deferred([selected[k].feature for k in positions], group, group[0], device, patch_size, log)
        # The interim bug: positions local to the selection index the GLOBAL grid tensor.
        rows = positions if policy.grid_check == "local" else [owner_indices[k] for k in positions]
        expected = grids_host[rows]
        if policy.grid_check != "none" and not torch.equal(produced, expected):
            raise ValueError("Kimi-K3 deferred GPU preprocessing produced wrong grids")
        counts = [int(g.prod()) for g in expected]
        if sum(counts) != pv.shape[0]:
            raise ValueError("Kimi-K3 deferred feature length does not match image grids")
        for k, part in zip(positions, pv.split(counts), strict=True):
            parts[k] = part.to(dtype)
    for k, item in enumerate(selected):
        if configs[k] is None:
            parts[k] = copy_to_device(_eager_feature(item.feature), device, log).to(dtype)
    return torch.cat(parts, dim=0) if parts else torch.empty((0, 3, patch_size, patch_size), dtype=dtype)


def materialize(
    items: Sequence[MultimodalItem],
    owner_indices: Sequence[int],
    config: PreprocessConfig,
    device: str | torch.device | None = None,
    policy: Policy | str = PR_33921,
    dtype: torch.dtype = torch.bfloat16,
    log: TransferLog | None = None,
) -> torch.Tensor:
    """Features of ``items[owner_indices]`` on ``device`` in ``dtype``, concatenated in the given order.

    ``config`` is the checkpoint's: upstream's owner takes the patch side
    from its vision tower, never from the items it is handed.
    """
    patch_size = _tower_patch_size(config)
    policy = get_policy(policy)
    dev = resolve_device(device)
    log = log if log is not None else TransferLog()
    indices = _check_indices(owner_indices, len(items))
    grids_host = torch.cat([item_grid(it) for it in items]).cpu() if items else torch.empty((0, 3), dtype=torch.int64)
    selected = [items[i] for i in indices]
    configs = [it.model_specific_data.get(DEFERRED_PREPROCESSING_KEY) for it in selected]
    if all(c is None for c in configs):
        feats = [copy_to_device(_eager_feature(it.feature), dev, log).to(dtype) for it in selected]
        return (
            torch.cat(feats, dim=0) if feats else torch.empty((0, 3, patch_size, patch_size), dtype=dtype, device=dev)
        )
    owner = _Owner(dev, policy, dtype, patch_size, log)
    if policy.mixed_batches == "raise":
        return _materialize_pr(selected, configs, owner)
    return _materialize_mixed(selected, configs, indices, grids_host, owner)


def _tower_patch_size(config: PreprocessConfig) -> int:
    if not isinstance(config, PreprocessConfig):
        raise InputTypeError(
            f"config must be the checkpoint's reference.system.config.PreprocessConfig (the owner's patch size comes "
            f"from it), got {type(config).__name__}"
        )
    return config.patch_size


class KimiK3ForConditionalGeneration:
    """A stand-in for the model class, only so the scheduler whitelist sees a bound ``get_image_feature``."""

    def __init__(
        self, config: PreprocessConfig, device: str | torch.device | None = None, policy: Policy | str = PR_33921
    ) -> None:
        self.config = config
        self.device = resolve_device(device)
        self.policy = get_policy(policy)

    def get_image_feature(self, items: Sequence[MultimodalItem]) -> torch.Tensor:
        """All images on one rank (the non-DP branch)."""
        return materialize(items, range(len(items)), self.config, self.device, self.policy)


@dataclass
class RankAccount:
    """What one rank of the group did: its images (in load order), copies and preprocessing runs."""

    rank: int
    owned: list[int]
    rows: int
    log: TransferLog = field(default_factory=TransferLog)


@dataclass
class ImageFeatures:
    """Vision-DP result: features in request order (concatenated and per image) plus per-rank accounting."""

    features: torch.Tensor
    per_image: list[torch.Tensor]
    owners: list[list[int]]
    ranks: list[RankAccount]


def _gather_in_request_order(
    outputs: list[torch.Tensor], owners: list[list[int]], patches: list[int]
) -> list[torch.Tensor]:
    """Pad each rank's rows to the max, concat (the all-gather), cut and split, restore request order."""
    max_rows = max(o.shape[0] for o in outputs)
    gathered = torch.cat([F.pad(o, (0, 0, 0, 0, 0, 0, 0, max_rows - o.shape[0])) for o in outputs], dim=0)
    per_image: list[torch.Tensor | None] = [None] * len(patches)
    for r, idxs in enumerate(owners):
        local = gathered[r * max_rows : r * max_rows + outputs[r].shape[0]]
        for i, part in zip(idxs, local.split([patches[i] for i in idxs]), strict=True):
            per_image[i] = part
    return per_image  # type: ignore[return-value]


def get_image_features(
    items: Sequence[MultimodalItem],
    num_ranks: int,
    config: PreprocessConfig,
    device: str | torch.device | None = None,
    policy: Policy | str = PR_33921,
    dtype: torch.dtype = torch.bfloat16,
    skip_move: bool | None = None,
) -> ImageFeatures:
    """Run each rank of a ``num_ranks`` group on its own copy of the items; owners materialize their images.

    ``skip_move=None`` asks the scheduler whitelist about the Kimi-K3 model
    under ``policy`` (skipped since the PR, not under PRE_PR); ``False`` models a non-whitelisted model, whose
    every rank moves every item to its device first.
    """
    patch_size = _tower_patch_size(config)
    policy = get_policy(policy)
    dev = resolve_device(device)
    patches = [int(item_grid(it).prod()) for it in items]
    owners = assign_owners(patches, num_ranks)
    if skip_move is None:
        skip_move = can_skip_pre_embed_feature_move(
            KimiK3ForConditionalGeneration(config, dev, policy).get_image_feature, policy
        )
    ranks, outputs = [], []
    for r in range(num_ranks):
        local_items = [copy.copy(it) for it in items]  # each rank received its own copy (CPU transport)
        account = RankAccount(rank=r, owned=list(owners[r]), rows=0)
        if not skip_move:
            move_items_to_device(local_items, dev, account.log)
        if owners[r]:
            out = materialize(local_items, owners[r], config, dev, policy, dtype, account.log)
        else:
            out = torch.empty((0, 3, patch_size, patch_size), dtype=dtype, device=dev)
        account.rows = out.shape[0]
        ranks.append(account)
        outputs.append(out)
    if not items:
        empty = torch.empty((0, 3, patch_size, patch_size), dtype=dtype, device=dev)
        return ImageFeatures(empty, [], owners, ranks)
    per_image = _gather_in_request_order(outputs, owners, patches)
    return ImageFeatures(torch.cat(per_image, dim=0), per_image, owners, ranks)
