"""Requests as a client sends them: a video (and its sampling), an image as encoded bytes (semantics §20).

Why in the description room: the trained side of a video (the checkpoint's video processor, or the model card's
own recipe), deferlab's NumPy restatement of it (``reference.oracle.video``) and each engine's served video path
(``impl.<engine>.media``) answer the same questions about the same clip; the video claims (C16-C19) and the
decoded-bytes claim (C20) compare them through these types, so none of them knows an engine or a family's class.

Pixel-free questions (which frames, how many, what grid, how many tokens, which times) are asked of a `Clip`, the
metadata a sampler reads (frame count, the container's average frame rate, frame size): a sweep over thousands of
durations x frame rates never decodes anything. The pixel questions are asked of encoded bytes (``decode``): a
clip generated here whose every frame carries its own index in its pixels, so which frames were taken is read
back, not inferred (``reference.oracle.video.read_index``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deferlab.reference.system.errors import InputValueError

VIDEO_CLAIMS = ("C16", "C17", "C18", "C19")  # sampling, geometry and tokens, times, pixels (semantics §20.2)
BYTES_CLAIM = "C20"  # the decoded image equals the checkpoint's decode of the same bytes


@dataclass(frozen=True)
class Clip:
    """What a sampler reads of a video before decoding: ``frames`` (the container's frame count), ``fps`` (its
    average frame rate; 0.0 when the container does not say), and the frame size ``width`` x ``height``."""

    frames: int
    fps: float
    width: int = 64
    height: int = 48

    def __post_init__(self) -> None:
        if self.frames < 1:
            raise InputValueError(f"Clip.frames must be at least 1, got {self.frames}")
        if not self.fps >= 0.0:
            raise InputValueError(f"Clip.fps must be >= 0 (0: unknown), got {self.fps}")
        if self.width < 1 or self.height < 1:
            raise InputValueError(f"Clip size must be positive, got {self.width}x{self.height}")

    @property
    def duration(self) -> float:
        """Seconds, as the samplers compute it (frames / fps); 0.0 when the frame rate is unknown."""
        return self.frames / self.fps if self.fps > 0 else 0.0


@dataclass(frozen=True)
class VideoRequest:
    """The options a client passes with a video (None: the side's default). ``fps``: frames to sample per second;
    ``num_frames``: frames to sample; ``min_pixels`` / ``max_pixels`` / ``total_pixels``: the per-frame and total
    pixel budgets of the Qwen recipes. A side that does not accept an option raises `Unsupported`."""

    fps: float | None = None
    num_frames: int | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    total_pixels: int | None = None

    def given(self) -> dict[str, Any]:
        """The options set, by name (what a side forwards to its own code)."""
        return {k: v for k, v in self.__dict__.items() if v is not None}

    def label(self) -> str:
        """``"defaults"`` or ``"fps=1, num_frames=8"``: the option part of a counterexample."""
        return (
            ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.given().items())
            or "defaults"
        )


@dataclass(frozen=True)
class VideoPlan:
    """What one side makes of a clip, pixel-free (semantics §20.2).

    ``indices``: the source frames taken, in the order handed to the processor (a repeat is kept: a padding
    frame repeats the last one, ``padded`` counts those); ``size``: the per-frame resize target (width, height);
    ``grid``: ``video_grid_thw`` (t, h, w); ``tokens``: the placeholder tokens the prompt gets; ``times``: the
    time in seconds the model is told each temporal grid step sits at (Qwen2.5-VL: ``t * second_per_grid_t``;
    Qwen3-VL: its timestamp text), None where the side does not compute one. ``pre_size``: the (width, height)
    an engine resizes the frames to itself before the checkpoint's processor resizes them again (SGLang's own
    pre-resize, semantics §20.5), None where it hands the decoded frames on; the trained side has no such step,
    so it is not compared with it, only with the engine's stated rule (`reference.oracle.video_served`).
    ``stamps``: the prompt text written before each frame's tokens, exactly as written, whitespace and any special
    token included (Gemma 4's ``"MM:SS "``, ``" MM:SS "``: `stamps_before`), None where a side writes none or does
    not read it back; compared only where both sides give it (semantics §20.2).
    """

    indices: tuple[int, ...]
    size: tuple[int, int] | None = None
    grid: tuple[int, int, int] | None = None
    tokens: int | None = None
    times: tuple[float, ...] | None = None
    padded: int = 0
    notes: tuple[str, ...] = field(default=(), compare=False)
    pre_size: tuple[int, int] | None = field(default=None, compare=False)
    stamps: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DecodedVideo:
    """What a side's loader decoded and kept of encoded bytes: ``frames`` (T, H, W, 3) uint8 RGB in order, the
    ``indices`` it says it took (None where it does not say), and the metadata it read (``fps``, ``total``)."""

    frames: np.ndarray
    indices: tuple[int, ...] | None
    fps: float
    total: int


class Unsupported(InputValueError):
    """A side has no answer for this request (an option it does not take, a family it has no video path for):
    the message says which and why; the claim records ``n/a`` for that cell, never a failure."""


class Refused(InputValueError):
    """A side refused the input (the engine's own exception, named in the message): a recorded refusal, compared
    with the other side's answer, never a crash of deferlab."""


@runtime_checkable
class VideoPath(Protocol):
    """One side's video path for one family: the trained side (``label`` ``"TRAINED"`` / ``"CARD"``), deferlab's
    oracle (``"ORACLE"``) or an engine's served path (its column label, e.g. ``"VLLM"``).

    ``plan`` is pixel-free (a `Clip` and a `VideoRequest`); ``decode`` runs the side's own media loader on the
    bytes a client sends (raise `Unsupported` when the side has no loader here, naming what to install)."""

    family: str
    label: str
    system: str
    real_code: bool

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        """The side's sampling, geometry, tokens and times for ``clip`` under ``request``."""

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        """The frames the side's own loader and sampler take from the encoded ``data``."""

    def provenance(self) -> dict[str, str]:
        """Per step: the function that ran (``module.qualname``) or ``"modelled: why"``."""


@runtime_checkable
class ImageLoader(Protocol):
    """One side's loader of an image from the bytes a client sends (claim C20): the checkpoint's ``load_image``
    (transformers' ``image_utils``, or the model card's own) or an engine's media loader. ``load`` returns the
    image as the side hands it to its processor (a PIL image, or an array), or raises `Refused`."""

    label: str
    system: str
    real_code: bool

    def load(self, data: bytes, kind: str) -> Any:
        """Decode ``data``; ``kind`` is how the client sent it: ``"data-uri"`` or ``"file"``."""

    def provenance(self) -> dict[str, str]:
        """The function that decoded, ``module.qualname``."""


class CountedToken(str):
    """A placeholder image token for running a processor's own prompt builder (GLM-4.1V's ``replace_video_token``)
    without a tokenizer: ``token * n`` writes ``<n>`` instead of n copies, so a clip's prompt costs its frames, not
    its hundreds of thousands of tokens; `counted` reads the tokens back off the text."""

    def __mul__(self, n: Any) -> str:  # type: ignore[override]
        return f"<{int(n)}>"

    __rmul__ = __mul__


_COUNT = re.compile(r"<(\d+)>")  # what `CountedToken` writes for n tokens


def counted(text: str) -> int:
    """The image tokens a prompt built with `CountedToken` holds."""
    return sum(int(n) for n in _COUNT.findall(text))


def stamps_before(text: str, boi: str, eoi: str) -> tuple[str, ...]:
    """The text before each ``boi`` since the ``eoi`` before it (or the start): what a prompt tells the model
    between one frame's tokens and the next (`VideoPlan.stamps`), whitespace kept."""
    return tuple(part.rsplit(eoi, 1)[-1] for part in text.split(boi)[:-1])


def differing(a: Sequence[int], b: Sequence[int]) -> str:
    """A short account of where two index sequences part: the first position and both values, or the lengths."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"index {i}: {x} != {y}"
    return f"{len(a)} frames != {len(b)}"


# --- The exhaustive grid (semantics §20.3): every side's plan is compared on every point ---------------------------
# Frame rates clients' videos come in: the broadcast and camera rates (NTSC's 24000/1001, 30000/1001 and
# 60000/1001 among them), screen-capture and slow-motion rates, and low rates of time-lapses and slides.
GRID_FPS = (1.0, 5.0, 8.0, 10.0, 12.0, 12.5, 15.0, 24000 / 1001, 24.0, 25.0, 30000 / 1001, 30.0, 48.0, 50.0,
            60000 / 1001, 60.0, 90.0, 120.0, 144.0, 240.0)  # fmt: skip


def grid_durations() -> tuple[float, ...]:
    """300 durations in seconds: every tenth of a second to 10 s (where frame-count floors and minimums turn),
    then 200 geometrically spaced to 1,200 s (past every side's ``max_duration`` and frame cap)."""
    short = np.round(np.arange(1, 101) * 0.1, 1)
    long = np.geomspace(10.5, 1200.0, 200)
    return tuple(float(d) for d in np.concatenate([short, long]))


def grid_clips(width: int = 64, height: int = 48) -> tuple[Clip, ...]:
    """The 6,000 clips of the grid (300 durations x 20 frame rates): ``frames`` = round(duration x fps), at least 1."""
    return tuple(Clip(max(1, round(d * f)), f, width, height) for d in grid_durations() for f in GRID_FPS)


# --- A user's own video options (semantics §20.3): added to the swept option sets ------------------------------------
OPTIONS_ENV = "DEFERLAB_VIDEO_OPTIONS"  # JSON {"fps": F, "num_frames": N}: the commands' --video-fps / --video-frames
FPS_RANGE = (0.1, 240.0)  # a sampling rate a client may ask (the engines cap theirs lower: each side answers itself)
FRAMES_RANGE = (1, 10_000)  # a frame count a client may ask


def check_options(fps: Any = None, num_frames: Any = None) -> dict[str, Any]:
    """The user's video options, checked (one line naming the option, the value and what is accepted)."""
    out: dict[str, Any] = {}
    if fps is not None:
        try:
            value = float(fps)
        except (TypeError, ValueError):
            value = float("nan")
        if not FPS_RANGE[0] <= value <= FPS_RANGE[1]:
            raise InputValueError(
                f"--video-fps {fps!r}: not a sampling rate deferlab checks; accepted: a number of frames per second "
                f"from {FPS_RANGE[0]:g} to {FPS_RANGE[1]:g}"
            )
        out["fps"] = value
    if num_frames is not None:
        if isinstance(num_frames, bool) or not str(num_frames).strip().isdigit():
            raise InputValueError(
                f"--video-frames {num_frames!r}: not a whole number; accepted: {FRAMES_RANGE[0]} to {FRAMES_RANGE[1]:,}"
            )
        count = int(str(num_frames).strip())
        if not FRAMES_RANGE[0] <= count <= FRAMES_RANGE[1]:
            raise InputValueError(
                f"--video-frames {num_frames}: out of range; accepted: {FRAMES_RANGE[0]} to {FRAMES_RANGE[1]:,}"
            )
        out["num_frames"] = count
    return out


def user_requests(text: str | None) -> tuple[VideoRequest, ...]:
    """The requests a user's options add to the sweep (``OPTIONS_ENV``'s JSON; empty when unset): one per option."""
    import json

    if not text:
        return ()
    given = check_options(**json.loads(text))
    return tuple(VideoRequest(**{k: v}) for k, v in given.items())
