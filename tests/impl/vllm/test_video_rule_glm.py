"""vLLM's real GLM-4.1V video path (`impl.vllm.video_glm`) against deferlab's restatement of its rule
(`reference.oracle.video_served.vllm_glm_plan`, semantics §20.6 "vLLM's GLM-4.1V rule, restated"), which C16-C18 read
every served difference against: every field of the plan and every refusal, on a tenth of §20.3's grid under the
claims' option sets, the clips the claims pin, long clips of client sizes, clips read whole (the processor samples
again) and the count check's refusal. A mutant of the rule must part, so the comparison can fail."""

from __future__ import annotations

import functools

import pytest

from deferlab.reference.system.video import Clip, VideoRequest, grid_clips
from tests.impl.vllm.test_video_rule import _parted, _release

pytestmark = [pytest.mark.extra("vllm"), pytest.mark.extra("transformers")]
FAMILY = "glm-4.1v"
SIZES = ((640, 480), (1920, 1080), (63, 47))
LONG = tuple(Clip(f, fps, w, h) for f, fps in ((900, 30.0), (8100, 30.0), (36000, 60.0), (602, 1.0)) for w, h in SIZES)
PINNED = (
    (Clip(240, 30.0), VideoRequest(fps=0.5)),  # FAMILY_PINNED: a fractional rate
    (Clip(300, 24.0), VideoRequest(fps=30.0)),  # RULE_PINNED C18: read whole, sampled again at 2 fps
    (Clip(602, 1.0), VideoRequest(fps=4.0)),  # past 300 s, read whole: 600 linspace samples
    (Clip(1, 3.0), VideoRequest(fps=4.0)),  # read whole, no time at 2 fps: 0.34.0's count check refuses
    (Clip(8100, 30.0, 1280, 720), VideoRequest()),
    (Clip(4860, 30.0, 1120, 630), VideoRequest()),
    (Clip(10, 1.0), VideoRequest()),  # a 1 fps clip read whole at the defaults
    (Clip(9000, 30.0), VideoRequest()),  # FAMILY_PINNED: exactly 300 s (the loader's `<=`)
    (Clip(600, 1.0), VideoRequest()),  # FAMILY_PINNED: 600 frames past 300 s, read whole (the processor's `>=`)
)


@pytest.fixture(scope="module")
def path(vllm_source):
    from deferlab.impl.vllm.video import video_paths

    return video_paths(vllm_source, FAMILY)[0]


def _points() -> list[tuple[Clip, VideoRequest]]:
    from deferlab.properties.video_claims import OPTION_SETS

    points = [(c, r) for r in OPTION_SETS for c in grid_clips()[::10]]
    return points + [(c, r) for c in LONG for r in OPTION_SETS] + list(PINNED)


def test_vllm_serves_what_the_restated_glm_rule_states_on_every_point(path):
    from deferlab.reference.oracle.video_served import rule_for, vllm_glm_plan

    section, rule = rule_for(path.system, FAMILY)
    assert (section, rule.func, rule.keywords) == ("semantics §20.6", vllm_glm_plan, {"release": _release(path)})
    points = _points()
    parted, answered = _parted(path, functools.partial(rule, FAMILY), points)
    assert parted == [], (len(parted), [p[-300:] for p in parted[:5]])
    assert len(points) > 3600 and answered > 3000


def test_the_pins_read_as_the_semantics_predict(path):
    """§20.6: the C18 pin is read whole and sampled again at 2 fps (13 times where TRAINED has 150); 0.34.0 refuses
    the frameless count; a 1 fps clip read whole at the defaults gets every second frame's whole second."""
    from deferlab.reference.oracle.video_served import vllm_glm_plan

    rule = functools.partial(vllm_glm_plan, FAMILY, release=_release(path))
    assert len(rule(Clip(300, 24.0), VideoRequest(fps=30.0)).times) == 13
    assert rule(Clip(10, 1.0), VideoRequest()).times == (0.0, 2.0, 4.0, 6.0, 8.0)
    if _release(path) == "0.34.0":
        with pytest.raises(ValueError, match="timestamp count does not match"):
            rule(Clip(1, 3.0), VideoRequest(fps=4.0))


@pytest.mark.parametrize("mutant", ["floor_one", "rate"])
def test_a_mutant_of_the_rule_parts_from_vllm(path, monkeypatch, mutant):
    """The comparison can fail: the times' sampler given the processor's minimum of 1, or the default rate 1."""
    from deferlab.reference.oracle import video_glm, video_served

    if mutant == "floor_one":
        real = video_glm.at_rate
        monkeypatch.setattr(video_glm, "at_rate", lambda c, f, at_least_one: real(c, f, True))
    else:
        monkeypatch.setattr(video_glm, "DEFAULT_FPS", 1.0)
    rule = functools.partial(video_served.vllm_glm_plan, FAMILY, release=_release(path))
    parted, _ = _parted(path, rule, _points())
    assert parted
