"""LMDeploy's Qwen3-VL video path, run in a child process of its own (``python -m tests.impl.lmdeploy.video_child
SPEC``; semantics §20.7).

Why a child: the path computes with the release's pinned transformers and torchvision (loader companions), which
must be active before anything imports transformers; a test session has imported deferlab's own (5.24.0) long
before (the InternVL fixture's load does). The child loads LMDeploy with the path's companions, plans the worked
clips, decodes clips it encodes with PyAV (each frame's index written in its pixels, `encode_clip`), and prints
one ``JSON:`` line the test reads. A release that cannot be fetched prints ``{"skip": why}``.
"""

from __future__ import annotations

import io
import json
import sys
import time
from typing import Any

import numpy as np

from deferlab.reference.system.video import Clip, VideoRequest
from tests.child import JSON_MARK

BITS = 8  # the index code: 8 vertical bands of 8 px, each black (0) or white (1), most significant first

# (clip, request) points the test derives by hand from semantics §20.7.
CASES: list[tuple[Clip, VideoRequest]] = [
    (Clip(5, 5.0), VideoRequest()),
    (Clip(300, 30.0), VideoRequest()),
    (Clip(10, 5.0), VideoRequest(fps=1.0)),
    (Clip(2, 5.0), VideoRequest(fps=1.0)),
    (Clip(20, 0.0), VideoRequest()),
    (Clip(100, 25.0), VideoRequest(num_frames=8)),
    (Clip(100, 25.0), VideoRequest(fps=4.0, num_frames=8)),
    (Clip(4, 2.0), VideoRequest(min_pixels=64 * 28 * 28, max_pixels=256 * 28 * 28)),
    (Clip(10, 5.0), VideoRequest(total_pixels=10**6)),
]


def encode_clip(frames: int, fps: int, width: int = 64, height: int = 48) -> bytes:
    """An H.264 MP4 (yuv420p) of ``frames`` frames whose frame k shows k in `BITS` black/white bands."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"crf": "10"}
        band = width // BITS
        for k in range(frames):
            img = np.zeros((height, width, 3), np.uint8)
            for b in range(BITS):
                if (k >> (BITS - 1 - b)) & 1:
                    img[:, b * band : (b + 1) * band] = 255
            out.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        out.mux(stream.encode(None))
    return buf.getvalue()


def read_index(frame: np.ndarray) -> int:
    """The index `encode_clip` wrote: each band's mean above mid-grey is a 1."""
    band = frame.shape[1] // BITS
    bits = [int(frame[:, b * band + 2 : (b + 1) * band - 2].mean() > 127) for b in range(BITS)]
    return int("".join(map(str, bits)), 2)


def planned(path: Any, clip: Clip, request: VideoRequest) -> dict[str, Any]:
    try:
        p = path.plan(clip, request)
    except Exception as exc:  # noqa: BLE001 - the kind and message are what the test checks
        return {"error": type(exc).__name__, "message": str(exc)}
    return {"indices": list(p.indices), "size": list(p.size), "grid": list(p.grid), "tokens": p.tokens,
            "times": list(p.times), "padded": p.padded, "notes": list(p.notes)}  # fmt: skip


def decoded(path: Any, data: bytes, request: VideoRequest) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        got = path.decode(data, request)
    except Exception as exc:  # noqa: BLE001
        return {"error": type(exc).__name__, "message": str(exc)}
    seconds = time.perf_counter() - started
    plan = path.plan(Clip(got.total, got.fps, got.frames.shape[2], got.frames.shape[1]), request)
    return {"read_back": [read_index(f) for f in got.frames], "indices": list(got.indices or ()),
            "planned": list(plan.indices[: len(plan.indices) - plan.padded]), "shape": list(got.frames.shape), "fps": got.fps, "total": got.total,
            "seconds": seconds}  # fmt: skip


def main(spec: str) -> dict[str, Any]:
    from deferlab.impl.lmdeploy import sources
    from deferlab.impl.lmdeploy.video import COMPANIONS, backend_path, video_paths

    try:
        source = sources.load(spec, companions=COMPANIONS["qwen3-vl"])
    except sources.LMDeployFetchError as exc:
        return {"skip": f"LMDeploy {spec} cannot be fetched: {exc}"}
    path = video_paths(source, "qwen3-vl")[0]
    data = encode_clip(100, 25)
    result = {
        "system": path.system,
        "plans": [planned(path, c, r) for c, r in CASES],
        "decode": {
            label: decoded(path, data, r)
            for label, r in (
                ("defaults", VideoRequest()),
                ("num_frames=8", VideoRequest(num_frames=8)),
                ("fps=1", VideoRequest(fps=1.0)),
            )
        },  # fmt: skip
        "short": decoded(path, encode_clip(3, 25), VideoRequest()),
        "one": decoded(path, encode_clip(1, 25), VideoRequest()),
        "decord": decoded(backend_path(source, "qwen3-vl", "decord"), data, VideoRequest()),
        "provenance": path.provenance(),
    }
    return result


if __name__ == "__main__":
    print(JSON_MARK + json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "0.18.0")))
