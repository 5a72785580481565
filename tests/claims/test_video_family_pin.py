"""The fractional-rate pin C16-C18 replay for GLM-4.1V (`FAMILY_PINNED`): why it must keep the properties it was chosen
for. The option sets ask only whole rates, so a served path that truncates a client's fps to an int (the stop-41
survivors in SGLang 0.5.23's GLM clamp) agreed with TRAINED everywhere; the pin is only useful while truncating its
rate changes TRAINED's plan (or empties the rate) and while the unmutated engines agree with TRAINED on it, so that
a difference there is one of its own (semantics §20.5, §20.6)."""

from __future__ import annotations

import math

from deferlab.properties.claims.test_video import FAMILY_PINNED
from deferlab.reference.oracle import video_glm, video_served
from deferlab.reference.system.video import VideoRequest

FRACTIONAL = [(c, r) for c, r in FAMILY_PINNED["glm-4.1v"] if r.fps is not None and r.fps != int(r.fps)]
BOUNDARY = [(c, r) for c, r in FAMILY_PINNED["glm-4.1v"] if r == VideoRequest()]  # at the defaults (§20.6)


def test_glm_pins_are_the_fractional_rate_and_the_two_boundaries():
    """Every GLM-4.1V pin is one of the two kinds below (a new kind needs its own reasons here)."""
    assert len(FRACTIONAL) == 1 and len(BOUNDARY) == 2
    assert len(FRACTIONAL) + len(BOUNDARY) == len(FAMILY_PINNED["glm-4.1v"])


def test_glm_pin_rate_is_fractional_and_truncating_it_changes_the_plan():
    """int(rate) is not the rate, and either leaves no positive rate (the clamp refuses it) or another plan."""
    for clip, request in FRACTIONAL:
        rate = request.fps
        assert rate is not None and rate != int(rate), f"{request.label()}: a whole rate cannot tell int from float"
        whole = int(rate)
        if whole > 0:
            assert video_glm.plan(clip, VideoRequest(fps=float(whole))) != video_glm.plan(clip, request)


def test_glm_pin_is_taken_by_trained_and_read_as_chosen_by_vllm():
    """TRAINED takes an even count at the pin (nothing padded), and vLLM's GLM loader chooses the same even count
    below the clip's frames (floor(duration x fps), §20.6), so the processor takes them as read: no `padded`
    difference that would hide a mutant's."""
    for clip, request in FRACTIONAL:
        plan = video_glm.plan(clip, request)
        assert plan.padded == 0 and len(plan.indices) >= 2
        chosen = math.floor(clip.frames / clip.fps * request.fps)
        assert chosen == len(plan.indices) and chosen % 2 == 0 and chosen < clip.frames


def test_glm_boundary_pins_sit_on_their_boundaries_where_vllm_agrees_with_trained():
    """`[9000@30]`: exactly the 300 s `max_duration` at a rate above the default 2 (the loader's `<=`);
    `[600@1]`: exactly int(300 x 2) = 600 frames past 300 s at a rate under 2, so the loader reads it whole and the
    processor's `num_samples >= meta_frames` is an equality. vLLM's stated rule (§20.6) gives TRAINED's plan at
    both, so a mutant's difference there is one of its own."""
    seconds = {clip.frames / clip.fps: clip for clip, _ in BOUNDARY}
    assert 300.0 in seconds and seconds[300.0].fps > video_glm.DEFAULT_FPS
    past = [clip for clip, _ in BOUNDARY if clip.frames / clip.fps > 300.0]
    assert len(past) == 1 and past[0].frames == int(300 * video_glm.DEFAULT_FPS) and past[0].fps < video_glm.DEFAULT_FPS
    for clip, request in BOUNDARY:
        assert video_served.vllm_glm_plan("glm-4.1v", clip, request, release="0.34.0") == video_glm.plan(clip, request)
