"""Gemma 4's video oracle (`reference.oracle.video_gemma4`) against its trained side run for real (semantics
§20.10(a), "Gemma 4's trained side"): every clip of the grid x every option set, drawn clips, the processor run on
index-coded frames, and the decode of encoded clips. The trained side needs torchvision through the loader's
companion before transformers is first imported: where this process imported it first, one test runs the rest in a
child.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from deferlab.reference.oracle import video as oracle
from deferlab.reference.oracle import video_gemma4
from deferlab.reference.system.video import Clip, Refused, Unsupported, VideoRequest, grid_clips, stamps_before
from tests.reference import video_oracle_checks as checks
from tests.reference.test_video_oracle import label, options, outcome, real_code, trained

FAMILY = "gemma4"
CHILD_ENV = "DEFERLAB_VIDEO_ORACLE_GEMMA4_CHILD"


def _plan(clip: Clip, request: VideoRequest = VideoRequest()):  # noqa: B008  (frozen, never mutated)
    return oracle.plan(FAMILY, "TRAINED", clip, request)


# its trained-side tests in a child when this process cannot run them; no card recipe: CARD is Unsupported (§20.10(a))
test_trained_side_in_a_child, test_one_row_only = checks.family_tests(__file__, FAMILY, CHILD_ENV)


def test_stated_examples() -> None:
    """The examples §20.10(a) and (b) state: i x N // 32, refusals under 32 frames and with fps, the sizes and
    per-frame tokens of the grid's frame sizes, whole seconds, 24 fps when the rate is unknown."""
    assert _plan(Clip(33, 1.0)).indices[31] == 31 and _plan(Clip(35, 1.0)).indices[21] == 22
    assert _plan(Clip(120, 30.0)).indices[5] == 18 and _plan(Clip(32, 1.0)).indices == tuple(range(32))
    for clip, request in ((Clip(31, 30.0), VideoRequest()), (Clip(7, 30.0), VideoRequest(num_frames=8)),
                          (Clip(600, 30.0), VideoRequest(fps=1.0))):  # fmt: skip
        with pytest.raises(Refused):
            _plan(clip, request)
    with pytest.raises(Unsupported, match="takes no min_pixels, max_pixels"):
        _plan(Clip(600, 30.0), VideoRequest(min_pixels=1, max_pixels=10**6))
    sizes = {(64, 48): (432, 336, 63), (640, 480): (432, 336, 63), (1280, 720): (528, 288, 66),
             (1920, 1080): (528, 288, 66), (3840, 2160): (528, 288, 66), (1080, 1920): (288, 528, 66),
             (62, 46): (432, 336, 63)}  # fmt: skip
    for (w, h), (tw, th, per) in sizes.items():
        p = _plan(Clip(120, 30.0, w, h), VideoRequest(num_frames=8))
        assert (p.size, p.grid, p.tokens, p.padded) == ((tw, th), (8, th // 16, tw // 16), 8 * per, 0), (w, h)
    assert video_gemma4.resize(16, 3000) == (48, 3360)  # the short side floors to 0: 48, the long side capped
    assert _plan(Clip(32, 1.0)).times == tuple(float(i) for i in range(32))
    assert _plan(Clip(96, 0.0), VideoRequest(num_frames=4)).times == (0.0, 1.0, 2.0, 3.0)  # 24 fps: 0, 24, 48, 72


@real_code
def test_oracle_equals_trained_on_the_grid() -> None:
    """Every clip of the 6,000-clip grid x every option set: the oracle's plan equals the real processor's exactly
    (times: the whole seconds of the prompt text), a refusal on both sides agreeing. The wall time is printed."""
    counts = checks.grid_counts(FAMILY)
    # refused: N < 32 at the defaults, every fps point (num_frames=32 filled beside it), N < 8 and N < 16
    short = {k: sum(c.frames < k for c in grid_clips()) for k in (8, 16, 32)}
    refused = short[32] + 2 * 6000 + short[8] + short[16]
    assert counts == {"refused": refused, "unsupported": 6000, "plans": 5 * 6000 - refused}


@real_code
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.integers(1, 300000), fps=st.one_of(st.just(0.0), st.floats(0.5, 240.0)),
       size=st.tuples(st.integers(16, 3840), st.integers(16, 2160)),
       request=st.one_of(st.sampled_from(options(FAMILY)), st.builds(VideoRequest, fps=st.floats(0.1, 30.0)),
                         st.builds(VideoRequest, num_frames=st.integers(1, 2000)),
                         st.builds(VideoRequest, min_pixels=st.integers(1, 4000).map(lambda k: k * 2304),
                                   max_pixels=st.integers(1, 60000).map(lambda k: k * 2304))))  # fmt: skip
@example(frames=300000, fps=29.97, size=(3840, 2160), request=VideoRequest())  # long and large
@example(frames=40, fps=1.0, size=(16, 2160), request=VideoRequest())  # the short side floors to 0
@example(frames=40, fps=0.0, size=(3840, 16), request=VideoRequest(num_frames=40))  # the other side, unknown rate
def test_oracle_equals_trained_on_drawn_clips(frames: int, fps: float, size: tuple[int, int], request: VideoRequest):
    checks.agrees_on(FAMILY, frames, fps, size, request)


def test_the_stamps_are_the_text_before_each_frame() -> None:
    """The oracle writes "MM:SS " then " MM:SS " (minutes two digits at least), and `stamps_before` reads the same
    text back off a prompt built the way ``replace_video_token`` builds it."""
    assert video_gemma4.stamps((0.0, 61.0, 6000.0)) == ("00:00 ", " 01:01 ", " 100:00 ")
    prompt = "00:00 <B><63><E> 01:01 <B><63><E> 100:00 <B><63><E>"
    assert stamps_before(prompt, "<B>", "<E>") == video_gemma4.stamps((0.0, 61.0, 6000.0))
    assert stamps_before("no frame", "<B>", "<E>") == ()
    assert _plan(Clip(96, 0.0), VideoRequest(num_frames=4)).stamps == ("00:00 ", " 00:01 ", " 00:02 ", " 00:03 ")


def _frames_back(out: dict, grid: tuple[int, int, int], patch: int = 16) -> np.ndarray:
    """The frames ``pixel_values_videos`` holds, un-patchified (its real patches are row-major, each patch_size^2
    x 3 row-major with the channels last) and scaled back to uint8 (mean 0, std 1: the values are x / 255)."""
    n, ph, pw = grid
    real = out["pixel_values_videos"][:n, : ph * pw].numpy().reshape(n, ph, pw, patch, patch, 3)
    frames = real.transpose(0, 1, 3, 2, 4, 5).reshape(n, ph * patch, pw * patch, 3)
    return np.clip(np.round(frames * 255), 0, 255).astype(np.uint8)


@real_code
def test_trained_plan_equals_the_processor_run_on_frames() -> None:
    """The plan's indices, grid, tokens and times equal ``Gemma4VideoProcessor`` run on index-coded frames with the
    clip's metadata: the frames it kept read back from ``pixel_values_videos`` (336x432 frames, the size the rule
    keeps, so no resize blurs the code), ``frames_indices``, the real patches and positions, ``num_soft_tokens``,
    and the times of ``replace_video_token``'s text built from the processor's own output metadata."""
    from deferlab.properties.video_trained_gemma4 import prompt_text, read_prompt

    path = trained(FAMILY)["TRAINED"]
    checked = 0
    for frames, fps, (h, w) in ((31, 30.0, (336, 432)), (32, 1.0, (336, 432)), (33, 1.0, (336, 432)),
                                (61, 29.97, (336, 432)), (120, 0.0, (336, 432)), (90, 12.5, (48, 64))):  # fmt: skip
        video = np.stack([oracle.encode_index(h, w, i) for i in range(frames)])
        meta = {"total_num_frames": frames, "fps": fps or None, "width": w, "height": h}
        for request in options(FAMILY):
            kw = request.given()
            clip = Clip(frames, fps, w, h)
            if request.min_pixels is not None:  # not a kwarg of the processor: refused by it, Unsupported here
                with pytest.raises((TypeError, ValueError), match="min_pixels"):
                    path.proc(videos=[video], video_metadata=[meta], return_tensors="pt", **kw)
                with pytest.raises(Unsupported, match="takes no min_pixels, max_pixels"):
                    path.plan(clip, request)
                continue
            want = outcome(path.plan, clip, request)
            assert want == outcome(partial(oracle.plan, FAMILY, "TRAINED"), clip, request), label(clip, request)
            if want == "refused":
                with pytest.raises(ValueError):
                    path.proc(videos=[video], video_metadata=[dict(meta)], return_tensors="pt", **kw)
                continue
            out = path.proc(videos=[video], video_metadata=[dict(meta)], return_metadata=True, return_tensors="pt",
                            **kw)  # fmt: skip
            got = out["video_metadata"][0]
            assert [int(i) for i in got.frames_indices] == list(want.indices), label(clip, request)
            if (h, w) == (336, 432):
                assert [oracle.read_index(f) for f in _frames_back(out, want.grid)] == list(want.indices)
            n, ph, pw = want.grid
            assert out["num_frames_per_video"][0] == n and out["pixel_values_videos"].shape[:2] == (n, 630)
            pos = out["video_position_ids"][0]
            assert int((pos[:, 0] >= 0).sum()) == ph * pw and int(pos[:, 0].max()) == pw - 1
            assert int(pos[:, 1].max()) == ph - 1
            per = int(out["num_soft_tokens_per_video"][0])
            assert per * n == want.tokens
            assert read_prompt(prompt_text(per, got)) == (want.times, want.tokens), label(clip, request)
            checked += 1
    assert checked == 6 * 3 - 1  # fps is refused everywhere, and the 31-frame clip at the defaults


@real_code
def test_trained_decode_equals_the_oracle_decode() -> None:
    """``load_video`` (PyAV) with the real sampler hands over the frames the oracle's plan names, read back from the
    pixels, on the constant and NTSC kinds; the short and one-frame kinds are refused by both at the defaults."""
    from deferlab.properties import clips
    from deferlab.properties.video_trained import oracle_path

    path, mine = trained(FAMILY)["TRAINED"], oracle_path(FAMILY)
    for kind in ("constant", "ntsc", "short", "one"):
        data = clips.encode(clips.KINDS[kind])
        for request in (VideoRequest(), VideoRequest(num_frames=8)):
            got, want = outcome(path.decode, data, request), outcome(mine.decode, data, request)
            if kind in ("short", "one"):
                assert got == want == "refused", (kind, request.label())
                continue
            assert got.indices == want.indices, (kind, request.label())
            assert [oracle.read_index(f) for f in got.frames] == list(want.indices), (kind, request.label())
