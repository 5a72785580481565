"""Hypothesis strategies for deferlab's properties: sizes, images, configs, requests, topologies.

Composable, keyword-only bounds, validated arguments, and a docstring that
says what is generated and how it shrinks, like Hypothesis's own strategies.
Image strategies live in `strategies.images` and are re-exported here.

Pixel-level properties draw SMALL images (sides <= ~40): the structure
(mode, transparency form, layout, which side binds) breaks things, not the
size. Pixel-free properties (the gate, NaViT) draw sizes up to 8192 per side,
biased to where behaviour changes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from deferlab.impl.loader.wheels import deferlab_cache
from deferlab.properties.strategies.images import (
    ALL_MODES,
    LAYOUTS,
    ArrayImage,
    chw_uint8_tensors,
    float_tensors,
    pil_images,
    staging_ok_pil_images,
    uint8_arrays,
)
from deferlab.properties.strategies.reuse import reused
from deferlab.reference.oracle.navit import resize_config_arrays
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.profiles import profile

__all__ = [
    "ALL_MODES",
    "LAYOUTS",
    "ArrayImage",
    "backgrounds",
    "byte_boundary_heights",
    "byte_tie_sizes",
    "chw_uint8_tensors",
    "float_tensors",
    "image_sizes",
    "loads",
    "normalization_stats",
    "owner_partitions",
    "pil_images",
    "pixel_configs",
    "preprocess_configs",
    "requests",
    "staging_ok_pil_images",
    "topologies",
    "uint8_arrays",
]

K3 = profile("kimi-k3")


def _interesting_sides(config: PreprocessConfig, max_side: int) -> list[int]:
    """Sides where the NaViT decision changes: patch and factor multiples +-1, where a limit starts to bind."""
    p, f = config.patch_size, config.factor
    cap = config.patch_limit_on_one_side * p
    root = int(np.sqrt(config.in_patch_limit)) * p  # a square of this side starts to bind in_patch_limit
    sides = {1, 2, p - 1, p, p + 1, f - 1, f, f + 1, 2 * f, cap - 1, cap, cap + 1, root - 1, root, root + 1}
    sides |= {k * f + d for k in (3, 10, 37) for d in (-1, 0, 1)}
    return sorted(s for s in sides if 1 <= s <= max_side)


@lru_cache(maxsize=64)
def byte_boundary_heights(width: int, channels: int, config: PreprocessConfig, max_side: int = 8192) -> tuple[int, ...]:
    """Heights h (<= max_side) where, for a ``width`` x h image, raw - processed bytes changes sign.

    Computed with the reference NaViT decision over every height at once, so
    the strategy can sit right on the gate's boundary (raw == processed or
    the first size past it) instead of hoping to hit it.
    """
    hs = np.arange(1, max_side + 1, dtype=np.int64)
    rc = resize_config_arrays(np.full_like(hs, width), hs, config)
    diff = channels * width * hs - 12 * rc.padded_width * rc.padded_height
    sign = np.sign(diff)
    flips = np.nonzero(sign[1:] != sign[:-1])[0]
    out = set(int(hs[i]) for i in flips) | set(int(hs[i + 1]) for i in flips)
    out |= set(int(h) for h in hs[diff == 0])
    return tuple(sorted(out))


def _tie_cache(config: PreprocessConfig, channels: int, max_side: int) -> Path:
    """Where `byte_tie_sizes` keeps a scan: keyed by the config, the channels, the side and the oracle's own
    source (a changed NaViT rule is a new key, never a stale answer)."""
    oracle = Path(resize_config_arrays.__code__.co_filename).read_bytes()
    key = hashlib.sha256(repr((config, channels, max_side)).encode() + oracle).hexdigest()[:24]
    return deferlab_cache() / "strategies" / f"byte-ties-{key}.json"


@lru_cache(maxsize=8)
def byte_tie_sizes(config: PreprocessConfig, channels: int, max_side: int = 8192) -> tuple[tuple[int, int], ...]:
    """Every (width, height) <= max_side with raw bytes == processed bytes exactly (where ties defer).

    A full scan with the reference NaViT decision (67M sizes: about 13 s on one
    core, paid by every process that draws sizes: each xdist worker, each
    release's claim run); only worth it for the shipped profiles, so
    `image_sizes` uses it for those alone. The result is kept on disk
    (`_tie_cache`) and written atomically, so only the first process scans.
    """
    cache = _tie_cache(config, channels, max_side)
    try:
        return tuple((int(w), int(h)) for w, h in json.loads(cache.read_text()))
    except (OSError, ValueError, TypeError):
        pass
    found = _scan_byte_ties(config, channels, max_side)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        part = cache.with_name(f".{cache.name}.{os.getpid()}.part")
        part.write_text(json.dumps(found))
        os.replace(part, cache)
    except OSError:
        pass  # a read-only cache: scan again next time
    return found


def _scan_byte_ties(config: PreprocessConfig, channels: int, max_side: int) -> tuple[tuple[int, int], ...]:
    ws = np.arange(1, max_side + 1, dtype=np.int64)[:, None]
    found: list[tuple[int, int]] = []
    for h0 in range(1, max_side + 1, 1024):
        hs = np.arange(h0, min(h0 + 1024, max_side + 1), dtype=np.int64)[None, :]
        rc = resize_config_arrays(ws, hs, config)
        iw, ih = np.nonzero(channels * ws * hs == 12 * rc.padded_width * rc.padded_height)
        found += zip((iw + 1).tolist(), (ih + h0).tolist(), strict=True)
    return tuple(found)


@reused
@st.composite
def image_sizes(
    draw: st.DrawFn,
    *,
    min_side: int = 1,
    max_side: int = 8192,
    config: PreprocessConfig = K3,
    boundary_channels: int | None = None,
) -> tuple[int, int]:
    """(width, height) pairs in [min_side, max_side], biased to where the pipeline's behaviour changes.

    About half the draws take a side from the "interesting" set: multiples of
    the patch and of merge*patch and +-1 around them, the side where the
    one-side limit or ``in_patch_limit`` starts to bind. With
    ``boundary_channels`` set (3 or 4), a quarter of the draws put the height
    on a place where raw bytes - processed bytes changes sign (see
    `byte_boundary_heights`), and under kimi-k3 an eighth of them
    are sizes where raw == processed exactly (`byte_tie_sizes`). Shrinks
    towards (min_side, min_side).
    """
    if not 1 <= min_side <= max_side:
        raise ValueError(f"need 1 <= min_side <= max_side, got min_side={min_side}, max_side={max_side}")
    special = [s for s in _interesting_sides(config, max_side) if s >= min_side] or [min_side]
    side = st.integers(min_side, max_side) | st.sampled_from(special)
    w, h = draw(side), draw(side)
    if boundary_channels is not None and draw(st.integers(0, 3)) == 0:
        heights = [x for x in byte_boundary_heights(w, boundary_channels, config, max_side) if x >= min_side]
        if heights:
            h = draw(st.sampled_from(heights))
    if boundary_channels is not None and config == K3 and draw(st.integers(0, 7)) == 0:
        ties = [(a, b) for a, b in byte_tie_sizes(config, boundary_channels, max_side) if min(a, b) >= min_side]
        if ties:
            w, h = draw(st.sampled_from(ties))
    return w, h


@reused
def normalization_stats() -> st.SearchStrategy[tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """(mean, std) triples a checkpoint could ship: 0.5/0.5, CLIP, ImageNet, or any mean in [0,1], std in [0.01,1].

    Shrinks towards the K3 values (0.5, 0.5).
    """
    known = st.sampled_from(
        [
            ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
            ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),  # OpenAI CLIP
            ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),  # ImageNet
            ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
        ]
    )
    unit = st.floats(0.0, 1.0, allow_nan=False)
    pos = st.floats(0.01, 1.0, allow_nan=False)
    drawn = st.tuples(st.tuples(unit, unit, unit), st.tuples(pos, pos, pos))
    return known | drawn


@reused
def backgrounds(*, allow_none: bool = True) -> st.SearchStrategy[BackgroundConfig | None]:
    """Background configs: every pattern, chessboard squares 1..16, any levels, both phases; or None.

    Shrinks towards None (then black).
    """
    chess = st.builds(
        BackgroundConfig,
        pattern=st.just("chessboard"),
        square_size=st.integers(1, 16),
        white_value=st.integers(0, 255),
        gray_value=st.integers(0, 255),
        square_on_top_left=st.booleans(),
    )
    solid = st.sampled_from(["black", "white", "gray"]).map(lambda p: BackgroundConfig(pattern=p))
    out = solid | chess
    return (st.none() | out) if allow_none else out


@reused
@st.composite
def pixel_configs(draw: st.DrawFn, *, max_one_side: int = 4) -> PreprocessConfig:
    """Configs whose limits bind on SMALL images, so pixel-level properties see real resizes.

    Patch 1..6 and merge 1..2, one-side limit 1..``max_one_side`` patches and
    an ``in_patch_limit`` of 1..16 patches: a 12-pixel image is resized,
    padded and patchified like a 4K one under the K3 config. Means/stds from
    `normalization_stats`, background from `backgrounds`. Shrinks towards
    patch 1, merge 1, the smallest limits, 0.5/0.5 and no background.
    """
    mean, std = draw(normalization_stats())
    return PreprocessConfig(
        patch_size=draw(st.integers(1, 6)),
        merge_kernel_size=draw(st.integers(1, 2)),
        in_patch_limit=draw(st.integers(1, 16)),
        patch_limit_on_one_side=draw(st.integers(1, max_one_side)),
        image_mean=mean,
        image_std=std,
        background=draw(backgrounds()),
        name="drawn-pixel",
    )


@reused
@st.composite
def preprocess_configs(draw: st.DrawFn) -> PreprocessConfig:
    """Full-size configs: the shipped profiles, or drawn limits (patch 2..16, in_patch_limit up to 65536).

    For pixel-free properties (gate, NaViT). Shrinks towards the K3 profile.
    """
    if draw(st.booleans()):
        return profile(draw(st.sampled_from(["kimi-k3", "kimi-k2.5", "sglang-unit-4096", "sglang-epd-test"])))
    mean, std = draw(normalization_stats())
    return PreprocessConfig(
        patch_size=draw(st.integers(2, 16)),
        merge_kernel_size=draw(st.integers(1, 2)),
        in_patch_limit=draw(st.integers(1, 65536)),
        patch_limit_on_one_side=draw(st.integers(1, 512)),
        fixed_output_tokens=draw(st.none() | st.integers(1, 4096)),
        image_mean=mean,
        image_std=std,
        background=draw(backgrounds()),
        name="drawn",
    )


@reused
def requests(
    *,
    min_images: int = 0,
    max_images: int = 4,
    max_side: int = 12,
    tensors: bool = True,
    pil: bool = True,
    modes: tuple[str, ...] | None = None,
) -> st.SearchStrategy[list[Any]]:
    """A request's images: staging-safe PIL images and uint8 CHW tensors (1, 3 or 4 channels), mixed.

    ``min_images=0`` allows the empty request; ``modes`` restricts the PIL
    modes (default: every mode the stager converts). Shrinks towards fewer, smaller,
    simpler images.
    """
    kinds = []
    if pil:
        kinds.append(staging_ok_pil_images(max_side=max_side, modes=modes))
    if tensors:
        kinds.append(chw_uint8_tensors(max_side=max_side))
    if not kinds:
        raise ValueError("requests(): at least one of pil=True, tensors=True is needed")
    return st.lists(st.one_of(kinds), min_size=min_images, max_size=max_images)


@reused
@st.composite
def topologies(draw: st.DrawFn, *, max_tp: int = 8) -> dict[str, int]:
    """Serving topologies: tp size, attention-DP size (dividing tp), and the vision-DP world it implies.

    ``vision_ranks`` is the attention-TP group (tp // attn_dp). Shrinks to tp 1.
    """
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8, 16) if t <= max_tp]))
    dp = draw(st.sampled_from([d for d in range(1, tp + 1) if tp % d == 0]))
    return {"tp_size": tp, "attn_dp_size": dp, "vision_ranks": tp // dp}


@reused
@st.composite
def owner_partitions(draw: st.DrawFn, n: int, *, max_ranks: int = 4) -> list[list[int]]:
    """Any partition of image indices 0..n-1 across 1..max_ranks owners, each owner's list in any order.

    Covers what LPT produces and more (batch invariance must hold for any
    subset in any order). Shrinks towards one owner with 0..n-1 in order.
    """
    ranks = draw(st.integers(1, max(1, max_ranks)))
    owner = draw(st.lists(st.integers(0, ranks - 1), min_size=n, max_size=n))
    parts: list[list[int]] = [[i for i in range(n) if owner[i] == r] for r in range(ranks)]
    return [draw(st.permutations(p)) if len(p) > 1 else p for p in parts]


@reused
def loads(*, min_size: int = 0, max_size: int = 8) -> st.SearchStrategy[Sequence[int]]:
    """Per-image patch counts t*h*w as placement sees them (with ties). Shrinks towards [] / zeros."""
    return st.lists(st.integers(0, 64) | st.sampled_from([4, 16, 256]), min_size=min_size, max_size=max_size)
