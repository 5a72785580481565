"""deferlab's own restatement of the trained sides' video rules for Qwen2.5-VL and Qwen3-VL (semantics §20.4).

Why a restatement: the claims C16-C18 compare every engine with the trained side on 6,000 clips x every option;
the trained side's own code (`properties.video_trained`) is the reference, and this module is checked against it
on every point of the grid (``tests/reference/test_video_oracle.py``), so a rule written down here is a rule
read and confirmed, and a sweep can run without torch or transformers. Two rows per family (semantics §20.1):
``TRAINED`` (transformers 5.24.0's video processor with the checkpoint's config) and ``CARD`` (qwen-vl-utils
0.0.14's ``fetch_video``, then the processor on its frames). No torch, no transformers, no engine import: NumPy
and Python's own arithmetic, float32 where torch computes in float32.

Also the frame-index code (semantics §20.3): `encode_index` writes a frame's index into its pixels as large
black/white blocks, `read_index` reads it back, so which frames a decoder took is read, not inferred.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from deferlab.reference.oracle.video_index import INDEX_BITS, encode_index, read_index  # noqa: F401  (re-exported)
from deferlab.reference.oracle.video_resize import _ratio_check, hf_resize_3d  # noqa: F401  (re-exported)
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.video import Clip, Refused, Unsupported, VideoPlan, VideoRequest

F32 = np.float32
ARANGE_LANES = 8  # floats per SIMD vector in torch's CPU arange kernel (measured: torch 2.13 on AVX512 and AVX2)
MODEL_SEQ_LEN = 128000  # qwen-vl-utils' default (env MODEL_SEQ_LEN at its import)
ROWS = ("TRAINED", "CARD")


@dataclass(frozen=True)
class Family:
    """One family's video settings, TRAINED's from the checkpoint's file (`properties.video_trained`; semantics
    §20.4 "The configs")."""

    name: str
    patch: int
    merge: int
    tps: int  # temporal_patch_size
    min_pixels: int  # TRAINED size.shortest_edge
    max_pixels: int  # TRAINED size.longest_edge (Qwen3-VL: a total over frames)
    sample_by_default: bool  # do_sample_frames
    fps: float | None  # the processor's default fps when sampling

    @property
    def factor(self) -> int:
        """patch_size x merge_size: the multiple every resized side is (semantics §20.4)."""
        return self.patch * self.merge


FAMILIES = {
    "qwen2.5-vl": Family("qwen2.5-vl", 14, 2, 2, 3136, 12845056, False, None),
    "qwen3-vl": Family("qwen3-vl", 16, 2, 2, 4096, 25165824, True, 2.0),
    "glm-4.1v": Family("glm-4.1v", 14, 2, 2, 12544, 47040000, True, 2.0),  # its rules: `video_glm` (one row)
    # patch 16, pooling 3 as merge, no temporal patch, a 161,280-px budget per frame: its rules `video_gemma4`
    "gemma4": Family("gemma4", 16, 3, 1, 0, 161280, True, None),
}
ONE_ROW = {"glm-4.1v": "GLM-4.1V's model card runs transformers' own processor: no recipe of its own, no CARD row",
           "gemma4": "Gemma 4's model card feeds videos to transformers' own processor: no recipe of its own, no CARD "
           "row"}  # fmt: skip
MIN_FRAMES, MAX_FRAMES = 4, 768  # both processors' class defaults and qwen-vl-utils' FPS_MIN/MAX_FRAMES
UNKNOWN_FPS = 24  # what transformers assumes when the frame rate is unknown (Qwen3-VL sampling, sampled_fps)


def family_of(name: str) -> Family:
    """The family's settings; `Unsupported` naming the families with a video oracle (semantics §20.4)."""
    if name not in FAMILIES:
        raise Unsupported(f"no video oracle for family {name!r}; accepted: {', '.join(FAMILIES)}")
    return FAMILIES[name]


# --- torch's index arithmetic, restated (semantics §20.4 "Indices") ------------------------------------------------
def torch_arange_int(total: int, n: int, lanes: int = ARANGE_LANES) -> np.ndarray:
    """``torch.arange(0, total, total / n).int()`` (semantics §20.4): the length is ceil(total / step) in double
    (n + 1 for some pairs), values float32 built as torch's CPU kernel does (vectors of ``lanes`` from a float32
    base plus a double step, the tail scalar), truncated."""
    if n == 0:
        raise Refused(f"n=0 frames: torch.arange(0, {total}, {total}/0) divides by zero (ZeroDivisionError)")
    step = total / n
    size = math.ceil(total / step)
    i = np.arange(size)
    chunked = (size // (2 * lanes)) * 2 * lanes
    base = i - i % lanes
    vec = (np.float64((base * step).astype(F32)) + (i - base) * step).astype(F32)
    val = np.where(i < chunked, vec, (i * step).astype(F32))
    return val.astype(np.int32).astype(np.int64)


def torch_linspace_round(total: int, n: int) -> np.ndarray:
    """``torch.linspace(0, total - 1, n).round()`` as qwen-vl-utils takes indices (semantics §20.4): a float32
    step, start + step * i below the half and end - step * (n - 1 - i) above it, rounded to float32, half to even."""
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    end = total - 1
    step = np.float64(F32(end / (n - 1)))
    i = np.arange(n)
    val = np.where(i < n // 2, step * i, end - step * (n - 1 - i)).astype(F32)
    return np.round(val).astype(np.int64)


def numpy_linspace_round(total: int, n: int) -> np.ndarray:
    """``np.linspace(0, total - 1, n).round().astype(int)``: Qwen3VLVideoProcessor.sample_frames' index rule
    (semantics §20.4 "Indices")."""
    return np.linspace(0, total - 1, n).round().astype(np.int64)


# --- geometry (semantics §20.4 "Per-frame size") -------------------------------------------------------------------
def hf_resize(height: int, width: int, factor: int, min_pixels: float, max_pixels: float) -> tuple[int, int]:
    """transformers' Qwen2-VL ``smart_resize`` (semantics §20.4): (height, width) multiples of ``factor``."""
    _ratio_check(height, width)
    h, w = round(height / factor) * factor, round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w


def card_resize(height: int, width: int, factor: int, min_pixels: float, max_pixels: float) -> tuple[int, int]:
    """qwen-vl-utils' ``smart_resize`` (semantics §20.4): max(factor, round) on both sides, none on the floor."""
    if not max_pixels >= min_pixels:
        raise Refused("The max_pixels of image must be greater than or equal to min_pixels (AssertionError)")
    _ratio_check(height, width)
    h, w = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    if h <= 0 or w <= 0:  # the floor branch has no max(factor, .): torchvision's resize then refuses
        raise Refused(f"Input and output sizes should be greater than 0, output (H: {h}, W: {w}) (RuntimeError)")
    return h, w


# --- times (semantics §20.4 "Times") -------------------------------------------------------------------------------
def sampled_fps(taken: int | None, total: int, fps: float | None) -> float:
    """transformers' ``VideoMetadata.sampled_fps``: taken / total * fps, fps when no indices, 24 when unknown
    (semantics §20.4 "Times")."""
    if taken is None or fps is None:
        return fps or UNKNOWN_FPS
    return taken / total * fps


def qwen25_times(grid_t: int, tps: int, fps_sampled: float) -> tuple[float, ...]:
    """Qwen2.5-VL's temporal positions in seconds: t * second_per_grid_t, second_per_grid_t = tps / sampled fps
    (semantics §20.4 "Times")."""
    per = tps / fps_sampled
    return tuple((np.arange(grid_t) * per).tolist())  # float64 products, as Python's t * per


def qwen3_times(indices: np.ndarray, fps: float, tps: int) -> tuple[float, ...]:
    """``Qwen3VLProcessor._calculate_timestamps``: indices padded with the last to a multiple of tps, each
    idx / fps, averaged over each tps group's first and last (semantics §20.4)."""
    idx = list(int(i) for i in indices)
    if len(idx) % tps:
        idx.extend(idx[-1] for _ in range(tps - len(idx) % tps))
    ts = [i / fps for i in idx]
    return tuple((ts[i] + ts[i + tps - 1]) / 2 for i in range(0, len(ts), tps))


# --- the two rows ---------------------------------------------------------------------------------------------------
def _finish(
    fam: Family, indices: np.ndarray, size: tuple[int, int], times: tuple[float, ...], notes: tuple[str, ...] = ()
) -> VideoPlan:
    """Padding (the last frame repeated to a multiple of tps), grid and tokens as both processors' patchify and
    replace_video_token make them (semantics §20.4 "Padding and grid")."""
    n = len(indices)
    pad = -n % fam.tps
    h, w = size
    grid = ((n + pad) // fam.tps, h // fam.patch, w // fam.patch)
    padded_idx = tuple(np.asarray(indices).tolist()) + (int(indices[-1]),) * pad
    tokens = grid[0] * grid[1] * grid[2] // (fam.merge * fam.merge)
    return VideoPlan(padded_idx, (w, h), grid, tokens, times, pad, notes)


def trained_taken(family: str, clip: Clip, request: VideoRequest) -> tuple[np.ndarray, int | None]:
    """TRAINED's sampling alone (semantics §20.4): the source frames the processor takes, before its padding and
    resize, and how many it sampled (None: every frame, Qwen2.5-VL unsampled). Refuses only what sampling refuses:
    the frames transformers' ``load_video`` reads (with the processor's ``sample_frames``), as §20.2 found."""
    fam = family_of(family)
    total, src = clip.frames, (clip.fps if clip.fps > 0 else None)
    if family == "qwen2.5-vl":
        if not (fam.sample_by_default or request.fps is not None or request.num_frames is not None):
            return np.arange(total, dtype=np.int64), None
        if request.num_frames is not None:
            n = round(request.num_frames / fam.tps) * fam.tps
        else:
            if src is None:
                raise Refused("Asked to sample `fps` frames per second but no video metadata was provided "
                              "(ValueError in sample_frames)")  # fmt: skip
            max_frames = math.floor(min(MAX_FRAMES, total) / fam.tps) * fam.tps
            x = min(max(total / src * request.fps, MIN_FRAMES), max_frames, total)  # type: ignore[operator]
            n = math.floor(x / fam.tps) * fam.tps
        if n > total:
            raise Refused(f"Video can't be sampled. The inferred `num_frames={n}` exceeds `total_num_frames="
                          f"{total}` (ValueError in sample_frames)")  # fmt: skip
        idx = torch_arange_int(total, n)
        if idx[-1] >= total:  # the float32 value rounded up to N: the processor's video[indices] refuses
            raise Refused(f"index {idx[-1]} is out of bounds for {total} frames (IndexError: video[indices])")
        return idx, len(idx)
    if request.num_frames is not None:  # preprocess fills fps=2 from the processor, then sample_frames refuses
        raise Refused("`num_frames` and `fps` are mutually exclusive arguments (ValueError in sample_frames: "
                      "preprocess filled the processor's fps=2)")  # fmt: skip
    fps = request.fps if request.fps is not None else fam.fps
    n = min(max(int(total / (src if src is not None else UNKNOWN_FPS) * fps), MIN_FRAMES), MAX_FRAMES, total)
    return numpy_linspace_round(total, n), n


def trained_plan(family: str, clip: Clip, request: VideoRequest) -> VideoPlan:
    """TRAINED: the checkpoint's video processor (transformers 5.24.0), semantics §20.4."""
    if family in ONE_ROW:
        return plan(family, "TRAINED", clip, request)
    fam = family_of(family)
    if request.total_pixels is not None:
        raise Unsupported(f"TRAINED {family}: the video processor takes no total_pixels (accepted: fps, num_frames, "
                          "min_pixels, max_pixels)")  # fmt: skip
    src = clip.fps if clip.fps > 0 else None
    min_px = request.min_pixels if request.min_pixels is not None else fam.min_pixels
    max_px = request.max_pixels if request.max_pixels is not None else fam.max_pixels
    idx, taken = trained_taken(family, clip, request)
    if family == "qwen2.5-vl":
        h, w = hf_resize(clip.height, clip.width, fam.factor, min_px, max_px)
        times = qwen25_times(-(-len(idx) // fam.tps), fam.tps, sampled_fps(taken, clip.frames, src))
        return _finish(fam, idx, (h, w), times)
    h, w = hf_resize_3d(len(idx), clip.height, clip.width, fam.tps, fam.factor, min_px, max_px)
    return _finish(fam, idx, (h, w), qwen3_times(idx, src if src is not None else UNKNOWN_FPS, fam.tps))


def card_nframes(request: VideoRequest, total: int, fps_src: float) -> int:
    """qwen-vl-utils' ``smart_nframes`` (semantics §20.4): a multiple of 2 in [2, total], else refused."""
    if request.num_frames is not None:
        n = round(request.num_frames / 2) * 2
    else:
        fps = request.fps if request.fps is not None else 2.0
        max_frames = math.floor(min(MAX_FRAMES, total) / 2) * 2
        n = math.floor(min(min(max(total / fps_src * fps, MIN_FRAMES), max_frames), total) / 2) * 2
    if not 2 <= n <= total:
        raise Refused(f"nframes should in interval [2, {total}], but got {n} (ValueError in smart_nframes)")
    return n


def card_plan(family: str, clip: Clip, request: VideoRequest, seq_len: int = MODEL_SEQ_LEN) -> VideoPlan:
    """CARD: qwen-vl-utils 0.0.14's ``fetch_video`` then the processor on its frames (semantics §20.4)."""
    fam = family_of(family)
    total, f = clip.frames, fam.factor
    if not clip.fps > 0:
        raise Refused("video_fps must be a positive number (ValueError in calculate_video_frame_range)")
    n = card_nframes(request, total, clip.fps)
    idx = torch_linspace_round(total, n)
    min_px = request.min_pixels if request.min_pixels is not None else 128 * f * f
    total_px = request.total_pixels if request.total_pixels is not None else seq_len * f * f * 0.9
    max_px = max(min(768 * f * f, total_px / n * 2), int(min_px * 1.05))
    if request.max_pixels is not None:
        max_px = min(request.max_pixels, max_px)
    h, w = card_resize(clip.height, clip.width, f, min_px, max_px)
    if family == "qwen2.5-vl":  # the processor resizes again (its own rule on the card's frames); no metadata
        h, w = hf_resize(h, w, f, fam.min_pixels, fam.max_pixels)
        note = ("the card's fps=[sample_fps] kwarg is refused by transformers 5.24.0; run without it, sampled_fps "
                "falls back to 24",)  # fmt: skip
        return _finish(fam, idx, (h, w), qwen25_times(-(-n // fam.tps), fam.tps, sampled_fps(n, n, None)), note)
    return _finish(fam, idx, (h, w), qwen3_times(idx, clip.fps, fam.tps))


def _arange_last(total: np.ndarray, n: np.ndarray, lanes: int = ARANGE_LANES) -> np.ndarray:
    """`torch_arange_int`'s length and last index for many (total, n) at once (semantics §20.4 "Indices")."""
    step = total / n
    i = (size := np.ceil(total / step).astype(np.int64)) - 1
    base = i - i % lanes
    vec = (np.float64((base * step).astype(F32)) + (i - base) * step).astype(F32)
    last = np.where(i < (size // (2 * lanes)) * 2 * lanes, vec, (i * step).astype(F32)).astype(np.int64)
    return np.where(last < total, size, -1)


def counts(family: str, row: str, frames: np.ndarray, fps: np.ndarray, request: VideoRequest) -> np.ndarray:
    """Frames taken (before padding) per clip, for many clips at once: `plan`'s count rules vectorized for a
    grid's C16 column, -1 where the side refuses on the count or its indices (semantics §20.4); the geometry's
    own refusals (an aspect ratio over 200, a 0-px side) are `plan`'s alone."""
    fam, total, fps = family_of(family), np.asarray(frames, dtype=np.int64), np.asarray(fps, dtype=np.float64)
    known, safe = fps > 0, np.where(fps > 0, fps, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if row == "CARD":
            if request.num_frames is not None:
                n = np.full(total.shape, round(request.num_frames / 2) * 2)
            else:
                want = total / safe * (request.fps if request.fps is not None else 2.0)
                cap = np.floor(np.minimum(MAX_FRAMES, total) / 2) * 2
                n = (np.floor(np.minimum(np.minimum(np.maximum(want, MIN_FRAMES), cap), total) / 2) * 2).astype(
                    np.int64
                )
            return np.where(known & (n >= 2) & (n <= total), n, -1)
        if row != "TRAINED":
            raise InputValueError(f"unknown video row {row!r}; accepted: {', '.join(ROWS)}")
        if family == "qwen3-vl":
            if request.num_frames is not None:
                return np.full(total.shape, -1)
            rate = np.where(known, fps, UNKNOWN_FPS)
            want = np.trunc(total / rate * (request.fps if request.fps is not None else fam.fps)).astype(np.int64)
            n = np.minimum(np.minimum(np.maximum(want, MIN_FRAMES), MAX_FRAMES), total)
            return np.where(n >= fam.tps, n, -1)
        if request.num_frames is None and request.fps is None:
            return total.copy()
        if request.num_frames is not None:
            n, ok = np.full(total.shape, round(request.num_frames / fam.tps) * fam.tps), np.ones(total.shape, bool)
        else:
            cap = np.floor(np.minimum(MAX_FRAMES, total) / fam.tps) * fam.tps
            x = np.minimum(np.minimum(np.maximum(total / safe * request.fps, MIN_FRAMES), cap), total)
            n, ok = (np.floor(x / fam.tps) * fam.tps).astype(np.int64), known
        ok = ok & (n > 0) & (n <= total)
        return np.where(ok, _arange_last(total, np.where(ok, n, 1)), -1)


def plan(family: str, row: str, clip: Clip, request: VideoRequest) -> VideoPlan:
    """The ``row`` side's plan (``"TRAINED"`` or ``"CARD"``) of ``clip`` under ``request`` (semantics §20.4)."""
    if family in ONE_ROW:
        family_of(family)
        if row == "TRAINED":
            from deferlab.reference.oracle import video_gemma4, video_glm

            return (video_gemma4 if family == "gemma4" else video_glm).plan(clip, request)
        if row == "CARD":
            raise Unsupported(f"n/a: {ONE_ROW[family]}")
    if row == "TRAINED":
        return trained_plan(family, clip, request)
    if row == "CARD":
        return card_plan(family, clip, request)
    raise InputValueError(f"unknown video row {row!r}; accepted: {', '.join(ROWS)}")
