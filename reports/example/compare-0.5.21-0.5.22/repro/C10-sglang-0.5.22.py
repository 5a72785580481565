# deferlab reproducer (format 1): claim C10 on sglang-0.5.22
# Claim: C10: The gate's decision is stable and per-image sensible: an image is deferred iff it alone would be,
#   and neighbours of a size decide alike.
# System: sglang-0.5.22 (wheel 0.5.22, commit -)
# Spec: 0.5.22
# Flaw: the request path decides for all of a request's images at once
# Recorded failure: AssertionError: at call site 'request': in the request [False, False], alone [False, True] (an
#   image that alone defers is kept eager)
# Counterexample: deferlab's minimal counterexample, from deferlab compare 0.5.21 0.5.22 (HEAD, profile ci):
#   ["PreprocessConfig(patch_size=14, merge_kernel_size=2, in_patch_limit=65536, patch_limit_on_one_side=512,
#   fixed_output_tokens=None, image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.5, 0.5),
#   background=BackgroundConfig(pattern='chessboard', square_size=8, white_value=255, gray_value=180,
#   square_on_top_left=True), fill_stage='after_resize', max_pixels=178956970, name='kimi-k3')", [[3, 8192, 8192],
#   [3, 32, 32]], 'request']
# Written by: deferlab 0.1.0 (commit dfdb2a6013b1)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's
#   loader: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of claim C10: the request path decides for all of a request's images at once."""

import types

import torch

import sglang.srt.multimodal.processors.kimi_k3 as kimi_k3

GEOMETRY = {'patch_size': 14, 'merge_kernel_size': 2, 'in_patch_limit': 65536, 'patch_limit_on_one_side': 512, 'fixed_output_tokens': None}
SHAPES = [(3, 8192, 8192), (3, 32, 32)]  # (channels, width, height) of the request's images

def _processor(**geometry):
    """A KimiK3ImageProcessor as SGLang's tests build one: object.__new__ and the attributes the gate reads."""
    proc = object.__new__(kimi_k3.KimiK3ImageProcessor)
    proc.mm_feature_transport = "cpu"  # the deferred path exists only under CPU transport
    proc._processor = types.SimpleNamespace(preprocess_config=types.SimpleNamespace(**geometry))
    return proc


def _image(channels, width, height):
    """A CHW uint8 tensor of that size allocating one byte (the gate reads only shape and dtype)."""
    return torch.zeros((1, 1, 1), dtype=torch.uint8).expand(channels, height, width)


def test_c10_an_image_is_deferred_iff_it_alone_would_be(monkeypatch):
    """The request path (KimiK3ImageProcessor._process_mm_data_uncached) asks the gate once for all of a
    request's images; each image's decision must still be the one it gets alone."""
    monkeypatch.setattr(kimi_k3, "is_cuda", lambda: True)  # the gate defers only on a CUDA server
    proc = _processor(**GEOMETRY)
    images = [_image(*shape) for shape in SHAPES]
    together = [proc._should_defer_gpu_preprocessing(images)] * len(images)
    alone = [proc._should_defer_gpu_preprocessing([image]) for image in images]
    assert together == alone, f"in the request {together}, alone {alone}"
