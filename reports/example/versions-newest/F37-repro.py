# deferlab reproducer (format 1): claim C4 on vllm-0.34.0
# Claim: C4: Deferred output is BF16 bit-identical to eager output on the same device, for any owner partition.
# System: vllm-0.34.0 (vllm 0.34.0, commit -)
# Spec: 0.34.0
# Flaw: the device-finished values differ from the host-finished ones after the BF16 cast
# Recorded failure: AssertionError: vllm-0.34.0 (device-normalized) vs vllm-0.34.0 (host-normalized): 3 of 768
#   levels differ after BF16 (first level 127 channel 0: -0.0039215087890625 vs -0.003921568393707275)
# Counterexample: deferlab's minimal counterexample, from versions.json: kimi-k3
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --vllm SPEC (deferlab's
#   loader: no vLLM dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F37 (C4 on vllm-0.34.0): the device-finished values differ from the host-finished ones after the BF16 cast."""

import json
import os
import tempfile
import types

import numpy as np
import torch

from vllm.config import CompilationConfig, set_current_vllm_config
from vllm.model_executor.layers.fusion.mm_input_norm import build_mm_input_norm

from vllm.transformers_utils.processors.kimi_k25_vision_fused import KimiK25FusedVisionProcessor as ImageProcessor

# The checkpoint's media_proc_cfg (deferlab's 'kimi-k3' profile):
CFG = {'temporal_merge_kernel_size': 1, 'in_patch_limit_each_frame': None, 'in_patch_limit_video': None, 'patch_size': 14, 'merge_kernel_size': 2, 'in_patch_limit': 65536, 'patch_limit_on_one_side': 512, 'fixed_output_tokens': None, 'image_mean': [0.5, 0.5, 0.5], 'image_std': [0.5, 0.5, 0.5], 'transparent_bg_config': {'pattern': 'chessboard', 'chessboard_square_size': 8, 'chessboard_white_value': 255, 'chessboard_gray_value': 180, 'chessboard_square_on_top_left': True}, 'transparent_bg_fill_stage': 'after_resize', 'max_pixels': 178956970}
NORM_CONFIG = {'media_proc_cfg': CFG}
LAYOUT = 'pcl'
LEVEL = 127
# LEVEL: the level deferlab recorded

_FOLDERS = []  # the script's temporary folders, each removed when the script ends


def _checkpoint_folder(config=None):
    """A folder holding ``config`` (default CFG) as the checkpoint's preprocessor_config.json (what the release
    reads it from)."""
    _FOLDERS.append(tempfile.TemporaryDirectory(prefix="deferlab-repro-"))
    folder = _FOLDERS[-1].name
    with open(os.path.join(folder, "preprocessor_config.json"), "w") as f:
        json.dump(CFG if config is None else config, f)
    return folder


def _device_levels(dtype):
    """What vLLM's device normalization gives every level of every channel (3, 256): build_mm_input_norm, as the
    model builds it (_load_norm_params reads the checkpoint's config; layout LAYOUT), then FusedMMInputNorm's
    forward_native (the CPU path) from uint8 into ``dtype``."""
    model_config = types.SimpleNamespace(
        model=_checkpoint_folder(NORM_CONFIG), revision=None, hf_image_processor_config=NORM_CONFIG,
        multimodal_config=types.SimpleNamespace(mm_device_do_normalize=True),
    )
    with set_current_vllm_config(types.SimpleNamespace(compilation_config=CompilationConfig())):
        norm = build_mm_input_norm(model_config, layout=LAYOUT)
    u = torch.arange(256, dtype=torch.uint8)
    x = u.reshape(1, 1, 16, 16).expand(1, 3, 16, 16) if LAYOUT == "bchw" else u.repeat(3).reshape(1, 768)
    return norm.forward_native(x.contiguous(), dtype).float().numpy().reshape(3, 256)


def _host_levels():
    """vLLM's host-finished values (mm_device_do_normalize off): its own Kimi-K3 image processor (KimiK25FusedVisionProcessor)
    built from the checkpoint's media_proc_cfg normalizes on the host through its table of the 256 levels
    (normalize_lut), float32 (3, 256)."""
    processor = ImageProcessor.from_dict(NORM_CONFIG)
    return np.ascontiguousarray(np.asarray(processor.normalize_lut, np.float32).T)


def test_c4_device_finished_equals_host_finished_after_bf16():
    """vLLM's default path finishes the normalization on the device (FusedMMInputNorm); its host-finished path must
    give the tower the same BF16 values, at the level deferlab recorded (LEVEL), in every channel."""
    device = _device_levels(torch.bfloat16)[:, LEVEL]
    host = torch.from_numpy(np.ascontiguousarray(_host_levels()[:, LEVEL])).to(torch.bfloat16).float().numpy()
    assert (device.view(np.int32) == host.view(np.int32)).all(), (
        f"level {LEVEL}: device-finished {device.tolist()} != host-finished {host.tolist()} after BF16"
    )
