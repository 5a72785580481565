# deferlab reproducer (format 1): claim C11 on sglang-0.5.23
# Claim: C11: Every input the gate admits can be staged and materialized with its true dimensions.
# System: sglang-0.5.23 (sglang 0.5.23, commit -)
# Spec: 0.5.23
# Flaw: the gate admits a raw array it cannot measure
# Recorded failure: IndexError: tuple index out of range
# Counterexample: deferlab's minimal counterexample, from versions.json: ArrayImage(torch (4, 5) torch.uint8,
#   layout=HW, w=5, h=4, c=1)
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's
#   loader: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F21 (C11 on 0.5.23): the gate admits a raw array it cannot measure."""

import types

import torch

import sglang.srt.multimodal.processors.kimi_k3 as kimi_k3
from sglang.srt.multimodal.kimi_k3_image_processing import to_chw_uint8

GEOMETRY = {'patch_size': 14, 'merge_kernel_size': 2, 'in_patch_limit': 16384, 'patch_limit_on_one_side': 512, 'fixed_output_tokens': None}
SHAPE = (4, 5)  # a raw uint8 array as a client may send it (HW: width 5, height 4)

def _processor(**geometry):
    """A KimiK3ImageProcessor as SGLang's tests build one: object.__new__ and the attributes the gate reads."""
    proc = object.__new__(kimi_k3.KimiK3ImageProcessor)
    proc.mm_feature_transport = "cpu"  # the deferred path exists only under CPU transport
    proc._processor = types.SimpleNamespace(preprocess_config=types.SimpleNamespace(**geometry))
    return proc


def test_c11_the_gate_measures_or_refuses_what_it_admits(monkeypatch):
    """The gate admits any uint8 tensor; it must decide (and then stage the true size) or refuse it clearly."""
    monkeypatch.setattr(kimi_k3, "is_cuda", lambda: True)  # the gate defers only on a CUDA server
    image = torch.zeros(SHAPE, dtype=torch.uint8)
    try:
        defer = _processor(**GEOMETRY)._should_defer_gpu_preprocessing([image])
    except (ValueError, TypeError):
        return  # a clear refusal of the input is fine
    assert isinstance(defer, bool)
    if defer:
        staged = to_chw_uint8(image)
        assert tuple(staged.shape[1:]) == (4, 5), f"staged {tuple(staged.shape)}"
