"""deferlab's own restatement of Gemma 4's video trained side (semantics §20.10(a), "Gemma 4's trained side").

Why a module of its own: Gemma 4's rules share nothing with the Qwen or GLM ones. It samples by count, not by
rate (i x N // k, k = 32 unless the client asks, refused past N), it has no temporal patch (one grid step per
frame, no padding), its size is an aspect-ratio-preserving fit to a patch budget in multiples of 48 (no min or
max pixels), and the model is told each frame's whole second as "MM:SS" text. Checked against transformers
5.24.0's ``Gemma4VideoProcessor`` and ``Gemma4Processor.replace_video_token`` on the whole grid
(``tests/reference/test_video_oracle_gemma4.py``). Python integer and float64 arithmetic only, as the code computes.
"""

from __future__ import annotations

import math

from deferlab.reference.system.video import Clip, Refused, Unsupported, VideoPlan, VideoRequest

NAME = "gemma4"
PATCH, POOL, MAX_SOFT_TOKENS = 16, 3, 70  # the published video config (= the class defaults)
SIDE = PATCH * POOL  # 48: every resized side is a multiple of it
MAX_PATCHES = MAX_SOFT_TOKENS * POOL * POOL  # 630 patches per frame
TARGET_PX = MAX_PATCHES * PATCH * PATCH  # 161,280 pixels per frame
NUM_FRAMES = 32  # num_frames: preprocess fills it from the processor whatever the client sends
UNKNOWN_FPS = 24  # replace_video_token's fallback when the metadata has no rate


def refuse_budgets(request: VideoRequest) -> None:
    """`Unsupported` for a pixel budget: ``Gemma4VideoProcessor``'s kwargs name none (its budget is
    ``max_soft_tokens``): 5.24.0's ``preprocess`` warns of them as unrecognized, then its typed-dict check raises
    TypeError (§20.10(a); checked in the oracle's tests)."""
    given = [k for k in ("min_pixels", "max_pixels", "total_pixels") if getattr(request, k) is not None]
    if given:
        raise Unsupported(f"TRAINED gemma4: the video processor takes no {', '.join(given)} (not a kwarg of "
                          "Gemma4VideoProcessor; its budget is max_soft_tokens; accepted: fps, num_frames)")  # fmt: skip


def taken(clip: Clip, request: VideoRequest) -> list[int]:
    """The indices ``sample_frames`` hands the processor (§20.10(a) "Count and indices"): i x N // k."""
    if request.fps is not None:  # preprocess filled num_frames=32 beside it
        raise Refused("TRAINED gemma4: ValueError: `num_frames` and `fps` are mutually exclusive arguments "
                      "(preprocess filled the processor's num_frames=32)")  # fmt: skip
    total = clip.frames
    k = request.num_frames if request.num_frames is not None else NUM_FRAMES
    if k > total:
        raise Refused(f"TRAINED gemma4: ValueError: When loading the video with num_frames={k}, the requested "
                      f"number of frames exceeds total_num_frames={total}")  # fmt: skip
    return [i * total // k for i in range(k)]


def resize(height: int, width: int) -> tuple[int, int]:
    """``get_aspect_ratio_preserving_size`` (§20.10(a) "Per-frame size"): (height, width), multiples of 48, the
    largest fitting 161,280 pixels at the frame's aspect ratio (up or down); a side flooring to 0 becomes 48 and the
    other ``floor(long / short) x 48``, at most 70 / 9 x 48 wide."""
    factor = math.sqrt(TARGET_PX / (height * width))
    h = int(math.floor(factor * height / SIDE)) * SIDE
    w = int(math.floor(factor * width / SIDE)) * SIDE
    if h == 0 and w == 0:
        raise Refused(f"TRAINED gemma4: ValueError: Attempting to resize {width}x{height} to a 0 x 0 image")
    longest = (MAX_PATCHES // (POOL * POOL)) * SIDE
    if h == 0:
        h, w = SIDE, min(int(math.floor(width / height)) * SIDE, longest)
    elif w == 0:
        h, w = min(int(math.floor(height / width)) * SIDE, longest), SIDE
    if h * w > TARGET_PX:
        raise Refused(f"TRAINED gemma4: ValueError: Resizing {width}x{height} to {w}x{h} exceeds {MAX_PATCHES} "
                      "patches")  # fmt: skip
    return h, w


def times(indices: list[int], fps: float) -> tuple[float, ...]:
    """The whole seconds the "MM:SS" text states per frame: floor(index / F), F = 24 when unknown (§20.10(a))."""
    rate = fps if fps > 0 else UNKNOWN_FPS
    return tuple(float(math.floor(i / rate)) for i in indices)


def stamps(told: tuple[float, ...]) -> tuple[str, ...]:
    """The text before each frame's ``<boi>``: "MM:SS " (whole minutes, then the seconds left, two digits at
    least), the frames after the first one space further on, after the ``<eoi>`` before them (§20.10(a))."""
    return tuple(f"{' ' if k else ''}{int(t // 60):02d}:{int(t % 60):02d} " for k, t in enumerate(told))


def plan_of(clip: Clip, idx: list[int], told: tuple[float, ...]) -> VideoPlan:
    """The frames ``idx`` of ``clip`` through the checkpoint's size rule (each frame its own grid step, no padding),
    the model told ``told``: what TRAINED and both engines' Gemma 4 rules (`video_served`) share."""
    h, w = resize(clip.height, clip.width)
    grid = (len(idx), h // PATCH, w // PATCH)
    tokens = len(idx) * (grid[1] * grid[2] // (POOL * POOL))
    return VideoPlan(tuple(idx), (w, h), grid, tokens, told, 0, stamps=stamps(told))


def plan(clip: Clip, request: VideoRequest) -> VideoPlan:
    """TRAINED Gemma 4: transformers 5.24.0's ``Gemma4VideoProcessor`` with the checkpoint's values (§20.10(a))."""
    refuse_budgets(request)
    idx = taken(clip, request)
    return plan_of(clip, idx, times(idx, clip.fps))
