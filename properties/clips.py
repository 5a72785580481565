"""Encoded clips generated here by PyAV, every frame carrying its own index in its pixels (semantics §20.3).

Why generate: C16 on bytes and C19 need videos whose frames say which they are, in the containers and codecs
clients send (H.264 in MP4 at yuv420p; VP9 in WebM), with the awkward cases a sampler meets (NTSC rates,
jittered timestamps, fewer frames than a minimum, past ``max_duration``, odd sizes, rotation metadata). Each
frame is `reference.oracle.video.encode_index` of its index, so `read_index` on a decoded frame says which
source frame a side took. A clip is encoded once and cached by the hash of its spec under the deferlab cache
(``<cache>/clips``), written atomically. `clip_of` reads the metadata back from the container (a sampler's
`Clip`), never from the spec.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from deferlab.reference.oracle.video import encode_index
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.video import Clip

CODECS = {"mp4": "libx264", "webm": "libvpx-vp9"}
ROTATIONS = (0, 90, 180, 270)
_JITTER = 0.3  # a VFR frame's timestamp moves by up to this fraction of the nominal frame interval
VERSION = 2  # bump when the encoding or the index code changes: part of the cache key


@dataclass(frozen=True)
class ClipSpec:
    """A clip to generate: ``frames`` at ``fps`` (a float; NTSC rates as 30000/1001 and so on), ``width`` x
    ``height`` (H.264/VP9 at yuv420p take even sizes: an odd side is encoded one pixel smaller, `even_size`),
    ``container`` "mp4" (H.264) or "webm" (VP9), ``vfr`` (timestamps jittered, seeded by the spec), and
    ``rotation`` (0/90/180/270, the stream's display matrix)."""

    frames: int
    fps: float
    width: int = 64
    height: int = 48
    container: str = "mp4"
    vfr: bool = False
    rotation: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.frames <= 1 << 16:
            raise InputValueError(f"ClipSpec.frames must be 1..65536 (the index code's range), got {self.frames}")
        if not self.fps > 0:
            raise InputValueError(f"ClipSpec.fps must be positive, got {self.fps}")
        if self.container not in CODECS:
            raise InputValueError(f"ClipSpec.container {self.container!r} unknown; accepted: {', '.join(CODECS)}")
        if self.rotation not in ROTATIONS:
            raise InputValueError(f"ClipSpec.rotation {self.rotation} unknown; accepted: {ROTATIONS}")
        if self.width < 16 or self.height < 16:
            raise InputValueError(f"ClipSpec size {self.width}x{self.height} too small; accepted: at least 16x16")

    @property
    def rate(self) -> Fraction:
        """The frame rate as the container's rational (29.97... -> 30000/1001)."""
        return Fraction(self.fps).limit_denominator(1001)

    @property
    def even_size(self) -> tuple[int, int]:
        """(width, height) as encoded: each odd side one pixel smaller (yuv420p's 2x2 chroma blocks)."""
        return self.width - self.width % 2, self.height - self.height % 2

    def key(self) -> str:
        return hashlib.sha256(json.dumps({**asdict(self), "v": VERSION}, sort_keys=True).encode()).hexdigest()[:20]


KINDS: dict[str, ClipSpec] = {
    "constant": ClipSpec(120, 30.0),  # 4 s at 30 fps
    "ntsc": ClipSpec(120, 30000 / 1001),
    "vfr": ClipSpec(120, 30.0, vfr=True),
    "short": ClipSpec(3, 30.0),  # fewer than every side's minimum of 4
    "one": ClipSpec(1, 30.0),
    "long": ClipSpec(310, 1.0),  # 310 s, past a 300 s max_duration, at 1 fps so it stays small
    "odd": ClipSpec(120, 30.0, 63, 47),  # encoded 62x46
    "rotation90": ClipSpec(120, 30.0, rotation=90),
    "webm": ClipSpec(60, 30.0, container="webm"),
}


def codec_available(spec: ClipSpec) -> bool:
    import av

    return CODECS[spec.container] in av.codecs_available


def _time_base(spec: ClipSpec) -> Fraction:
    """MPEG's 90 kHz clock (libx264 in MP4 refused 1/1000 and 1 / (rate x 1000) for 1 fps clips past a few
    frames with EINVAL; 90 kHz took every rate tried)."""
    return Fraction(1, 90000)


def _pts(spec: ClipSpec) -> list[int]:
    """Presentation times in `_time_base` ticks: frame i at round(i / rate), or jittered (monotonic) for VFR."""
    step = 90000 / spec.rate
    even = np.array([round(i * step) for i in range(spec.frames)], dtype=np.int64)
    if not spec.vfr:
        return [int(v) for v in even]
    rng = np.random.default_rng(int(spec.key()[:8], 16))
    reach = int(_JITTER * step)
    moved = even + rng.integers(-reach, reach + 1, spec.frames)
    moved[0] = 0
    return [int(v) for v in moved]


def _encode(spec: ClipSpec) -> bytes:
    import av

    if not codec_available(spec):
        raise InputValueError(f"no {CODECS[spec.container]} encoder in this PyAV build (av.codecs_available)")
    width, height = spec.even_size
    buf = io.BytesIO()
    with av.open(buf, "w", format=spec.container) as out:
        stream = out.add_stream(CODECS[spec.container], rate=spec.rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = _time_base(spec)
        stream.codec_context.time_base = stream.time_base
        if spec.rotation:
            stream.set_display_rotation(spec.rotation)
        for i, pts in enumerate(_pts(spec)):
            frame = av.VideoFrame.from_ndarray(encode_index(height, width, i), format="rgb24")
            frame.pts, frame.time_base = pts, stream.time_base
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return buf.getvalue()


def cache_dir() -> Path:
    from deferlab.impl.loader.wheels import deferlab_cache

    return deferlab_cache() / "clips"


def encode(spec: ClipSpec) -> bytes:
    """The clip's bytes, from the cache when encoded before (keyed by the spec's hash), else encoded by PyAV and
    written atomically (a temporary file, then ``os.replace``)."""
    path = cache_dir() / f"{spec.key()}.{spec.container}"
    if path.is_file():
        return path.read_bytes()
    from deferlab.impl.loader.release_files import write_atomic

    data = _encode(spec)
    write_atomic(path, data, mode=None)
    return data


def clip_of_bytes(data: bytes) -> Clip:
    """The `Clip` a sampler reads of ``data``: the stream's frame count (counted from the packets where the
    container does not say, as WebM does not), its average rate (0.0 when absent) and its coded size."""
    import av

    with av.open(io.BytesIO(data)) as c:
        s = c.streams.video[0]
        frames = int(s.frames) or sum(1 for p in c.demux(s) if p.size)
        return Clip(frames, float(s.average_rate or 0.0), int(s.width), int(s.height))


def reported_frames(data: bytes) -> int:
    """The frame count the container itself states (PyAV's ``stream.frames``), 0 where it says none (WebM): the
    count transformers' PyAV ``load_video`` samples over (semantics §20.4), unlike `clip_of_bytes`' counted one."""
    import av

    with av.open(io.BytesIO(data)) as c:
        return int(c.streams.video[0].frames)


def clip_of(spec: ClipSpec) -> Clip:
    """The metadata of ``spec``'s encoded clip as the container reports it (semantics §20.3)."""
    return clip_of_bytes(encode(spec))


def decode(data: bytes) -> np.ndarray:
    """Every frame of ``data`` in decode order as (T, H, W, 3) uint8 RGB (PyAV), the display matrix not applied."""
    import av

    with av.open(io.BytesIO(data)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def rotation_of(data: bytes) -> int:
    """The rotation the first decoded frame reports (PyAV's ``VideoFrame.rotation``, from the display matrix)."""
    import av

    with av.open(io.BytesIO(data)) as c:
        return int(next(iter(c.decode(video=0))).rotation)
