"""deferlab's own restatement of GLM-4.1V's video trained side (semantics §20.4, "GLM-4.1V's trained side").

Why a module of its own: GLM-4.1V's rules share nothing with the Qwen ones but the patch layout: its sampler walks
the clip at a rate (ceil of i x F / fps, not a linspace), drops repeats and evens the count by repeating the last
index itself, its budget is a total over frames with its own floor, and the model is told whole seconds. Checked
against transformers 5.24.0's ``Glm4vVideoProcessor`` and ``Glm4vProcessor.replace_video_token`` on the whole
grid (``tests/reference/test_video_oracle_glm.py``). NumPy and Python arithmetic only: float64 where the code
computes in Python floats, NumPy's ``linspace`` where it calls it.
"""

from __future__ import annotations

import math

import numpy as np

from deferlab.reference.oracle.video_resize import hf_resize_3d
from deferlab.reference.system.video import Clip, Refused, Unsupported, VideoPlan, VideoRequest

NAME = "glm-4.1v"
PATCH, MERGE, TPS = 14, 2, 2
FACTOR = PATCH * MERGE  # 28: every resized side is a multiple of it
MIN_PIXELS, MAX_PIXELS = 12544, 47040000  # size.shortest_edge / longest_edge: totals over t_bar x h x w
DEFAULT_FPS = 2.0
MAX_DURATION = 300  # seconds sampled at the rate; a longer clip is sampled evenly over its whole length


def taken(clip: Clip, request: VideoRequest) -> list[int]:
    """The indices ``sample_frames`` hands the processor: repeats dropped, evened by repeating the last (§20.4)."""
    if not clip.fps > 0:
        raise Refused("TRAINED glm-4.1v: ValueError: Asked to sample frames per second but no video metadata was "
                      "provided (sample_frames needs the rate)")  # fmt: skip
    fps = request.fps if request.fps is not None else DEFAULT_FPS
    out = list(dict.fromkeys(at_rate(clip, fps, at_least_one=True)))  # first occurrence kept, order kept
    if len(out) % 2:
        out.append(out[-1])
    return out


def at_rate(clip: Clip, fps: float, at_least_one: bool) -> list[int]:
    """GLM's sampler at ``fps`` over ``clip`` (D = N / F, 0 at an unknown rate), repeats kept: up to 300 s, n =
    floor(D x fps) (at least 1 where ``at_least_one``: the processor's; vLLM's loader and times have no such floor,
    `video_served.vllm_glm_plan`) and min(N - 1, ceil(i x F / fps)); past it int(300 x fps) samples, every frame
    when that reaches N, else the linspace over [0, D] and min(N - 1, ceil(t x F))."""
    total, rate, duration = clip.frames, clip.fps, clip.duration
    last = total - 1
    if duration <= MAX_DURATION:
        n = int(math.floor(duration * fps))
        return [min(last, int(math.ceil(i * rate / fps))) for i in range(max(n, 1) if at_least_one else n)]
    samples = int(MAX_DURATION * fps)
    if samples >= total:
        return list(range(total))
    return [min(last, int(math.ceil(t * rate))) for t in np.linspace(0, duration, samples, endpoint=True)]


def resize(frames: int, height: int, width: int, min_pixels: float, max_pixels: float) -> tuple[int, int]:
    """GLM's 3-D ``smart_resize`` on ``frames`` frames (§20.4 "Size"): (height, width), multiples of 28. The same
    rule as Qwen3-VL's (`video_resize.hf_resize_3d`, read side by side in transformers 5.24.0) at GLM's factor 28."""
    return hf_resize_3d(frames, height, width, TPS, FACTOR, min_pixels, max_pixels)


def times(indices: list[int], rate: float, grid_t: int) -> tuple[float, ...]:
    """The whole seconds the prompt states per temporal step: every second timestamp (index / rate), the first
    ``grid_t`` (filled with the last, or 0), truncated to an int (§20.4 "Times")."""
    stamps = [i / rate for i in indices][::2][:grid_t]
    while len(stamps) < grid_t:
        stamps.append(stamps[-1] if stamps else 0)
    return tuple(float(int(s)) for s in stamps)


def refuse_budgets(request: VideoRequest) -> None:
    """`Unsupported` for a pixel budget: ``Glm4vVideoProcessor``'s kwargs name none (its budget is ``size``), and
    5.24.0 answers ``min_pixels`` / ``max_pixels`` / ``total_pixels`` with a TypeError (§20.4 "Size")."""
    given = [k for k in ("min_pixels", "max_pixels", "total_pixels") if getattr(request, k) is not None]
    if given:
        raise Unsupported(f"TRAINED glm-4.1v: the video processor takes no {', '.join(given)} (TypeError: not a "
                          "kwarg of Glm4vVideoProcessor; its budget is size; accepted: fps, num_frames (ignored))")  # fmt: skip


def plan(clip: Clip, request: VideoRequest) -> VideoPlan:
    """TRAINED GLM-4.1V: transformers 5.24.0's ``Glm4vVideoProcessor`` with the checkpoint's values (§20.4)."""
    refuse_budgets(request)
    idx = taken(clip, request)
    h, w = resize(len(idx), clip.height, clip.width, MIN_PIXELS, MAX_PIXELS)
    pad = -len(idx) % TPS  # 0: the sampler evens the count itself
    grid = ((len(idx) + pad) // TPS, h // PATCH, w // PATCH)
    tokens = grid[0] * grid[1] * grid[2] // (MERGE * MERGE)
    return VideoPlan(tuple(idx) + (idx[-1],) * pad, (w, h), grid, tokens, times(idx, clip.fps, grid[0]), pad)
