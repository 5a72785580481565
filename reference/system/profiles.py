"""Named configuration profiles, each with where its values come from.

``kimi-k3`` is the default everywhere. The Kimi values come from published
third-party copies of the checkpoints' ``preprocessor_config.json`` (semantics §2);
the ``sglang-*`` profiles are the configs SGLang's own unit tests use
(semantics §3.2, §4.2 and §2.2).
Add a profile by adding an entry to ``PROFILES`` (see README).
"""

from __future__ import annotations

from typing import Any

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.errors import InputValueError

DEFAULT_PROFILE = "kimi-k3"

_K3_BG = {
    "pattern": "chessboard",
    "chessboard_square_size": 8,
    "chessboard_square_on_top_left": True,
    "chessboard_white_value": 255,
    "chessboard_gray_value": 180,
}

# Kimi-K3's geometry: SGLang's gate tests use it bare, and the other profiles state what they change.
_K3_GEOMETRY = {"patch_size": 14, "merge_kernel_size": 2, "in_patch_limit": 65536, "patch_limit_on_one_side": 512}

# Shared by kimi-k3 and kimi-k2.5, so the fill stage is set per profile: K3's after_resize; K2.5 has no
# background config and states none.
_K3 = {
    **_K3_GEOMETRY,
    "fixed_output_tokens": None,
    "image_mean": [0.5] * 3,
    "image_std": [0.5] * 3,
    "transparent_bg_config": _K3_BG,
}

# name -> (media_proc_cfg, source)
PROFILES: dict[str, tuple[dict[str, Any], str]] = {
    "kimi-k3": (
        {**_K3, "transparent_bg_fill_stage": "after_resize"},
        "Kimi-K3 preprocessor_config.json, third-party copies (semantics §2); fill stage after_resize",
    ),
    "kimi-k2.5": (
        {**_K3, "in_patch_limit": 16384, "transparent_bg_config": None},
        "Kimi-K2.5 preprocessor_config.json, third-party copies (semantics §2); no background config",
    ),
    "sglang-gate-test": (
        _K3_GEOMETRY,
        "SGLang test_kimi_k3_defers_only_when_raw_transport_is_smaller, case 1 (semantics §4.2)",
    ),
    "sglang-gate-test-l1": (
        {**_K3_GEOMETRY, "in_patch_limit": 1},
        "SGLang test_kimi_k3_defers_only_when_raw_transport_is_smaller, case 2: in_patch_limit 1 (semantics §4.2)",
    ),
    "sglang-unit-4096": (
        {**_K3_GEOMETRY, "in_patch_limit": 4096, "patch_limit_on_one_side": 64},
        "SGLang unit tests: in_patch_limit 4096, one-side limit 64 (semantics §2)",
    ),
    "sglang-k25-fixture": (
        {**_K3_GEOMETRY, "in_patch_limit": 16384, "patch_limit_on_one_side": 256},
        "SGLang K2.5 test fixture: in_patch_limit 16384, one-side limit 256 (semantics §2.2)",
    ),
    "sglang-epd-test": (
        {"patch_size": 2, "merge_kernel_size": 2, "in_patch_limit": 1024, "patch_limit_on_one_side": 64},
        "SGLang EPD test: p=2, m=2, L=1024, S=64; 8x6 -> grid [1,4,4] (semantics §3.2)",
    ),
    "clip-stats": (
        {
            **_K3_GEOMETRY,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "transparent_bg_config": _K3_BG,
            "transparent_bg_fill_stage": "after_resize",
        },
        "Kimi-K3 geometry with OpenAI CLIP mean/std: a checkpoint could ship these (normalization claim C3)",
    ),
}


def profile_names() -> list[str]:
    return list(PROFILES)


# SGLang's gate and EPD tests set no mean/std (the gate never reads them); such
# profiles take the Kimi values, stated here rather than left to defaults.
_SGLANG_TEST_NORMALIZATION = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}


def profile_media_proc_cfg(name: str = DEFAULT_PROFILE) -> dict[str, Any]:
    """The named profile's checkpoint-style dict as `profile` reads it (mean/std filled in where it sets none)."""
    try:
        cfg, _source = PROFILES[name]
    except KeyError:
        raise InputValueError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}") from None
    return {**_SGLANG_TEST_NORMALIZATION, **cfg}


def profile(name: str = DEFAULT_PROFILE) -> PreprocessConfig:
    """The named profile as a validated `PreprocessConfig`."""
    return PreprocessConfig.from_media_proc_cfg(profile_media_proc_cfg(name), name=name)


def profile_source(name: str) -> str:
    if name not in PROFILES:
        raise InputValueError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}")
    return PROFILES[name][1]
