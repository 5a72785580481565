"""The fractional-rate pin C16-C18 replay for GLM-4.1V (`FAMILY_PINNED`): why it must keep the properties it was chosen
for. The option sets ask only whole rates, so a served path that truncates a client's fps to an int (the stop-41
survivors in SGLang 0.5.23's GLM clamp) agreed with TRAINED everywhere; the pin is only useful while truncating its
rate changes TRAINED's plan (or empties the rate) and while the unmutated engines agree with TRAINED on it, so that
a difference there is one of its own (semantics §20.5, §20.6)."""

from __future__ import annotations

import math

from deferlab.properties.claims.test_video import FAMILY_PINNED
from deferlab.reference.oracle import video_glm
from deferlab.reference.system.video import VideoRequest


def test_glm_pin_rate_is_fractional_and_truncating_it_changes_the_plan():
    """int(rate) is not the rate, and either leaves no positive rate (the clamp refuses it) or another plan."""
    for clip, request in FAMILY_PINNED["glm-4.1v"]:
        rate = request.fps
        assert rate is not None and rate != int(rate), f"{request.label()}: a whole rate cannot tell int from float"
        whole = int(rate)
        if whole > 0:
            assert video_glm.plan(clip, VideoRequest(fps=float(whole))) != video_glm.plan(clip, request)


def test_glm_pin_is_taken_by_trained_and_read_as_chosen_by_vllm():
    """TRAINED takes an even count at the pin (nothing padded), and vLLM's GLM loader chooses the same even count
    below the clip's frames (floor(duration x fps), §20.6), so the processor takes them as read: no `padded`
    difference that would hide a mutant's."""
    for clip, request in FAMILY_PINNED["glm-4.1v"]:
        plan = video_glm.plan(clip, request)
        assert plan.padded == 0 and len(plan.indices) >= 2
        chosen = math.floor(clip.frames / clip.fps * request.fps)
        assert chosen == len(plan.indices) and chosen % 2 == 0 and chosen < clip.frames
