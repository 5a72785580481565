"""SGLang's vision-DP runner run whole: ``run_dp_sharded_mrope_vision_model`` on every rank of one attention-TP
group, the tower and the group's collectives stood in for.

Why a module of its own: `consumer.vision_dp` stops each rank at its loader
(what C4-C7 ask: who owns what, what it materializes), so the rest of the
runner (the tower call per rank, the empty-rank branch, padding to the longest
rank, the all-gather, the one-image broadcast and the reassembly in request
order) was never run. Here every rank runs the runner to its return, each in a
thread of its own (a real group needs one process per rank and NCCL/gloo), with
``get_parallel()`` answering per thread (its attention-TP size, rank and group),
and a group whose ``all_gather`` / ``broadcast`` exchange the ranks' tensors
through a barrier: a rank's tensor is exactly what it passed, in rank order, as
torch.distributed gives it. The tower is the caller's (a property's stand-in:
SGLang's towers need weights and CUDA).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

from deferlab.impl.sglang import runtime
from deferlab.impl.sglang.sources import Source
from deferlab.reference.system.validate import check_positive_int

BARRIER_SECONDS = 60.0  # a rank that never reaches a collective ends the run instead of hanging it


class ThreadGroup:
    """An attention-TP group of ``size`` threads: ``all_gather`` (concatenation in rank order) and ``broadcast``
    (in place, from ``src``), each a rendezvous of every rank."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._barrier = threading.Barrier(size, timeout=BARRIER_SECONDS)
        self._slots: list[Any] = [None] * size
        self._rank = threading.local()

    def bind(self, rank: int) -> None:
        self._rank.value = rank

    @property
    def rank(self) -> int:
        return int(self._rank.value)

    def _exchange(self, value: Any) -> list[Any]:
        self._slots[self.rank] = value
        self._barrier.wait()
        seen = list(self._slots)
        self._barrier.wait()  # nobody writes the next collective's slot before every rank has read this one
        return seen

    def all_gather(self, tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
        parts = self._exchange(tensor)
        shapes = {tuple(p.shape[:dim]) + tuple(p.shape[dim + 1 :]) for p in parts}
        if len(shapes) != 1 or len({p.shape[dim] for p in parts}) != 1:
            raise RuntimeError(f"all_gather: the ranks' tensors differ in shape: {[tuple(p.shape) for p in parts]}")
        return torch.cat([p.contiguous() for p in parts], dim=dim)

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        parts = self._exchange(tensor)
        if tuple(parts[src].shape) != tuple(tensor.shape) or parts[src].dtype != tensor.dtype:
            raise RuntimeError(
                f"broadcast: rank {self.rank} holds {tuple(tensor.shape)}, src {tuple(parts[src].shape)}"
            )
        if self.rank != src:
            tensor.copy_(parts[src])
        self._barrier.wait()  # src's tensor is read by every rank before src goes on
        return tensor


def run_sharded(
    source: Source,
    features: Sequence[torch.Tensor],
    grids: Sequence[Sequence[int]],
    num_ranks: int,
    tower: Any,
    *,
    rope_type: str = "rope_2d",
    pool_temporal_dimension: bool = True,
    whole: bool = False,
    device: str = "cpu",
) -> list[torch.Tensor]:
    """Each rank's return of the real runner for images with these per-image patch ``features`` and ``grids``.

    ``whole``: the runner gets every image's features concatenated (``pixel_values``, sliced by the runner);
    otherwise a local loader gives a rank its own images' rows, as Kimi-K3's does.
    """
    num_ranks = check_positive_int("num_ranks", num_ranks)
    mmu = source.module("multimodal.mm_utils")
    grid_list = [[int(v) for v in g] for g in grids]
    dtype = features[0].dtype if features else torch.float32
    pixel_values = torch.cat(list(features)) if whole and features else None

    def loader(indices: list[int]) -> torch.Tensor:
        return torch.cat([features[i] for i in indices])

    group = ThreadGroup(num_ranks)
    answers = threading.local()

    def get_parallel() -> Any:
        return answers.value

    results: list[Any] = [None] * num_ranks

    def rank_main(rank: int) -> None:
        group.bind(rank)
        answers.value = _Parallel(num_ranks, rank, group)
        try:
            results[rank] = mmu.run_dp_sharded_mrope_vision_model(
                tower,
                pixel_values,
                grid_list,
                rope_type=rope_type,
                pool_temporal_dimension=pool_temporal_dimension,
                load_local_pixel_values=None if whole else loader,
                pixel_values_device=torch.device(device),
                pixel_values_dtype=dtype,
                pass_grid_thw_list=True,
            )
        except BaseException as e:  # noqa: BLE001 - handed to the caller, the other ranks stopped
            results[rank] = e
            group._barrier.abort()

    why = "each rank's attention-TP size, rank and group, answered per thread (the runner's collectives)"
    with runtime.patched(source, mmu, "get_parallel", get_parallel, why):
        threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(num_ranks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(BARRIER_SECONDS * 4)
    errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, threading.BrokenBarrierError)]
    if errors:
        raise errors[0]
    broken = [r for r in results if isinstance(r, BaseException) or r is None]
    if broken:
        raise RuntimeError(f"vision DP: a rank never returned ({broken[0]!r})")
    return list(results)


class _Parallel:
    """What ``get_parallel()`` answers on one rank of the group (the fields the runner reads)."""

    def __init__(self, size: int, rank: int, group: ThreadGroup) -> None:
        self.attn_tp_size = size
        self.attn_tp_rank = rank
        self.attn_tp_group = group
        self.tp_size = size
        self.tp_rank = rank
