"""deferlab's restatement of an engine's own video rule as the semantics state it (semantics §20.5: SGLang, §20.6:
vLLM, §20.7: LMDeploy).

Why: where an engine's video claim fails (C17 on SGLang fails on every clip of the grid), "the served geometry
differs from the trained side's" is one failure whatever size the engine serves, so a second difference of the
same shape hides behind the first (the stop-35 mutation campaign's six survivors in SGLang's pixel budget). The
project's standard is that every differing element is explained: this module says what the engine's rule, as
the semantics write it down, gives for a clip, and the video claims (`properties.video_claims`) call a difference
explained only where the served plan equals it. Restated from the semantics' text, not from the engine's code:
NumPy and Python's own arithmetic, no engine, torch or transformers import; the checkpoint processor's resize
after the engine's own is `reference.oracle.video`'s (itself checked against transformers on the whole grid).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from deferlab.reference.oracle import video_gemma4 as g4
from deferlab.reference.oracle import video_glm as glm
from deferlab.reference.oracle.video import (
    MAX_FRAMES,
    MIN_FRAMES,
    UNKNOWN_FPS,
    _finish,
    family_of,
    hf_resize,
    hf_resize_3d,
    numpy_linspace_round,
    qwen3_times,
    qwen25_times,
    sampled_fps,
    torch_arange_int,
)
from deferlab.reference.system.releases import in_range
from deferlab.reference.system.video import Clip, Refused, Unsupported, VideoPlan, VideoRequest

# SGLang's Qwen video constants as §20.5 states them (``qwen_vl.py:69-78``; the env ``VIDEO_MAX_PIXELS`` unset)
SGLANG_FACTOR = 28  # IMAGE_FACTOR: the pre-resize's multiple for every Qwen family (SGLang #36109)
SGLANG_MIN_PIXELS = 128 * 28 * 28  # VIDEO_MIN_PIXELS
SGLANG_MAX_PIXELS = 768 * 28 * 28  # VIDEO_MAX_PIXELS
SGLANG_TOTAL_PIXELS = int(float(128000 * 28 * 28 * 0.9))  # VIDEO_TOTAL_PIXELS
SGLANG_FLOOR = 1.05  # the budget's floor: int(min_pixels x 1.05)
SGLANG_FPS, FRAME_FACTOR = 2.0, 2  # FPS, FRAME_FACTOR: the default rate and the count's multiple


def sglang_count(clip: Clip, request: VideoRequest) -> int:
    """§20.5 "Sampling": ``nframes`` rounded to even, else the rate's count clamped to [4, floor2(min(768, N))] and
    to N, floored to even; refused unless 2 <= n <= N, and when ``fps`` and ``nframes`` come together."""
    total = clip.frames
    if request.fps is not None and request.num_frames is not None:
        raise Refused("Only accept either `fps` or `nframes` (AssertionError in smart_nframes)")
    if request.num_frames is not None:
        n = round(request.num_frames / FRAME_FACTOR) * FRAME_FACTOR
    else:
        if not clip.fps > 0:
            raise Refused("the container's frame rate is 0 (ZeroDivisionError in smart_nframes)")
        fps = request.fps if request.fps is not None else SGLANG_FPS
        top = math.floor(min(MAX_FRAMES, total) / FRAME_FACTOR) * FRAME_FACTOR
        n = math.floor(min(max(total / clip.fps * fps, MIN_FRAMES), top, total) / FRAME_FACTOR) * FRAME_FACTOR
    if not FRAME_FACTOR <= n <= total:
        raise Refused(f"nframes should in interval [{FRAME_FACTOR}, {total}], but got {n} (ValueError)")
    if not clip.fps > 0:  # the metadata's duration = N / fps
        raise Refused("the container's frame rate is 0 (ZeroDivisionError in preprocess_video's metadata)")
    return n


def sglang_budget(n: int, request: VideoRequest) -> tuple[int, float]:
    """§20.5 "Resize before the processor": (min_pixels, max_pixels) of the per-frame resize for n frames:
    max(min(max_pixels or 768 x 28 x 28, total_pixels / n x 2), int(min_pixels x 1.05)), then at most a
    client's ``max_pixels``."""
    low = request.min_pixels if request.min_pixels is not None else SGLANG_MIN_PIXELS
    total = request.total_pixels if request.total_pixels is not None else SGLANG_TOTAL_PIXELS
    asked = request.max_pixels if request.max_pixels is not None else SGLANG_MAX_PIXELS
    high = max(min(asked, total / n * FRAME_FACTOR), int(low * SGLANG_FLOOR))
    return low, (min(request.max_pixels, high) if request.max_pixels is not None else high)


def sglang_resize(height: int, width: int, low: float, high: float) -> tuple[int, int]:
    """SGLang's ``smart_resize`` as §20.5 names it (qwen-vl-utils' rule, factor 28): each side rounded to 28, at
    least 28; over ``high``: floored by the area ratio; under ``low``: ceiled; an aspect ratio over 200 refused."""
    f = SGLANG_FACTOR
    if max(height, width) / min(height, width) > 200:
        raise Refused(f"absolute aspect ratio must be smaller than 200 (ValueError in smart_resize): {width}x{height}")
    h, w = max(f, round(height / f) * f), max(f, round(width / f) * f)
    if h * w > high:
        beta = math.sqrt(height * width / high)
        return math.floor(height / beta / f) * f, math.floor(width / beta / f) * f
    if h * w < low:
        beta = math.sqrt(low / (height * width))
        return math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
    return h, w


def sglang_plan(family: str, clip: Clip, request: VideoRequest) -> VideoPlan:
    """What SGLang serves, by §20.5's rule: its count and truncating ``linspace``, its 28-factor pre-resize under its
    own budget, then the checkpoint processor's resize with the checkpoint's ``size`` (the options do not reach
    it), its padding, grid and tokens; times 2/24 s a step (Qwen2.5-VL, no metadata) or the averaged frame times
    at the source rate (Qwen3-VL)."""
    fam = family_of(family)
    n = sglang_count(clip, request)
    idx = np.linspace(0, clip.frames - 1, n).astype(np.int64)  # truncation toward zero; n <= N: no repeats
    pre_h, pre_w = sglang_resize(clip.height, clip.width, *sglang_budget(n, request))
    if pre_h <= 0 or pre_w <= 0:  # the floor branch has no max(28, .): torchvision's resize refuses a 0 side
        raise Refused(f"SGLang's pre-resize target {pre_w}x{pre_h} has a 0 side (torchvision's resize refuses it)")
    if family == "qwen3-vl":
        h, w = hf_resize_3d(n, pre_h, pre_w, fam.tps, fam.factor, fam.min_pixels, fam.max_pixels)
        times = qwen3_times(idx, clip.fps, fam.tps)
    else:
        h, w = hf_resize(pre_h, pre_w, fam.factor, fam.min_pixels, fam.max_pixels)
        times = qwen25_times(-(-n // fam.tps), fam.tps, UNKNOWN_FPS)
    plan = _finish(fam, idx, (h, w), times, (f"SGLang's pre-resize to {pre_w}x{pre_h} (semantics §20.5)",))
    return replace(plan, pre_size=(pre_w, pre_h))


# vLLM's Qwen loader constants as §20.6 states them (``Qwen2VLVideoBackend`` / ``Qwen3VLVideoBackend``)
VLLM_FPS, VLLM_MAX_FPS = 2.0, 30.0  # the loaders' default rate, and the cap on a requested one
# The releases where §20.6's older-release paragraph says the rule differs (each the first with the newer code)
VLLM_FPS_CAP_FROM = "0.30.0"  # the 30-fps cap on a requested rate
VLLM_METADATA_FROM = "0.31.0"  # Qwen2.5-VL's loader lookup works with the pinned transformers (5.17.0, not 5.25.0)
VLLM_ALIASES_FROM = "0.32.0"  # the 24-fps fallback (Qwen3-VL) and the completed size aliases (Qwen2.5-VL)


def _since(release: str, first: str) -> bool:
    """Whether ``release`` has the code that came in ``first`` ("" or a checkout: the newest, so it has)."""
    return not release or in_range(release, first)


def vllm_count(family: str, total: int, src: float, fps: float) -> int:
    """§20.6 "Sampling": Qwen2.5-VL n = total / src x fps clamped to [4, floor2(min(768, total))] and to total,
    floored to even; Qwen3-VL n = int(total / src x fps) clamped to [4, 768] and to total (no even floor)."""
    if family == "qwen3-vl":
        return min(max(int(total / src * fps), MIN_FRAMES), MAX_FRAMES, total)
    top = math.floor(min(MAX_FRAMES, total) / FRAME_FACTOR) * FRAME_FACTOR
    return math.floor(min(max(total / src * fps, MIN_FRAMES), top, total) / FRAME_FACTOR) * FRAME_FACTOR


def vllm_plan(family: str, clip: Clip, request: VideoRequest, release: str = "") -> VideoPlan:
    """What vLLM serves, by §20.6's rule: the Qwen loader samples by rate (default 2, capped at 30; ``num_frames``
    ignored), OpenCV reads each chosen frame once in increasing order; the checkpoint processor then takes the
    frames as read (Qwen2.5-VL: ``do_sample_frames`` off; Qwen3-VL: unless every frame was read, when it resamples
    at its own 2 fps), resizes with ``min_pixels`` / ``max_pixels`` as its size edges; Qwen2.5-VL's times step by
    tps / sampled fps, Qwen3-VL's are the pair means of index / source fps (an unknown rate taken as 24).
    ``release`` (the served release; "" the newest): before 0.32.0 as §20.6's older-release paragraph states it:
    no fps cap before 0.30.0, Qwen2.5-VL refused at the loader lookup before 0.31.0 and its flat pixel kwargs used
    only as a pair before 0.32.0, Qwen3-VL without the 24-fps fallback before 0.32.0."""
    fam = family_of(family)
    if request.total_pixels is not None:
        raise Unsupported(f"vLLM's {family} video path takes no total_pixels (semantics §20.6)")
    if family == "qwen2.5-vl" and not _since(release, VLLM_METADATA_FROM):
        raise Refused("vLLM's loader lookup refuses transformers 5.25.0's dict mapping (TypeError; semantics §20.6)")
    total = clip.frames
    fps = request.fps if request.fps is not None else VLLM_FPS
    fps = min(fps, VLLM_MAX_FPS) if _since(release, VLLM_FPS_CAP_FROM) else fps
    min_px = request.min_pixels if request.min_pixels is not None else fam.min_pixels
    max_px = request.max_pixels if request.max_pixels is not None else fam.max_pixels
    notes = () if request.num_frames is None else (f"num_frames={request.num_frames} ignored (semantics §20.6)",)
    newest = _since(release, VLLM_ALIASES_FROM)
    if family == "qwen3-vl":
        if not clip.fps > 0 and not newest:
            raise Refused("the container's frame rate is 0 (ZeroDivisionError in Qwen3VLVideoBackend's sampling)")
        src = clip.fps if clip.fps > 0 else float(UNKNOWN_FPS)  # _prepare_source: kept for the timestamps too
        idx = np.unique(numpy_linspace_round(total, vllm_count(family, total, src, fps)))
        if len(idx) == total:  # every frame read: the processor samples again, at its own rate
            idx = numpy_linspace_round(total, vllm_count(family, total, src, fam.fps))
        h, w = hf_resize_3d(len(idx), clip.height, clip.width, fam.tps, fam.factor, min_px, max_px)
        return _finish(fam, idx, (h, w), qwen3_times(idx, src, fam.tps), notes)
    if (request.min_pixels is None) != (request.max_pixels is None):
        if newest:  # §20.6 (found by running, §20.9)
            raise Refused("vLLM completes one pixel bound into a size with one edge: the processor refuses it")
        min_px, max_px = fam.min_pixels, fam.max_pixels  # the flat kwargs: transformers 5.17.0 takes only a pair
    if not clip.fps > 0:
        raise Refused("the container's frame rate is 0 (ValueError in Qwen2VLVideoBackend's sampling)")
    n = vllm_count(family, total, clip.fps, fps)  # n = 0 (one frame): torch_arange_int refuses (ZeroDivisionError)
    idx = np.unique(np.minimum(torch_arange_int(total, n), total - 1))  # the tail clamped; each frame read once
    h, w = hf_resize(clip.height, clip.width, fam.factor, min_px, max_px)
    times = qwen25_times(-(-len(idx) // fam.tps), fam.tps, sampled_fps(len(idx), total, clip.fps))
    return _finish(fam, idx, (h, w), times, notes)


# LMDeploy's video constants as §20.7 states them (``VideoMediaIO(num_frames=32)``, the loaders' ``fps=-1``)
LMDEPLOY_NUM_FRAMES, LMDEPLOY_FPS = 32, -1.0


def lmdeploy_indices(clip: Clip, request: VideoRequest) -> np.ndarray:
    """§20.7 "Sampling" (``VideoLoader.smart_nframes``): n = N; min(num_frames or 32, N) when that is above 0;
    min(n, floor(duration x fps)) when fps is above 0, duration = N / f (0 when f is unknown); at least 1; every
    frame when n = N, else NumPy's float64 ``linspace(0, N - 1, n)`` truncated to integers."""
    total = clip.frames
    count = request.num_frames if request.num_frames is not None else LMDEPLOY_NUM_FRAMES
    fps = request.fps if request.fps is not None else LMDEPLOY_FPS
    duration = total / clip.fps if clip.fps > 0 else 0
    n = min(count, total) if count > 0 else total
    if fps > 0:
        n = min(n, math.floor(duration * fps))
    n = max(1, n)
    if n == total:
        return np.arange(total, dtype=np.int64)
    return np.linspace(0, total - 1, n).astype(np.int64)  # non-negative values: truncation is NumPy 2's floor


def lmdeploy_size(family: str, request: VideoRequest) -> tuple[float, float]:
    """§20.7 "The processor" (``get_override_size``): the checkpoint's size edges, each replaced by the client's
    ``min_pixels`` / ``max_pixels`` where given; min above max falls back to the checkpoint's pair."""
    fam = family_of(family)
    low = request.min_pixels if request.min_pixels is not None else fam.min_pixels
    high = request.max_pixels if request.max_pixels is not None else fam.max_pixels
    return (fam.min_pixels, fam.max_pixels) if low > high else (low, high)


def lmdeploy_plan(family: str, clip: Clip, request: VideoRequest) -> VideoPlan:
    """What LMDeploy serves, by §20.7's rule: its loader's count and truncating ``linspace`` (32 frames by count,
    no rate unless asked), the checkpoint processor on exactly those frames (``do_sample_frames=False``): its 3-D
    resize under the size edges LMDeploy passes, padding to even, grid and tokens; the times the pair means of
    index / the container's rate, with no fallback for an unknown rate (a division by zero). Only Qwen3-VL has a
    video path (Qwen2.5-VL's model refuses a video item); ``total_pixels`` is not taken."""
    fam = family_of(family)
    if family != "qwen3-vl":
        raise Unsupported(f"n/a: LMDeploy serves no video for {family} (semantics §20.7)")
    if request.total_pixels is not None:
        raise Unsupported("LMDeploy takes no total_pixels for a video (semantics §20.7)")
    idx = lmdeploy_indices(clip, request)
    h, w = hf_resize_3d(len(idx), clip.height, clip.width, fam.tps, fam.factor, *lmdeploy_size(family, request))
    if not clip.fps > 0:
        raise Refused("the container's frame rate is 0 (ZeroDivisionError in _calculate_timestamps)")
    return _finish(fam, idx, (h, w), qwen3_times(idx, clip.fps, fam.tps))


# An engine's stated rule, by engine name (the part of a path's ``system`` before its version).
def vllm_gemma4_plan(family: str, clip: Clip, request: VideoRequest) -> VideoPlan:
    """§20.10(b) "The engines' Gemma 4 rules": vLLM's generic OpenCV loader takes min(num_frames or 32, N), under a
    request rate also at most floor(N / F x fps), at least 1; every frame at N, else the truncated linspace; the
    pixel options ignored; times floor(index / F), F = 24 when 0."""
    total = clip.frames
    n = min(request.num_frames if request.num_frames is not None else 32, total)
    if request.fps is not None:
        n = min(n, math.floor((total / clip.fps if clip.fps > 0 else 0.0) * request.fps))
    n = max(n, 1)
    idx = list(range(total)) if n == total else [int(v) for v in np.linspace(0, total - 1, n).astype(np.int64)]
    plan = g4.plan_of(clip, idx, g4.times(idx, clip.fps))
    return replace(plan, tokens=len(idx) * vllm_gemma4_soft_tokens(clip.width, clip.height))


def vllm_gemma4_soft_tokens(width: int, height: int) -> int:
    """§20.10(b) "vLLM's soft-token count": the prompt's tokens per frame, from vLLM's own arithmetic on the
    frame's size (scale = sqrt(630 / ((H / 16)(W / 16))), each side floor(side x scale / 48) x 48, at least 48,
    patches / 9, at most 70), not from the size the checkpoint's processor resizes to: equal to TRAINED's count on
    every frame size up to 4096 a side but 17x1190, 34x2380 and their transposes (70:1), where it is 69, not 70."""
    scale = math.sqrt(g4.MAX_PATCHES / ((height / g4.PATCH) * (width / g4.PATCH)))
    h = max(g4.SIDE, math.floor(height * scale / g4.SIDE) * g4.SIDE)
    w = max(g4.SIDE, math.floor(width * scale / g4.SIDE) * g4.SIDE)
    return min((h // g4.PATCH) * (w // g4.PATCH) // (g4.POOL * g4.POOL), g4.MAX_SOFT_TOKENS)


def sglang_gemma4_plan(family: str, clip: Clip, request: VideoRequest) -> VideoPlan:
    """§20.10(b) "The engines' Gemma 4 rules": SGLang takes every frame up to 32, else i x N // 32, whatever the
    request's fps or num_frames; a pixel option `Unsupported`; times floor(position / 24) (no metadata)."""
    if request.min_pixels is not None or request.max_pixels is not None or request.total_pixels is not None:
        raise Unsupported("SGLang's Gemma 4 path takes no pixel bound (not a kwarg of the processor; §20.10(b))")
    total = clip.frames
    idx = list(range(total)) if total <= 32 else [i * total // 32 for i in range(32)]
    return g4.plan_of(clip, idx, g4.times(list(range(len(idx))), 0.0))  # positions, at the unknown rate's 24


GLM_COUNT_CHECK_FROM = "0.34.0"  # _placeholder_from_timestamps checks the time count against grid t (§20.6)


def vllm_glm_plan(family: str, clip: Clip, request: VideoRequest, release: str = "") -> VideoPlan:
    """§20.6 "vLLM's GLM-4.1V rule, restated": the dynamic loader's sorted set at the request's fps (2 when none;
    ``num_frames`` and the pixel pair ignored); read whole, the processor samples again at its own 2 fps, else it
    takes the k frames read (padded to even); times re-run at 2 fps (read whole) or from the loader's indices,
    every second int(index / F); 0.34.0 refuses a time count other than grid t."""
    if request.total_pixels is not None:
        raise Unsupported("vLLM takes no total_pixels (§20.6)")
    fps = request.fps if request.fps is not None else glm.DEFAULT_FPS
    read = sorted(set(glm.at_rate(clip, fps, at_least_one=False)))
    if not read:
        raise Refused("vLLM's OpenCV codec: the loader chose no frame (§20.6)")
    whole = len(read) == clip.frames
    idx = glm.taken(clip, VideoRequest()) if whole else read
    if len(idx) < glm.TPS:
        raise Refused(f"t:{len(idx)} must be larger than temporal_factor:{glm.TPS} (smart_resize, §20.6)")
    h, w = glm.resize(len(idx), clip.height, clip.width, glm.MIN_PIXELS, glm.MAX_PIXELS)
    pad = len(idx) % glm.TPS
    grid = ((len(idx) + pad) // glm.TPS, h // glm.PATCH, w // glm.PATCH)
    told = list(dict.fromkeys(glm.at_rate(clip, glm.DEFAULT_FPS, at_least_one=False) if whole else read))
    if len(told) % 2:
        told.append(told[-1])
    times = tuple(float(int(i / clip.fps)) for i in told)[::2]
    if _since(release, GLM_COUNT_CHECK_FROM) and len(times) != grid[0]:
        raise Refused(f"Video timestamp count does not match video_grid_thw[0]: {len(times)} timestamps for "
                      f"grid_t={grid[0]} (§20.6)")  # fmt: skip
    tokens = len(times) * (grid[1] * grid[2] // (glm.MERGE * glm.MERGE))
    return VideoPlan(tuple(idx) + (idx[-1],) * pad, (w, h), grid, tokens, times, pad)


RULED = ("qwen2.5-vl", "qwen3-vl")  # the families whose engine rules are restated here for every engine
RULES: dict[str, tuple[str, Callable[[str, Clip, VideoRequest], VideoPlan]]] = {
    "sglang": ("semantics §20.5", sglang_plan),
    "vllm": ("semantics §20.6", vllm_plan),
    "lmdeploy": ("semantics §20.7", lmdeploy_plan),
}
# One engine's rule for one other family (SGLang's GLM-4.1V rule is not restated)
FAMILY_RULES: dict[tuple[str, str], tuple[str, Callable[[str, Clip, VideoRequest], VideoPlan]]] = {
    ("sglang", "gemma4"): ("semantics §20.10(b)", sglang_gemma4_plan),
    ("vllm", "gemma4"): ("semantics §20.10(b)", vllm_gemma4_plan),
    ("vllm", "glm-4.1v"): ("semantics §20.6", vllm_glm_plan),
}


def rule_for(
    system: str, family: str | None = None
) -> tuple[str, Callable[[str, Clip, VideoRequest], VideoPlan]] | None:
    """The stated rule of the engine a path's ``system`` names (``"sglang-0.5.23"``), with the section that states
    it; None where the semantics state none precisely enough to restate (a ``family`` outside `RULED`)."""
    name, _, release = str(system).partition("-")
    if family is not None and (name.lower(), family) in FAMILY_RULES:
        found = FAMILY_RULES[(name.lower(), family)]
    elif family is not None and family not in RULED:
        return None
    else:
        found = RULES.get(name.lower())
    if found is not None and release and "release" in inspect.signature(found[1]).parameters:
        return found[0], functools.partial(found[1], release=release)  # a rule that differs by release (vLLM's)
    return found
