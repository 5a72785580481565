"""The scheduler side: delivery to the ranks, the owner's loader, and one vision-DP group, per SGLang.

What runs for real: the model's ``get_image_feature`` preamble and the loader
it builds (deferred materialization, grid and batch checks), the DP runner
``run_dp_sharded_mrope_vision_model`` up to the loader call on every rank (so
each rank's owner list is the runner's own ``image_idxs_local``), and the
scheduler whitelist. What is modelled here, and said so in `provenance`:
the CPU transport (a pickle round trip per rank: SGLang pickles across nodes,
its shared-memory and msgspec paths need its serving stack), the all-gather
that puts the ranks' outputs back in request order, and the H2D copy count
(there is no device copy on a CPU machine).
"""

from __future__ import annotations

import math
import pickle
import types
from collections.abc import Sequence
from typing import Any

import torch

from deferlab.impl.sglang import runtime, topology
from deferlab.impl.sglang.sources import Source
from deferlab.reference.system.validate import check_positive_int


class _Stop(Exception):
    """Ends the DP runner once the rank's loader has returned (the tower and all-gather need a real group)."""


def deliver(items: Sequence[Any], num_ranks: int) -> list[list[Any]]:
    """One deserialized copy of the items per rank (modelled: a pickle round trip, SGLang's cross-node form)."""
    num_ranks = check_positive_int("num_ranks", num_ranks)
    blob = pickle.dumps(list(items))
    return [pickle.loads(blob) for _ in range(num_ranks)]


def materialize(
    source: Source, items: Sequence[Any], owner_indices: Sequence[int], device: str, patch_size: int
) -> torch.Tensor:
    """The real loader ``get_image_feature`` builds, called with the owner's indices in that order."""
    loader = runtime.capture_loader(source, list(items), device, patch_size)
    return loader(list(owner_indices))


def can_skip_pre_embed(source: Source, model_class_name: str) -> bool:
    """SGLang's ``_can_skip_pre_embed_feature_move`` for a model class of that name's ``get_image_feature``.

    It lives in ``managers.mm_schedule`` from 0.5.18 and in ``managers.mm_utils`` before (`Source.whitelist_module`).
    """
    if model_class_name == "KimiK3ForConditionalGeneration":
        model = runtime.make_model(source, "cpu", 14)
    else:

        def get_image_feature(self: Any, items: Any) -> None:
            return None

        model = type(model_class_name, (), {"get_image_feature": get_image_feature})()
    return skips_pre_embed_move(source, model.get_image_feature)


def skips_pre_embed_move(source: Source, fn: Any) -> bool:
    """SGLang's own ``_can_skip_pre_embed_feature_move`` asked about any callable ``fn``."""
    return bool(source.module(source.whitelist_module)._can_skip_pre_embed_feature_move(fn))


def assign_owners(source: Source, sizes: Sequence[int], num_ranks: int) -> list[list[int]]:
    """SGLang's ``get_dp_encoder_lb_assignment``, split into each rank's images in the order it got them."""
    mmu = source.module("multimodal.mm_utils")
    shuffle, counts, _ = mmu.get_dp_encoder_lb_assignment(list(sizes), num_ranks)
    owners, start = [], 0
    for c in counts:
        owners.append(list(shuffle[start : start + c]))
        start += c
    return owners


def local_item_indices(source: Source, sizes: Sequence[int], rank: int, world_size: int) -> list[int] | None:
    """``EncoderPreprocessOutput.local_item_indices`` (the EPD owner list), or None where the version lacks it."""
    if not source.has("multimodal.encoder_preprocessing"):
        return None
    ep = source.module("multimodal.encoder_preprocessing")
    cls = getattr(ep, "EncoderPreprocessOutput", None)
    if cls is None or not hasattr(cls, "local_item_indices"):
        return None
    sb = source.module("managers.schedule_batch")
    items = [sb.MultimodalDataItem(modality=sb.Modality.IMAGE) for _ in sizes] or [
        sb.MultimodalDataItem(modality=sb.Modality.IMAGE)
    ]
    out = cls({}, mm_items=items, item_sizes=list(sizes) or [1], materialize_local_items=lambda local: [])
    return list(out.local_item_indices(rank, world_size))


def vision_dp(
    source: Source, items: Sequence[Any], num_ranks: int, device: str, patch_size: int
) -> types.SimpleNamespace:
    """Every rank of one attention-TP group: the runner picks its images, its loader materializes them."""
    mmu = source.module("multimodal.mm_utils")
    # an eager-only release's items carry no deferred key: its owners preprocess nothing (the producer did)
    key = source.deferred_key
    skip = can_skip_pre_embed(source, "KimiK3ForConditionalGeneration")
    grids = [_grid(item) for item in items]
    ranks, owners, outputs = [], [], []
    for r, local in enumerate(deliver(items, num_ranks)):
        loader = runtime.capture_loader(source, local, device, patch_size)
        seen: dict[str, Any] = {}

        def wrapped(indices: list[int], _loader: Any = loader, _seen: dict = seen) -> torch.Tensor:
            _seen["indices"] = list(indices)
            _seen["out"] = _loader(list(indices))
            raise _Stop

        ns = topology.parallel(num_ranks, attn_tp_size=num_ranks, tp_rank=r)
        why = "this rank's attention-TP size and rank for the DP runner (as SGLang's tests patch it)"
        with runtime.patched(source, mmu, "get_parallel", lambda ns=ns: ns, why):
            try:
                mmu.run_dp_sharded_mrope_vision_model(
                    _TowerRaises(),
                    None,
                    grids,
                    rope_type="rope_2d",
                    pool_temporal_dimension=True,
                    pass_grid_thw_list=True,
                    load_local_pixel_values=wrapped,
                    pixel_values_device=torch.device(device),
                    pixel_values_dtype=torch.bfloat16,
                )
            except _Stop:
                pass
        mine = seen.get("indices", [])
        owners.append(mine)
        outputs.append(seen.get("out"))
        # modelled: a whitelisted model copies only the owner's images (inside its loader); any other model
        # has _move_items_to_device copy every tensor feature on every rank first
        moved = len(mine) if skip else sum(isinstance(it.feature, torch.Tensor) for it in local)
        log = types.SimpleNamespace(
            h2d_copies=moved,
            images_preprocessed=sum(key in local[i].model_specific_data for i in mine),
        )
        ranks.append(types.SimpleNamespace(rank=r, owned=mine, log=log))
    per_image: list[Any] = [None] * len(items)
    for mine, out in zip(owners, outputs, strict=True):
        if not mine:
            continue
        counts = [math.prod(grids[i]) for i in mine]
        for i, part in zip(mine, out.split(counts), strict=True):
            per_image[i] = part
    return types.SimpleNamespace(per_image=per_image, owners=owners, ranks=ranks, skip_pre_embed_move=skip)


class _TowerRaises:
    """The tower as the runner sees it on a rank that loads nothing: reaching it ends the run."""

    def __getattr__(self, name: str) -> Any:
        raise _Stop

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _Stop


def _grid(item: Any) -> list[int]:
    msd = item.model_specific_data
    grid = msd.get("image_grid_thw")
    if grid is None:
        grid = msd["grid_thws"]
    return [int(v) for v in grid[0].tolist()]
