"""LMDeploy's served video path against what semantics §20.7 read in its code, on the newest release.

The expected numbers are derived here by hand from §20.7's rules (32 frames by count with the loader's truncating
``linspace``, ``floor(duration x fps)`` under a rate, the processor's size rule and ``(i + j) / 2 / fps`` times), never
by calling the functions the path runs. The Qwen3-VL path runs in a child process (`video_child`): it needs the
release's pinned transformers, which this session's InternVL fixture has already made impossible in-process.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from deferlab.impl.lmdeploy.sources import DEFAULT_VERSION
from deferlab.impl.lmdeploy.video import Qwen3VideoPath, video_paths
from deferlab.reference.system.video import Unsupported
from tests.child import run_child

VIDEO = pytest.mark.extra("video")  # PyAV encodes the clips, OpenCV is LMDeploy's default backend
SPEC = os.environ.get("DEFERLAB_LMDEPLOY", DEFAULT_VERSION)


def truncated_linspace(total: int, n: int) -> list[int]:
    """``np.linspace(0, total - 1, n, dtype=int)`` by integer arithmetic (exact where the products are)."""
    return [k * (total - 1) // (n - 1) for k in range(n)] if n > 1 else [0]


def pair_times(indices: list[int], fps: float) -> list[float]:
    """The mean time of each temporal pair, the last frame repeated to make the count even."""
    idx = indices + indices[-1:] * (len(indices) % 2)
    return [(idx[i] + idx[i + 1]) / 2 / fps for i in range(0, len(idx), 2)]


@pytest.mark.parametrize("family", ["qwen2.5-vl", "internvl", "gemma3"])
def test_families_without_a_video_path_are_na(lmdeploy_source, family):
    with pytest.raises(Unsupported, match=r"^n/a: .*(Unsupported message type: video|images only|no LMDeploy video)"):
        video_paths(lmdeploy_source, family)


def test_qwen3_path_names_the_companion_it_lacks(lmdeploy_source):
    if "transformers" in lmdeploy_source.companions:
        assert video_paths(lmdeploy_source, "qwen3-vl")[0].label == "LMDEPLOY"
    else:
        with pytest.raises(Unsupported, match=r"without its transformers companion"):
            Qwen3VideoPath(lmdeploy_source)


@pytest.fixture(scope="module")
def child() -> dict[str, Any]:
    found = run_child("tests.impl.lmdeploy.video_child", SPEC, module=True, timeout=600)
    if "skip" in found:
        pytest.skip(found["skip"])
    return found


@VIDEO
def test_default_request_takes_32_frames_by_count(child):
    short, long = child["plans"][0], child["plans"][1]
    assert short["indices"] == [0, 1, 2, 3, 4, 4]  # N <= 32: every frame (no fps rule by default), 4 repeated
    assert (short["size"], short["grid"], short["tokens"], short["padded"]) == ([64, 64], [3, 4, 4], 12, 1)
    assert short["times"] == pytest.approx(pair_times([0, 1, 2, 3, 4], 5.0), abs=1e-9)
    assert long["indices"] == truncated_linspace(300, 32)
    assert (long["grid"], long["tokens"], long["padded"]) == ([16, 4, 4], 64, 0)
    assert long["times"] == pytest.approx(pair_times(truncated_linspace(300, 32), 30.0), abs=1e-9)


@VIDEO
def test_fps_caps_the_count_at_floor_of_duration_times_fps(child):
    ten, two = child["plans"][2], child["plans"][3]
    assert ten["indices"] == truncated_linspace(10, math.floor(10 / 5.0 * 1.0))  # 2 s at 1 fps: [0, 9], no pad
    assert ten["times"] == pytest.approx([4.5 / 5.0], abs=1e-9)
    assert two["error"] == "Refused" and "temporal_factor" in two["message"]  # 0.4 s: one frame, refused


@VIDEO
def test_unknown_rate_divides_by_zero_in_the_timestamps(child):
    assert child["plans"][4]["error"] == "Refused" and "ZeroDivisionError" in child["plans"][4]["message"]


@VIDEO
def test_num_frames_replaces_the_32_and_the_smaller_count_wins(child):
    eight, both = child["plans"][5], child["plans"][6]
    assert eight["indices"] == truncated_linspace(100, 8) == [0, 14, 28, 42, 56, 70, 84, 99]
    assert both["indices"] == eight["indices"]  # fps 4 on 4 s allows 16: num_frames 8 is the smaller
    assert (eight["grid"], eight["tokens"]) == ([4, 4, 4], 16)


@VIDEO
def test_min_pixels_reaches_the_processor_as_its_size(child):
    plan = child["plans"][7]
    # 4 frames of 64x48, min_pixels 50176: 4 x 64 x 64 < 50176, so scale by sqrt(50176 / (4 x 48 x 64))
    beta = math.sqrt(50176 / (4 * 48 * 64))
    height, width = math.ceil(48 * beta / 32) * 32, math.ceil(64 * beta / 32) * 32
    assert plan["size"] == [width, height] == [160, 128]
    assert plan["grid"] == [2, height // 16, width // 16] and plan["tokens"] == 2 * (height // 16) * (width // 16) // 4


@VIDEO
def test_total_pixels_is_not_taken(child):
    assert child["plans"][8]["error"] == "Unsupported" and "total_pixels" in child["plans"][8]["message"]


@VIDEO
@pytest.mark.parametrize("label", ["defaults", "num_frames=8", "fps=1"])
def test_decode_takes_the_frames_the_plan_names(child, label):
    got = child["decode"][label]
    assert got["read_back"] == got["indices"] == got["planned"]
    assert (got["total"], got["fps"], got["shape"][1:]) == (100, 25.0, [48, 64, 3])
    want = {"defaults": truncated_linspace(100, 32), "num_frames=8": truncated_linspace(100, 8),
            "fps=1": truncated_linspace(100, 4)}[label]  # fmt: skip
    assert got["read_back"] == want


@VIDEO
def test_decode_of_a_short_clip_takes_every_frame(child):
    assert child["short"]["read_back"] == [0, 1, 2]


@VIDEO
def test_decode_refuses_what_its_processor_refuses(child):
    """One frame kept: LMDeploy's request fails in the processor (t:1 under the temporal patch of 2), so the decode
    refuses it as its plan does, not hands the frame on (semantics §20.7, "C19's served refusal")."""
    one = child["one"]
    assert one["error"] == "Refused" and "processor refuses the 1 frame(s)" in one["message"], one
    assert "temporal_factor" in one["message"]


@VIDEO
def test_a_backend_not_installed_names_what_to_install(child):
    if child["decord"].get("error") is None:
        pytest.skip("decord is installed here: its decode ran")
    assert child["decord"]["error"] == "Unsupported" and "pip install decord" in child["decord"]["message"]


@VIDEO
def test_provenance_names_the_engine_and_companion_functions(child):
    steps = child["provenance"]
    assert steps["sample"] == "lmdeploy.vl.media.video_loader.VideoLoader.smart_nframes"
    assert "OpenCVVideoLoader.load_bytes" in steps["decode"]
    assert steps["processor kwargs"].startswith("lmdeploy.vl.model.base.VisionModel.preprocess")
    assert "Qwen3VLVideoProcessor" in steps["geometry"] and "_calculate_timestamps" in steps["times"]
    assert steps["companion transformers"].startswith("transformers ")
