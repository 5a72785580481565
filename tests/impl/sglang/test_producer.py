"""`impl.sglang.producer`: the real gate at its call sites, and the deferred items it produces."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from tests.impl.sglang.support import K3, L1, u8


def test_gate_cases_of_semantics_4(sgl):
    def decide(images, cfg=K3, **kw):
        return sgl.defer_decisions(images, cfg, policy=None, **kw)

    assert decide([u8(3, 32, 32)]) == [True]
    assert decide([u8(3, 1024, 1024)], L1) == [False]
    assert decide([torch.zeros(3, 32, 32)]) == [False]
    assert decide([]) == []
    assert decide([u8(3, 32, 32)], transport="cuda_ipc") == [False]
    assert decide([u8(3, 32, 32)], transport="fabric") == [False]
    assert decide([u8(3, 32, 32)], cuda_available=False) == [False]
    assert sgl.gate_bytes([u8(3, 32, 32)], K3) == (3072, 37632)
    tie = [u8(3, 112, 28)]  # 3*28*112 = 9408 = 3*28*28*4 under in_patch_limit 1
    assert sgl.gate_bytes(tie, L1) == (9408, 9408)
    assert decide(tie, L1) == [True]  # ties defer


def test_deferred_items_carry_the_contract(sgl):
    out = sgl.process([u8(3, 32, 32), Image.new("RGBA", (50, 40))], K3, policy=None)
    assert out.deferred == [True, True]
    for item, grid in zip(out.items, ([[1, 4, 4]], [[1, 4, 4]]), strict=True):
        msd = item.model_specific_data
        assert msd["image_grid_thw"].tolist() == grid and msd["image_grid_thw"].dtype == torch.int64
        cfg = msd["kimi_k3_deferred_preprocessing"]
        assert item.feature.dtype == torch.uint8 and item.feature.device.type == "cpu"
        rc = cfg["resize_config"] if isinstance(cfg, dict) else cfg.resize_config
        assert set(rc) == {"num_tokens", "new_width", "new_height", "pad_width", "pad_height"}
    assert type(out.items[0]).__module__ == "sglang.srt.managers.schedule_batch"


def test_gate_calls_name_the_call_site_and_its_images(sgl):
    from deferlab.impl.sglang import producer

    two = [u8(3, 32, 32), u8(3, 28, 20, 1)]
    calls = producer.gate_calls(sgl.source, two, K3, "cpu", True, "artifact")
    assert [(c.n_images, c.result) for c in calls] == [(1, True), (1, True)]
    (request,) = producer.gate_calls(sgl.source, two, K3, "cpu", True, "request")
    assert request.n_images == 2 and request.site.endswith("_process_mm_data_uncached")
    with pytest.raises(ValueError, match="gate_path must be one of"):
        sgl.__class__(sgl.source, gate_path="nowhere")


def test_a_broadcast_tensor_is_digested_without_materializing_and_keeps_content_identity():
    """`producer._digest`: the gate claims' broadcast images (one element, up to 16384 x 16384) are digested from
    shape, dtype and that element; equal ones are equal, another value, shape or dtype is another digest; a
    materialized tensor still digests its bytes (equal bytes, equal digest; one byte more, another)."""
    from deferlab.impl.sglang.producer import _digest

    def big(value: int, c: int = 4, side: int = 16384, dtype: torch.dtype = torch.uint8) -> torch.Tensor:
        return torch.full((1, 1, 1), value, dtype=dtype).expand(c, side, side)

    assert _digest(big(0)) == _digest(big(0))
    assert len({_digest(big(0)), _digest(big(1)), _digest(big(0, c=3)), _digest(big(0, side=16383))}) == 4
    assert _digest(big(0, dtype=torch.int8)) != _digest(big(0))
    one = torch.full((1, 1, 1), 7, dtype=torch.uint8).expand(1, 16384, 16384)  # a size-1 dimension keeps stride 1
    assert one.stride()[0] == 1 and _digest(one) == _digest(
        torch.full((1, 1, 1), 7, dtype=torch.uint8).expand(1, 16384, 16384)
    )
    a = torch.arange(24, dtype=torch.uint8).reshape(2, 3, 4)
    b = a.clone()
    assert _digest(a) == _digest(b) and _digest(a.transpose(1, 2).contiguous()) != _digest(a)
    b[1, 2, 3] += 1
    assert _digest(a) != _digest(b)
    assert _digest(torch.zeros(1, 1, 1, dtype=torch.uint8)) == _digest(torch.zeros(1, 1, 1, dtype=torch.uint8))
