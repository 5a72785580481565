"""`impl.sglang.video`: SGLang's own Qwen video path (semantics §20.5) against what its code was read to do.

What is checked against what: the frames SGLang's ``preprocess_video`` asks its reader for against SGLang's
sampling rule restated here from §20.5 (``smart_nframes``' even count, truncating ``linspace``); the size, grid and
tokens against SGLang's 28-factor pre-resize and the checkpoint processor's own resize, restated here; the times
against §20.5's (Qwen2.5-VL's 2/24 s per grid step, Qwen3-VL's averaged frame times); SGLang's refusals; and the
decoder it needs. The path computes with the release's transformers and torchvision (loader companions), which
cannot join this process (it imported deferlab's transformers long ago): it runs in a child, this module run as
``python -m tests.impl.sglang.test_video SPEC``, which prints one `support.JSON_MARK` line.
"""

from __future__ import annotations

import io
import json
import math
import sys
import time
from typing import Any

import numpy as np
import pytest

from deferlab.reference.system.video import Clip, VideoRequest, grid_clips
from tests.impl.sglang.support import JSON_MARK, default_spec, run_child

FAMILIES = ("qwen2.5-vl", "qwen3-vl")
WORKED = ((2, 1.0), (3, 1.0), (4, 1.0), (5, 1.0), (7, 1.0), (120, 30.0), (300, 30000 / 1001), (36000, 30.0))
OPTIONS = (
    VideoRequest(),
    VideoRequest(fps=1.0),
    VideoRequest(fps=4.0),
    VideoRequest(num_frames=8),
    VideoRequest(min_pixels=64 * 28 * 28, max_pixels=256 * 28 * 28),
    VideoRequest(total_pixels=20 * 100352),
)
REFUSED = (
    (1, 1.0, VideoRequest()),
    (5, 1.0, VideoRequest(num_frames=8)),
    (60, 30.0, VideoRequest(fps=1, num_frames=8)),
)
DECODE_CLIP = (24, 6.0, 64, 48)  # frames, fps, width, height: 4 s; SGLang takes 8 of its 24 frames
CHECKPOINT = {  # the processor SGLang hands the frames to: (factor, min_pixels, max_pixels, 3-D budget)
    "qwen2.5-vl": (28, 3136, 12845056, False),
    "qwen3-vl": (32, 4096, 25165824, True),
}


# --- SGLang's rules as §20.5 states them, restated here ----------------------------------------------------------
def sglang_indices(total: int, fps_src: float, request: VideoRequest) -> list[int] | None:
    """§20.5's sampling: an even count, truncating linspace; None where SGLang refuses."""
    if request.fps is not None and request.num_frames is not None:
        return None
    if request.num_frames is not None:
        n = round(request.num_frames / 2) * 2
    else:
        fps = 2.0 if request.fps is None else request.fps
        top = math.floor(min(768, total) / 2) * 2
        n = math.floor(min(max(total / fps_src * fps, 4), top, total) / 2) * 2
    if not 2 <= n <= total:
        return None
    return [int(i) for i in np.linspace(0, total - 1, n).astype(np.int64)]


def resize_2d(h: float, w: float, factor: int, lo: float, hi: float) -> tuple[int, int]:
    hb, wb = max(factor, round(h / factor) * factor), max(factor, round(w / factor) * factor)
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        return math.floor(h / beta / factor) * factor, math.floor(w / beta / factor) * factor
    if hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        return math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def resize_3d(n: int, h: int, w: int, factor: int, lo: int, hi: int) -> tuple[int, int]:
    hb, wb, tb = round(h / factor) * factor, round(w / factor) * factor, round(n / 2) * 2
    if tb * hb * wb > hi:
        beta = math.sqrt(n * h * w / hi)
        return max(factor, math.floor(h / beta / factor) * factor), max(factor, math.floor(w / beta / factor) * factor)
    if tb * hb * wb < lo:
        beta = math.sqrt(lo / (n * h * w))
        return math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def sglang_geometry(family: str, n: int, h: int, w: int, request: VideoRequest) -> dict[str, Any]:
    """§20.5: SGLang's pre-resize (factor 28, its per-frame budget), then the checkpoint processor's own."""
    lo = request.min_pixels if request.min_pixels is not None else 128 * 28 * 28
    total = request.total_pixels if request.total_pixels is not None else int(128000 * 28 * 28 * 0.9)
    hi = max(min(request.max_pixels or 768 * 28 * 28, total / n * 2), int(lo * 1.05))
    hi = min(request.max_pixels if request.max_pixels is not None else hi, hi)
    ph, pw = resize_2d(h, w, 28, lo, hi)
    factor, clo, chi, three_d = CHECKPOINT[family]
    rh, rw = resize_3d(n, ph, pw, factor, clo, chi) if three_d else resize_2d(ph, pw, factor, clo, chi)
    patch = factor // 2
    grid = [(n + n % 2) // 2, rh // patch, rw // patch]
    return {"size": [rw, rh], "grid": grid, "tokens": grid[0] * grid[1] * grid[2] // 4}


def sglang_times(family: str, indices: list[int], fps_src: float) -> list[float]:
    if family == "qwen2.5-vl":
        return [t * 2 / 24 for t in range(len(indices) // 2)]  # no metadata handed over: sampled_fps falls back to 24
    return [(indices[i] + indices[i + 1]) / 2 / fps_src for i in range(0, len(indices), 2)]


# --- the child: SGLang loaded with its companions ----------------------------------------------------------------
def _plan_record(path: Any, clip: Clip, request: VideoRequest) -> dict[str, Any]:
    try:
        p = path.plan(clip, request)
    except Exception as exc:  # noqa: BLE001 - the test reads the refusal's type and text
        return {"refused": f"{type(exc).__name__}: {exc}"}
    return {"indices": list(p.indices), "size": list(p.size), "grid": list(p.grid), "tokens": p.tokens,
            "times": list(p.times), "padded": p.padded, "notes": list(p.notes)}  # fmt: skip


def _encoded_clip() -> bytes | None:
    """An H.264 MP4 whose frame i is a flat grey of level 20 + 9 i (read back from its mean); None without av."""
    try:
        import av
    except ImportError:
        return None
    frames, fps, w, h = DECODE_CLIP
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=int(fps))
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"crf": "10"}
        for i in range(frames):
            image = np.full((h, w, 3), 20 + 9 * i, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


def child(spec: str) -> dict[str, Any]:
    from deferlab.impl.sglang.sources import load
    from deferlab.impl.sglang.video import video_paths
    from deferlab.reference.system.video import Unsupported

    source = load(spec, companions=("transformers", "torchvision"))
    out: dict[str, Any] = {"companions": {k: c.version for k, c in source.companions.items()}, "families": {}}
    subset = grid_clips()[::10]
    data = _encoded_clip()
    for family in FAMILIES:
        path = video_paths(source, family)[0]
        rec: dict[str, Any] = {"label": path.label, "system": path.system, "real_code": path.real_code}
        rec["worked"] = [
            [f, fps, i, _plan_record(path, Clip(f, fps), r)] for f, fps in WORKED for i, r in enumerate(OPTIONS)
        ]
        rec["refused"] = [_plan_record(path, Clip(f, fps), r) for f, fps, r in REFUSED]
        t0 = time.perf_counter()
        rec["grid"] = [[c.frames, c.fps, i, _plan_record(path, c, OPTIONS[i]).get("indices")]
                       for c in subset for i in (0, 1, 3)]  # fmt: skip
        rec["grid_seconds"] = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            got = path.decode(data, VideoRequest()) if data is not None else None
            rec["decode_seconds"] = time.perf_counter() - t0
            rec["decode"] = None if got is None else {"levels": [float(f.mean()) for f in got.frames],
                                                      "indices": list(got.indices), "fps": got.fps, "total": got.total}  # fmt: skip
        except Unsupported as exc:
            rec["decode"] = {"unsupported": str(exc)}
        rec["provenance"] = path.provenance()
        out["families"][family] = rec
    out["others"] = {}
    for family in ("kimi-k3", "internvl"):
        try:
            video_paths(source, family)
            out["others"][family] = "accepted"
        except Unsupported as exc:
            out["others"][family] = str(exc)
    return out


# --- the tests ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served() -> dict[str, Any]:
    spec = default_spec()
    return run_child("tests.impl.sglang.test_video", spec, spec=spec, timeout=900, module=True)


pytestmark = pytest.mark.extra("transformers")


@pytest.mark.parametrize("family", FAMILIES)
def test_sglang_takes_the_frames_its_smart_nframes_and_truncating_linspace_give(served, family):
    rec = served["families"][family]
    assert [rec["label"], rec["real_code"]] == ["SGLANG", True]
    checked = 0
    for frames, fps, i, got in rec["grid"] + [[f, fps, i, r.get("indices")] for f, fps, i, r in rec["worked"]]:
        request = OPTIONS[i]
        assert got == sglang_indices(frames, fps, request), f"{frames}@{fps:g} {request.label()}"
        checked += got is not None
    assert checked > 1500  # the grid subset answered (1-frame clips and short clips under num_frames refuse)


@pytest.mark.parametrize("family", FAMILIES)
def test_size_grid_tokens_and_times_are_sglangs_pre_resize_then_the_processors(served, family):
    for frames, fps, i, got in served["families"][family]["worked"]:
        request = OPTIONS[i]
        where = f"{family} {frames}@{fps:g} {request.label()}"
        idx = sglang_indices(frames, fps, request)
        if idx is None:
            assert "refused" in got, where
            continue
        want = sglang_geometry(family, len(idx), 48, 64, request)
        assert {k: got[k] for k in want} == want, where
        assert got["padded"] == 0, where  # SGLang's count is even
        assert np.abs(np.array(got["times"]) - sglang_times(family, idx, fps)).max() <= 1e-9, where
        assert any("mm-process-config" in n for n in got["notes"]), where


def test_worked_clips_match_the_semantics_table(served):
    """§20.5's table, by number: 64x48 becomes 392x280 before the processor; Qwen3-VL cuts it again to 384x288."""
    q25 = {(f, fps, i): r for f, fps, i, r in served["families"]["qwen2.5-vl"]["worked"]}
    q3 = {(f, fps, i): r for f, fps, i, r in served["families"]["qwen3-vl"]["worked"]}
    assert q25[(3, 1.0, 0)]["indices"] == [0, 2] and q3[(3, 1.0, 0)]["times"] == [1.0]
    assert q25[(5, 1.0, 0)]["indices"] == [0, 1, 2, 4]  # the card rounds: [0, 1, 3, 4]
    assert q25[(4, 1.0, 0)]["times"] == [0.0, 2 / 24] and q25[(4, 1.0, 0)]["size"] == [392, 280]
    assert q3[(4, 1.0, 0)]["size"] == [384, 288] and q3[(4, 1.0, 0)]["grid"] == [2, 18, 24]
    assert len(q3[(36000, 30.0, 0)]["indices"]) == 768 and q3[(36000, 30.0, 0)]["size"] == [192, 128]


@pytest.mark.parametrize("family", FAMILIES)
def test_sglangs_own_refusals_are_recorded_with_their_exception(served, family):
    one, too_many, both = served["families"][family]["refused"]
    assert one["refused"].startswith("Refused: ") and "ValueError: nframes should in interval [2, 1]" in one["refused"]
    assert "ValueError" in too_many["refused"] and "AssertionError" in both["refused"]
    assert all("\n" not in r["refused"] for r in (one, too_many, both))


def test_families_without_an_sglang_video_path_are_na_with_the_reason(served):
    assert served["others"]["kimi-k3"].startswith("n/a: ") and "image input only" in served["others"]["kimi-k3"]
    assert served["others"]["internvl"].startswith("n/a: ") and "no video processor" in served["others"]["internvl"]


@pytest.mark.extra("video")
@pytest.mark.parametrize("family", FAMILIES)
def test_decode_runs_sglangs_loader_or_names_the_decoder_to_install(served, family):
    rec = served["families"][family]
    got = rec["decode"]
    assert got is not None  # the child generated the clip with PyAV
    if "unsupported" in got:  # torchcodec and decord are SGLang's only decoders; neither is in the video extra
        assert "pip install decord" in got["unsupported"] and "\n" not in got["unsupported"]
        return
    frames, fps, _, _ = DECODE_CLIP
    read_back = [round((level - 20) / 9) for level in got["levels"]]
    assert read_back == got["indices"] == sglang_indices(frames, fps, VideoRequest())
    assert (got["fps"], got["total"]) == (fps, frames)


@pytest.mark.parametrize("family", FAMILIES)
def test_provenance_names_sglangs_functions_and_every_stand_in(served, family):
    prov = served["families"][family]["provenance"]
    assert "smart_nframes (own)" in prov["sampling"] and "preprocess_video (own)" in prov["indices"]
    assert prov["reader"].startswith("stand-in") and "stand-in" in prov["pre_resize"]
    assert "get_num_of_video_patches" in prov["geometry"] and served["companions"]["transformers"] in prov["geometry"]
    if default_spec() == "0.5.23":
        assert served["companions"]["transformers"] == "5.19.0"


if __name__ == "__main__":
    print(JSON_MARK + json.dumps(child(sys.argv[1])))
