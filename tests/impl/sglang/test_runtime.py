"""`impl.sglang.runtime`: how SGLang's functions are called on a CPU (patches recorded and undone, locals read)."""

from __future__ import annotations

import torch

from deferlab.impl.sglang import runtime, topology


def test_a_patch_is_recorded_and_undone(sgl):
    sb = sgl.source.module("managers.schedule_batch")
    real = sb.MultimodalDataItem
    with runtime.patched(sgl.source, sb, "MultimodalDataItem", "stub", "a test swaps it"):
        assert sb.MultimodalDataItem == "stub"
    assert sb.MultimodalDataItem is real
    rec = [r for r in sgl.source.stand_ins if r.module == f"{sb.__name__}.MultimodalDataItem"]
    assert rec and rec[0].kind == "patched" and rec[0].why == "a test swaps it"


def test_the_topology_is_answered_only_inside_the_block(sgl):
    mod = sgl.source.module("managers.schedule_batch")
    state = topology.parallel(4, dp_size=2, enable_dp_attention=True)
    with runtime.answer_topology(sgl.source, mod, ["get_parallel"], state, "test topology"):
        assert mod.get_parallel() is state and mod.get_parallel().attn_tp_size == 2
    assert mod.get_parallel is not None and getattr(mod, "get_parallel", None) is not state


def test_capture_locals_and_the_tiny_item(sgl):
    def f(x):
        y = x * 2
        return y + 1

    assert runtime.capture_locals(f, ["y"], 3) == (7, {"y": 6})
    item = runtime.tiny_item(sgl.source.module("managers.schedule_batch"))
    assert item.feature.shape == (3, 14, 14) and item.feature.dtype == torch.uint8
    assert item.model_specific_data["image_grid_thw"].tolist() == [[1, 1, 1]]
    assert type(item).__module__ == "sglang.srt.managers.schedule_batch"


def test_the_eager_stager_keeps_a_pil_image_on_the_asked_device(sgl):
    """SGLang's ``_k3_to_cuda_chw`` hands a PIL image to ``to_chw_uint8(image, device="cuda")``: the stager must
    send it to the device it was built for (a regression: the override once passed its own "cuda" on)."""
    import numpy as np
    from PIL import Image

    stage = runtime.eager_stager(sgl.source, "cpu")
    out = stage(Image.fromarray(np.full((5, 7, 3), 9, np.uint8), "RGB"))
    assert out.device.type == "cpu" and tuple(out.shape) == (3, 5, 7) and int(out[0, 0, 0]) == 9
