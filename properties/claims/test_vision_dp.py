"""Vision DP run whole (``real_code``): on every rank, the sharded runner returns each image's embeddings exactly as
the tower gives them for that image alone, in request order (semantics §7.3).

Why: the claims stop each rank at its owner's loader (C5-C7 ask who preprocesses
what), so the rest of SGLang's ``run_dp_sharded_mrope_vision_model`` (the tower
call per rank, the empty-rank branch, padding to the longest rank, the
all-gather, the one-image broadcast, the reassembly) ran under no claim: a
mutation campaign's largest group of survivors. Here the runner runs to its
return on every rank (under ``--sglang``: `impl.sglang.vision_dp`, one thread
per rank; on the model: `impl.vision_dp`) with a stand-in tower whose output for
an image depends on every one of its patches and on each token's position, so
any slice taken from the wrong offset, a wrong token count, a lost or swapped
image changes the bits. Uneven images, one to five of them, on one to four
ranks; the three tower conventions the runner knows (``rope_2d``:
MoonViT with keyword grids; ``rope_2d_packed``: grids positional; ``rope_3d``: a
Qwen-style merger whose output width is not its ViT's hidden size); the features
given whole (``pixel_values``) or by a local loader; the rope type as a string
read from a config (equal, not the same object).
"""

from __future__ import annotations

import math
import types
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.real_code

CHANNELS, PATCH = 3, 2
ROW = CHANNELS * PATCH * PATCH  # one patch's values


class StandInTower:
    """A deterministic vision tower in the runner's calling conventions (it refuses any other).

    Per image (``embed``): the patches grouped in merge windows (``m x m`` neighbours, raster order), each token
    its window's patches plus ``1000 * (token + 1)`` plus the image's whole sum: every value depends on every
    patch and on its position. ``rope_2d`` / ``rope_2d_packed``: (tokens, m*m, row) as MoonViT's merger feeds
    the projector; ``rope_3d``: (tokens, out) through a fixed projection, ``out_hidden_size`` != the ViT's
    ``config.hidden_size`` (as Qwen2.5-VL's merger). MoonViT returns one tensor per image (``returns_list``),
    a Qwen-style tower one tensor (the runner's one-rank ``rope_3d`` path returns the tower's answer as it is).
    """

    def __init__(self, rope_type: str, merge: int, pool_temporal: bool, returns_list: bool) -> None:
        self.rope_type, self.m, self.pool, self.returns_list = rope_type, merge, pool_temporal, returns_list
        self.merge_kernel_size = (merge, merge)
        self.spatial_merge_size = merge
        self.device = torch.device("cpu")
        self.out = 5
        self.config = types.SimpleNamespace(hidden_size=ROW if rope_type != "rope_3d" else ROW + 3)
        if rope_type == "rope_3d":
            self.out_hidden_size = self.out
        gen = torch.Generator().manual_seed(7)
        self.proj = torch.randn(merge * merge * ROW, self.out, generator=gen, dtype=torch.float64)

    def embed(self, x: torch.Tensor, grid: list[int]) -> torch.Tensor:
        t, h, w = grid
        m = self.m
        rows = x.reshape(t * h * w, ROW).to(torch.float64)
        win = rows.reshape(t, h // m, m, w // m, m, ROW).permute(0, 1, 3, 2, 4, 5).reshape(t, -1, m * m, ROW)
        win = win.sum(0) if self.pool else win.reshape(-1, m * m, ROW)
        pos = 1000.0 * torch.arange(1, win.shape[0] + 1, dtype=torch.float64)[:, None, None]
        tokens = win + pos + rows.sum()
        if self.rope_type == "rope_3d":
            return (tokens.reshape(tokens.shape[0], -1) @ self.proj).to(torch.float32)
        return tokens.to(torch.float32)

    def __call__(self, pixel_values: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.rope_type == "rope_2d":
            if args or set(kwargs) - {"grid_hw", "max_seqlen", "grid_thw_list"} or "grid_hw" not in kwargs:
                raise TypeError(f"rope_2d tower: called with {len(args)} positional and {sorted(kwargs)}")
            grids = kwargs["grid_hw"].tolist()
            if "grid_thw_list" in kwargs and kwargs["grid_thw_list"] != grids:
                raise ValueError(f"grid_thw_list {kwargs['grid_thw_list']} != grid_hw {grids}")
            if kwargs["max_seqlen"] != max(math.prod(g) for g in grids):
                raise ValueError(f"max_seqlen {kwargs['max_seqlen']} for grids {grids}")
        elif self.rope_type == "rope_2d_packed" or args:
            if len(args) != 1 or kwargs:
                raise TypeError(f"{self.rope_type} tower: called with {len(args)} positional and {sorted(kwargs)}")
            grids = args[0].tolist()
        else:  # rope_3d, one rank: grid_thw by keyword
            if set(kwargs) != {"grid_thw"}:
                raise TypeError(f"rope_3d tower: called with {sorted(kwargs)}")
            grids = kwargs["grid_thw"].tolist()
        counts = [math.prod(g) for g in grids]
        if sum(counts) != pixel_values.shape[0]:
            raise ValueError(f"{pixel_values.shape[0]} patch rows for grids {grids}")
        parts = [self.embed(x, g) for x, g in zip(pixel_values.split(counts), grids, strict=True)]
        return parts if self.returns_list else torch.cat(parts)


@st.composite
def dp_cases(draw: st.DrawFn) -> dict[str, Any]:
    """One runner call: images (uneven grids, features; sometimes two alike), ranks, tower convention, inputs."""
    rope = draw(st.sampled_from(["rope_2d", "rope_2d", "rope_2d_packed", "rope_3d"]))
    merge = draw(st.sampled_from([1, 2])) if rope == "rope_3d" else 2
    pool = rope != "rope_3d"
    n = draw(st.integers(1, 5))
    grids = [
        [draw(st.integers(1, 2)) if not pool else 1, merge * draw(st.integers(1, 3)), merge * draw(st.integers(1, 3))]
        for _ in range(n)
    ]
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    features = [torch.randn(math.prod(g), CHANNELS, PATCH, PATCH, generator=gen) for g in grids]
    if n > 1 and draw(st.booleans()):  # an image twice: only positions tell them apart
        j = draw(st.integers(1, n - 1))
        grids[j], features[j] = list(grids[0]), features[0].clone()
    return {
        "grids": grids,
        "features": features,
        "ranks": draw(st.integers(1, 4)),
        "rope": rope,
        "merge": merge,
        "pool": pool,
        "whole": draw(st.booleans()),
        "returns_list": rope != "rope_3d" and draw(st.booleans()),  # MoonViT: a list per image; Qwen: one tensor
        "config_string": draw(st.booleans()),
    }


def _case(grids: list[list[int]], ranks: int, rope: str = "rope_2d", merge: int = 2, **kw: Any) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(3)
    feats = [torch.randn(math.prod(g), CHANNELS, PATCH, PATCH, generator=gen) for g in grids]
    base = {"whole": False, "returns_list": rope != "rope_3d", "config_string": False, "pool": rope != "rope_3d"}
    return {"grids": grids, "features": feats, "ranks": ranks, "rope": rope, "merge": merge, **base, **kw}


def check_sharded_equals_alone(impl: Any, case: dict[str, Any]) -> None:
    if not hasattr(impl, "vision_dp_embeddings"):  # an optional seam method (the model and SGLang's driver have it)
        pytest.skip("this implementation has no vision_dp_embeddings (the vision-DP runner run whole)")
    tower = StandInTower(case["rope"], case["merge"], case["pool"], case["returns_list"])
    rope = "".join(list(case["rope"])) if case["config_string"] else case["rope"]  # equal, another object
    want = torch.cat([tower.embed(x, g) for x, g in zip(case["features"], case["grids"], strict=True)])
    got = impl.vision_dp_embeddings(
        [f.clone() for f in case["features"]],
        [list(g) for g in case["grids"]],
        case["ranks"],
        tower,
        rope_type=rope,
        pool_temporal_dimension=case["pool"],
        whole=case["whole"],
    )
    assert len(got) == case["ranks"], f"{len(got)} rank outputs for {case['ranks']} ranks"
    for r, out in enumerate(got):
        out = torch.as_tensor(out)
        assert tuple(out.shape) == tuple(want.shape), (
            f"rank {r}: embeddings {tuple(out.shape)}, want {tuple(want.shape)}"
        )
        same = np.ascontiguousarray(out.float().numpy()).view(np.uint32) == want.numpy().view(np.uint32)
        if not same.all():
            row = int(np.argwhere(~same)[0][0])
            raise AssertionError(f"rank {r}: {int((~same).sum())} values differ from each image alone, first in row {row}")  # fmt: skip


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
@given(case=dp_cases())
@example(case=_case([[1, 2, 2], [1, 4, 2], [1, 2, 6], [1, 2, 2]], ranks=2))
@example(case=_case([[1, 2, 4], [1, 6, 2], [1, 2, 2]], ranks=3, whole=True, returns_list=False))
@example(case=_case([[1, 2, 2]], ranks=3))  # one image: the broadcast
@example(case=_case([[1, 2, 2], [1, 4, 4]], ranks=4, rope="rope_2d_packed"))
@example(case=_case([[2, 1, 1], [1, 2, 2], [1, 1, 1]], ranks=2, rope="rope_3d", merge=1, whole=True))
@example(case=_case([[1, 2, 2], [1, 4, 2], [2, 2, 4]], ranks=4, rope="rope_3d"))
@example(case=_case([[1, 2, 2], [1, 4, 2]], ranks=1, rope="rope_3d"))
@example(case=_case([[1, 1, 1], [1, 2, 2]], ranks=2, rope="rope_3d", merge=1))  # a rank whose one image is one patch
@example(case=_case([[1, 2, 2], [1, 4, 2]], ranks=1, rope="rope_2d_packed"))
@example(case=_case([[1, 2, 2], [1, 4, 2]], ranks=2, config_string=True))
def test_sharded_vision_dp_equals_each_image_alone(impl, case):
    """Every rank returns each image's tower embeddings as for that image alone, in request order."""
    check_sharded_equals_alone(impl, case)
