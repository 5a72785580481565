"""The checkpoint files vLLM's video path reads for Qwen2.5-VL and Qwen3-VL, and the processor it builds from them
(semantics §20.6).

Why a folder: vLLM picks a video loader by the checkpoint's video processor class, which it reads from the
checkpoint's files (``get_video_processor_cls_name_from_config``: ``video_preprocessor_config.json``, then
``preprocessor_config.json``, then ``config.json``'s ``model_type``), and transformers builds the video processor
from the same files (``AutoVideoProcessor.from_pretrained``). So deferlab writes the published files into a folder
once per process and lets both read them, as they would read a downloaded checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from deferlab.impl.loader import owned
from deferlab.reference.system.family_configs import published_config
from deferlab.reference.system.requests import VIDEO_CONFIGS

# Qwen3-VL ships its video processor's own file (Qwen/Qwen3-VL-8B-Instruct video_preprocessor_config.json): a
# budget over all frames of 768 tokens' worth of 32x32 pixels per frame x 32 frames, 4,096 pixels at least; the
# description holds its values (semantics §20.4).
QWEN3_VIDEO_CONFIG: dict[str, Any] = dict(VIDEO_CONFIGS["qwen3-vl"][0])


@dataclass(frozen=True)
class VideoFamily:
    """Where a Qwen family's video pieces are: its display name, ``config.json``'s ``model_type``, the files its
    checkpoint ships, and the release's processing info class (vLLM's own timestamps and size kwargs)."""

    display: str
    model_type: str
    files: tuple[tuple[str, str], ...]  # (file name, JSON text)
    info_module: str
    info_class: str


def _files(model_type: str, **named: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The checkpoint's files as (name, JSON): ``config.json`` with its ``model_type`` and the named configs."""
    out = {"config.json": {"model_type": model_type}}
    out.update({f"{k}.json": v for k, v in named.items()})
    return tuple((name, json.dumps(body, sort_keys=True)) for name, body in out.items())


FAMILIES: dict[str, VideoFamily] = {
    # Qwen2.5-VL ships no video config: transformers and vLLM both fall back to preprocessor_config.json (its
    # min/max pixels become the video processor's size) and to model_type qwen2_5_vl -> Qwen2VLVideoProcessor.
    "qwen2.5-vl": VideoFamily(
        "Qwen2.5-VL",
        "qwen2_5_vl",
        _files("qwen2_5_vl", preprocessor_config=published_config("qwen2.5-vl")),
        "vllm.model_executor.models.qwen2_5_vl",
        "Qwen2_5_VLProcessingInfo",
    ),
    "qwen3-vl": VideoFamily(
        "Qwen3-VL",
        "qwen3_vl",
        _files(
            "qwen3_vl",
            preprocessor_config=published_config("qwen3-vl"),
            video_preprocessor_config=QWEN3_VIDEO_CONFIG,
        ),
        "vllm.model_executor.models.qwen3_vl",
        "Qwen3VLProcessingInfo",
    ),
}
SOURCES = {
    "qwen2.5-vl": "Qwen/Qwen2.5-VL-7B-Instruct: no video_preprocessor_config.json; preprocessor_config.json as "
    "reference.system.family_configs.PUBLISHED",
    "qwen3-vl": "Qwen/Qwen3-VL-8B-Instruct video_preprocessor_config.json (QWEN3_VIDEO_CONFIG) beside "
    "preprocessor_config.json as reference.system.family_configs.PUBLISHED",
}


def folder(family: str) -> str:
    """The family's checkpoint folder for this process (written once; removed at exit)."""
    return owned.written(f"deferlab-vllm-video-{family}-", family, dict(FAMILIES[family].files))


@lru_cache(maxsize=8)
def video_processor(family: str) -> Any:
    """transformers' ``AutoVideoProcessor.from_pretrained`` on the checkpoint folder: the video processor the
    checkpoint's processor holds (``processor.video_processor``), from the transformers active in this process
    (the release's pinned companion when the tree was loaded with it)."""
    from transformers import AutoVideoProcessor

    return AutoVideoProcessor.from_pretrained(folder(family))
