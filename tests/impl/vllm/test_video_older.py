"""vLLM's video path on every release of the matrix (semantics §20.6, older releases), on the in-process release
(``DEFERLAB_VLLM``): Qwen2.5-VL's loader lookup refusing every request where §20.6 says the release does
(0.27.0-0.30.0 with the transformers their pins resolve to), and the frames vLLM's own OpenCV loader reads from
generated clips, where the container step moved (inline before 0.29.0, without the end-of-stream seek)."""

from __future__ import annotations

import pytest

from deferlab.reference.system.releases import in_range
from deferlab.reference.system.video import Clip, VideoRequest

pytestmark = [pytest.mark.extra("vllm"), pytest.mark.extra("transformers")]
VIDEO = pytest.mark.extra("video")  # PyAV encodes the clips, OpenCV is vLLM's default codec


def _release(source) -> str:
    return source.name.partition("-")[2]


@pytest.fixture(scope="module")
def paths(vllm_source):
    from deferlab.impl.vllm.video import video_paths

    return {family: video_paths(vllm_source, family)[0] for family in ("qwen2.5-vl", "qwen3-vl")}


def test_qwen25_is_refused_at_the_loader_lookup_exactly_where_section_20_6_says(paths, vllm_source):
    """0.27.0-0.30.0 (transformers 5.25.0's dict mapping, no unwrap): every request refused with vLLM's own
    ``TypeError``, the plan and the bytes alike; 0.31.0 on: the ``qwen2_vl`` loader, and a plan."""
    path, refused = paths["qwen2.5-vl"], in_range(_release(vllm_source), "0.27.0", "0.30.0")
    if not refused:
        assert path.backend == "qwen2_vl" and path.plan(Clip(10, 30.0), VideoRequest()).indices == (0, 2, 5, 7)
        return
    assert path.backend is None and "TypeError: unhashable type: 'dict'" in path.provenance()["loader"]
    for clip, request in ((Clip(10, 30.0), VideoRequest()), (Clip(120, 30.0), VideoRequest(fps=4.0))):
        with pytest.raises(TypeError, match="unhashable type: 'dict'"):
            path.plan(clip, request)
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):
        path.decode(b"\0", VideoRequest())
    assert paths["qwen3-vl"].backend == "qwen3_vl"  # Qwen3-VL's checkpoint names its video processor: no mapping


@VIDEO
def test_qwen3_reads_the_generated_clips_as_its_release_does(paths, vllm_source):
    """The constant clip: 8 frames in every release. The WebM clip (OpenCV's header says 5,311 frames, 60 are
    there): before 0.29.0 vLLM samples over the header count and reads the chosen indices below 60; from 0.29.0
    the end-of-stream seek corrects the count (semantics §20.6)."""
    from deferlab.properties import clips

    path = paths["qwen3-vl"]
    constant = path.decode(clips.encode(clips.KINDS["constant"]), VideoRequest())
    assert constant.indices == (0, 17, 34, 51, 68, 85, 102, 119) and constant.frames.shape == (8, 48, 64, 3)
    webm = path.decode(clips.encode(clips.KINDS["webm"]), VideoRequest())
    if in_range(_release(vllm_source), "0.27.0", "0.28.0"):
        assert (webm.total, webm.indices) == (5311, (0, 15, 30, 45))
    else:
        assert (webm.total, webm.indices) == (60, (0, 20, 39, 59))
