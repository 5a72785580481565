"""What the vLLM family tests share: the published configs they hand the paths (the values of the research notes'
table D, written here as the checkpoints' files hold them) and the child runner (`child`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from tests.impl.children import json_child

_CLIP = {"image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
_HALF = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}
_QWEN = dict(patch_size=14, temporal_patch_size=2, merge_size=2)
CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2.5-vl": dict(
        _QWEN, min_pixels=3136, max_pixels=12845056, **_CLIP, image_processor_type="Qwen2VLImageProcessor"
    ),
    "qwen3-vl": dict(_QWEN, patch_size=16, size={"longest_edge": 16777216, "shortest_edge": 65536}, **_HALF)
    | {"image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor"},
    "internvl": dict(architectures=["InternVLChatModel"], force_image_size=448, dynamic_image_size=True)
    | {"min_dynamic_patch": 1, "max_dynamic_patch": 12},
    "glm-4.1v": dict(_QWEN, size={"shortest_edge": 12544, "longest_edge": 9633792}, do_rescale=True, **_CLIP)
    | {"image_processor_type": "Glm4vImageProcessor"},
    "mistral3": dict(_CLIP, rescale_factor=0.00392156862745098, patch_size=14, size={"longest_edge": 1540}, resample=3)
    | {"image_processor_type": "PixtralImageProcessorFast"},
    "gemma3": dict(_HALF, rescale_factor=1 / 255, size={"height": 896, "width": 896}, resample=2)
    | {"image_processor_type": "Gemma3ImageProcessor", "image_seq_length": 256},
    "gemma4": dict(do_normalize=False, do_rescale=True, image_mean=[0.0] * 3, image_std=[1.0] * 3)
    | {"rescale_factor": 1 / 255, "patch_size": 16, "image_processor_type": "Gemma4ImageProcessor"},
    # The Nemotron families (semantics §18.9): the files their classes read (Nemotron VL's reads none).
    "nemotron-vl": dict(_HALF, rescale_factor=1 / 255, do_rescale=True, do_normalize=True)
    | {"architectures": ["LlamaNemotronVLModel"]},
    "nemotron-parse": dict(_CLIP, rescale_factor=1 / 255, do_rescale=True, do_normalize=True)
    | {"image_processor_type": "NemotronParseImageProcessor"},
    "nano-nemotron-vl": {"architectures": ["NemotronH_Nano_VL_V2"], "norm_mean": _CLIP["image_mean"]}
    | {"norm_std": _CLIP["image_std"], "force_image_size": 512, "patch_size": 16},
}
CONFIGS["qwen2.5-vl"]["processor_class"] = "Qwen2_5_VLProcessor"


def rgb(width: int, height: int, seed: int = 0) -> Image.Image:
    """A noise RGB image of that size."""
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8), "RGB")


def child(scenario: str, *args: str, env: dict[str, str] | None = None, timeout: int = 600) -> dict[str, Any]:
    """Run ``tests.impl.vllm.child`` SCENARIO ARGS in a child process; the JSON it prints last."""
    return json_child("tests.impl.vllm.child", scenario, *args, env=env, timeout=timeout)
