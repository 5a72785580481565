"""vLLM's GLM-4.1V video path (semantics §20.6, GLM-4.1V) on the in-process release, run for real with the
transformers and torchvision it pins, against the TRAINED side (transformers' own ``Glm4vVideoProcessor``, run in a
child process: this one holds the release's transformers): the verdicts the fragment predicted before vLLM ran,
each at its smallest clip, a grid slice where every difference must be one of the predicted kinds, and C19 on two
encoded kinds read back from their pixels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deferlab.reference.system.video import Clip, Unsupported, VideoRequest, grid_clips
from tests.impl.vllm.video_support import marks, served, trained_decode, trained_plans, video_path

pytestmark = marks("GLM-4.1V facts of semantics §20.6")
VIDEO = pytest.mark.extra("video")
PAIR = VideoRequest(min_pixels=64 * 28 * 28, max_pixels=256 * 28 * 28)
# (clip, request): the worked points, each the smallest the fragment predicted for its kind of difference
POINTS = [
    (Clip(1, 5.0), VideoRequest()),  # the loader chooses no frame: vLLM refuses, TRAINED [0, 0]
    (Clip(3, 5.0), VideoRequest()),  # one frame handed on: smart_resize refuses t = 1
    (Clip(8, 5.0), VideoRequest()),  # an odd 3 handed on: padded 1 against 0, the same frames
    (Clip(120, 30.0), VideoRequest()),  # agreement
    (Clip(120, 30.0), VideoRequest(num_frames=8)),  # ignored by both
    (Clip(1, 1.0), PAIR),  # the pixel pair: ignored by vLLM, no option of TRAINED's
    (Clip(300, 24.0), VideoRequest(fps=30.0)),  # C18's resample pin
    (Clip(1, 3.0), VideoRequest(fps=4.0)),  # off the grid: vLLM's times none against the processor's one step
]
SLICE = [c for c in grid_clips() if c.frames <= 60]
SLICE_REQUESTS = [VideoRequest(), VideoRequest(fps=1.0), VideoRequest(fps=4.0)]


@pytest.fixture(scope="module")
def path(vllm_source):
    return video_path(vllm_source, "glm-4.1v")


@pytest.fixture(scope="module")
def trained():
    return dict(zip(range(len(POINTS)), trained_plans("glm-4.1v", POINTS), strict=True))


def test_the_path_and_the_loader_vllm_picks(path, vllm_source):
    assert (path.label, path.family, path.real_code, path.system) == ("VLLM", "glm-4.1v", True, vllm_source.name)
    assert (path.processor_name, path.backend) == ("Glm4vVideoProcessor", "opencv_dynamic")
    assert "opencv_dynamic" in path.provenance()["loader"]
    with pytest.raises(Unsupported, match="total_pixels"):
        path.plan(Clip(10, 30.0), VideoRequest(total_pixels=10**6))


def test_the_predicted_verdicts_at_their_smallest_clips(path, trained, vllm_source):
    got = [served(path, c, r) for c, r in POINTS]
    want = [trained[i] for i in range(len(POINTS))]
    # [1@5]: vLLM refuses (no frame chosen), TRAINED takes [0, 0] (C16, C17, C18 fail)
    assert "chose no frame" in got[0]["why"] and want[0]["indices"] == [0, 0]
    # [3@5]: one frame handed on, refused by the processor's smart_resize; TRAINED [0, 0]
    assert "t:1 must be larger" in got[1]["why"] and want[1]["indices"] == [0, 0]
    # [8@5]: the same frames and times, padded 1 against 0 (C17 only)
    assert got[2]["indices"] == want[2]["indices"] == [0, 3, 5, 5] and got[2]["times"] == want[2]["times"]
    assert (got[2]["padded"], want[2]["padded"]) == (1, 0) and got[2]["size"] == want[2]["size"]
    # [120@30], defaults and num_frames=8: every field equal
    for k in (3, 4):
        assert got[k] == want[k], (POINTS[k], got[k], want[k])
    # the pixel pair: vLLM drops it (its size is the default one); TRAINED takes no such option (left out, §20.4)
    assert got[5]["size"] == [112, 84] and want[5]["refused"] == "Unsupported"
    assert "takes no min_pixels, max_pixels" in want[5]["why"]
    # the pin: vLLM's processor resamples the whole-read clip at 2 fps (13 times), TRAINED takes 300 (150 times)
    assert (len(got[6]["times"]), len(want[6]["times"])) == (13, 150)
    # off the grid: no time for the processor's one step; 0.34.0 refuses, 0.33.0 writes a frameless placeholder
    assert want[7]["indices"] == [0, 0]
    if vllm_source.version == "0.34.0":
        assert "timestamp count does not match" in got[7]["why"]
    else:
        assert (got[7]["grid"], got[7]["times"], got[7]["tokens"]) == ([1, 6, 8], [], 0)


def _expected_kind(clip: Clip, request: VideoRequest) -> str:
    """What the fragment predicts for a grid clip: vLLM refuses when its loader hands on fewer than two frames of a
    clip it does not read whole; else the plans agree but for ``padded`` on an odd count handed on."""
    fps = request.fps or 2
    n = math.floor(clip.duration * fps)
    read_whole = clip.fps <= fps  # on the grid: the loader's distinct indices cover every frame
    if read_whole:
        return "equal"
    return "served refuses" if n < 2 else ("padded" if n % 2 else "equal")


def test_a_grid_slice_differs_only_as_predicted(path):
    points = [(c, r) for r in SLICE_REQUESTS for c in SLICE]
    want = trained_plans("glm-4.1v", points)
    seen = set()
    for (clip, request), w in zip(points, want, strict=True):
        g, kind = served(path, clip, request), _expected_kind(clip, request)
        assert "refused" not in w, (clip, request, w)
        seen.add(kind)
        if kind == "served refuses":
            assert "refused" in g, (clip, request, g)
        elif kind == "padded":
            assert (g["padded"], w["padded"]) == (1, 0), (clip, request, g, w)
            assert {**g, "padded": 0} == w, (clip, request, g, w)
        else:
            assert g == w, (clip, request, g, w)
    assert seen == {"equal", "padded", "served refuses"}


@VIDEO
@pytest.mark.parametrize("kind", ["constant", "short"])
def test_c19_decoded_frames_against_trained(path, kind, tmp_path):
    from deferlab.properties import clips
    from deferlab.reference.oracle.video import read_index

    out = tmp_path / "trained.npy"
    assert "REFUSED" not in trained_decode("glm-4.1v", kind, out)
    want = np.load(out)
    if kind == "short":  # D = 0.1 s: the loader chooses no frame (fetch_video refuses); TRAINED takes [0, 0]
        with pytest.raises(ValueError, match="empty"):
            path.decode(clips.encode(clips.KINDS[kind]), VideoRequest())
        assert [read_index(f) for f in want] == [0, 0]
        return
    got = path.decode(clips.encode(clips.KINDS[kind]), VideoRequest())
    assert [read_index(f) for f in got.frames] == [read_index(f) for f in want] == list(got.indices)
    assert list(got.indices) == [0, 15, 30, 45, 60, 75, 90, 105]
    gap = np.abs(got.frames.astype(np.int16) - want.astype(np.int16))
    assert int(gap.max()) <= 1
