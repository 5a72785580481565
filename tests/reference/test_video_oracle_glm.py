"""GLM-4.1V's video oracle (`reference.oracle.video_glm`) against its trained side run for real (semantics §20.4,
"GLM-4.1V's trained side"): every clip of the grid x every option set, drawn clips, the processor run on frames,
and the decode of encoded clips. The trained side needs torchvision through the loader's companion before
transformers is first imported: where this process imported it first, one test runs the rest in a child.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deferlab.reference.oracle import video as oracle
from deferlab.reference.oracle import video_glm
from deferlab.reference.system.video import Clip, Unsupported, VideoRequest
from tests.reference import video_oracle_checks as checks
from tests.reference.test_video_oracle import label, options, real_code, trained

FAMILY = "glm-4.1v"
CHILD_ENV = "DEFERLAB_VIDEO_ORACLE_GLM_CHILD"


# its trained-side tests in a child when this process cannot run them; no card recipe: CARD is Unsupported (semantics §20.4)
test_trained_side_in_a_child, test_one_row_only = checks.family_tests(__file__, FAMILY, CHILD_ENV)


def test_stated_examples() -> None:
    """The examples §20.4 states: the repeated last index, the small-T budget, num_frames ignored, whole seconds."""
    one = oracle.plan(FAMILY, "TRAINED", Clip(1, 30.0), VideoRequest())
    assert one.indices == (0, 0) and one.padded == 0 and one.size == (112, 84) and one.grid == (1, 6, 8)
    four = oracle.plan(FAMILY, "TRAINED", Clip(120, 30.0), VideoRequest())
    assert four.indices[:3] == (0, 15, 30) and len(four.indices) == 8 and four.size == (56, 56)
    assert four.times == (0.0, 1.0, 2.0, 3.0) and four.tokens == 4 * 4 * 4 // 4
    assert oracle.plan(FAMILY, "TRAINED", Clip(120, 30.0), VideoRequest(num_frames=8)) == four
    long = video_glm.taken(Clip(288000, 240.0), VideoRequest())  # 1,200 s: 600 samples over the whole clip
    assert len(long) == 600 and long[0] == 0 and long[-1] == 287999


@real_code
def test_oracle_equals_trained_on_the_grid() -> None:
    """Every clip of the 6,000-clip grid x every option set: the oracle's plan equals the real processor's exactly
    (times: the whole seconds of the prompt text). The wall time is printed."""
    counts = checks.grid_counts(FAMILY)
    # every grid rate is known: nothing refused; the pixel pair is no option of the processor's (§20.4)
    assert counts == {"refused": 0, "unsupported": 6000, "plans": 6000 * (len(options(FAMILY)) - 1)}


@real_code
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.integers(1, 300000), fps=st.one_of(st.just(0.0), st.floats(0.5, 240.0)),
       size=st.tuples(st.integers(16, 3840), st.integers(16, 2160)),
       request=st.one_of(st.sampled_from(options(FAMILY)), st.builds(VideoRequest, fps=st.floats(0.1, 30.0)),
                         st.builds(VideoRequest, min_pixels=st.integers(1, 4000).map(lambda k: k * 784),
                                   max_pixels=st.integers(1, 60000).map(lambda k: k * 784))))  # fmt: skip
@example(frames=9000, fps=29.97, size=(1280, 720), request=VideoRequest())  # past max_duration, budget binds
@example(frames=2, fps=1.0, size=(16, 3000), request=VideoRequest())  # scaled up, aspect ratio over 200
def test_oracle_equals_trained_on_drawn_clips(frames: int, fps: float, size: tuple[int, int], request: VideoRequest):
    checks.agrees_on(FAMILY, frames, fps, size, request)


@real_code
def test_trained_plan_equals_the_processor_run_on_frames() -> None:
    """The plan's indices, grid and tokens equal ``Glm4vVideoProcessor`` run on index-coded frames with the clip's
    metadata (``pixel_values_videos`` rows, ``video_grid_thw``, the frames it kept, read back from their pixels)."""
    path = trained(FAMILY)["TRAINED"]
    checked = 0
    for frames, fps in ((1, 30.0), (3, 30.0), (15, 30.0), (61, 29.97), (90, 12.5)):
        video = np.stack([oracle.encode_index(48, 64, i) for i in range(frames)])
        meta = {"total_num_frames": frames, "fps": fps, "width": 64, "height": 48, "duration": frames / fps}
        for request in options(FAMILY):
            kw = {k: v for k, v in request.given().items() if k != "num_frames"}
            if request.min_pixels is not None:  # not a kwarg of the processor: refused by it, Unsupported here
                with pytest.raises(TypeError, match="min_pixels"):
                    path.proc(videos=[video], video_metadata=[meta], return_tensors="pt", **kw)
                with pytest.raises(Unsupported, match="takes no min_pixels, max_pixels"):
                    path.plan(Clip(frames, fps, 64, 48), request)
                continue
            plan = path.plan(Clip(frames, fps, 64, 48), request)
            out = path.proc(videos=[video], video_metadata=[meta], return_metadata=True, return_tensors="pt", **kw)
            assert tuple(int(v) for v in out["video_grid_thw"][0]) == plan.grid, label(Clip(frames, fps), request)
            assert [int(i) for i in out["video_metadata"][0].frames_indices] == list(plan.indices)
            assert out["pixel_values_videos"].shape[0] == plan.tokens * 4
            checked += 1
    assert checked == 5 * (len(options(FAMILY)) - 1)


@real_code
def test_trained_decode_equals_the_oracle_decode() -> None:
    """``load_video`` (PyAV) with the real sampler hands over the frames the oracle's plan names, the repeated last
    index restored (§20.4), read back from the pixels, on the constant, short and one-frame kinds."""
    from deferlab.properties import clips
    from deferlab.properties.video_trained import oracle_path

    path, mine = trained(FAMILY)["TRAINED"], oracle_path(FAMILY)
    for kind in ("constant", "short", "one"):
        data = clips.encode(clips.KINDS[kind])
        for request in (VideoRequest(), VideoRequest(fps=4.0)):
            got, want = path.decode(data, request), mine.decode(data, request)
            assert got.indices == want.indices, (kind, request.label())
            assert [oracle.read_index(f) for f in got.frames] == list(want.indices), (kind, request.label())
