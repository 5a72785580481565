"""vLLM's real video path (`impl.vllm.video`) against deferlab's restatement of its rule from semantics §20.6
(`reference.oracle.video_served.vllm_plan`), which the video claims read every served difference against: if the
two parted, C16-C18 would call vLLM's own behaviour unexplained. Every field of the plan (frames, size, grid, tokens,
padding, times) and every refusal, on a tenth of §20.3's grid under the claims' option sets, on long clips of the
sizes clients send, on clips whose container reports no frame rate (Qwen3-VL's 24 fps fallback) and under options
past the loader's caps (fps over 30, a one-sided pixel bound). A mutant of the rule must part, so the comparison can
fail."""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import pytest

from deferlab.reference.system.video import Clip, VideoRequest, grid_clips

pytestmark = [
    pytest.mark.extra("vllm"),
    pytest.mark.extra("transformers"),
]
FAMILIES = ("qwen2.5-vl", "qwen3-vl")
SIZES = ((640, 480), (1920, 1080), (1080, 1920), (63, 47), (16, 127))
LONG = tuple(Clip(f, fps, w, h) for f, fps in ((900, 30.0), (8100, 30.0), (36000, 60.0)) for w, h in SIZES)
UNKNOWN = tuple(Clip(f, 0.0) for f in (1, 2, 3, 5, 48, 49, 100, 1000, 20000))
MORE = (
    VideoRequest(fps=45.0),
    VideoRequest(fps=0.5),
    VideoRequest(min_pixels=512 * 28 * 28),
    VideoRequest(max_pixels=50000),
)


def _outcome(fn: Any, clip: Clip, request: VideoRequest) -> Any:
    try:
        p = fn(clip, request)
    except Exception:  # noqa: BLE001 - a refusal on both sides is agreement
        return "refused"
    return [list(p.indices), p.size, p.grid, p.tokens, list(p.times), p.padded]


def _one_sided(request: VideoRequest) -> bool:
    return (request.min_pixels is None) != (request.max_pixels is None)


def _points(family: str) -> list[tuple[Clip, VideoRequest]]:
    """The sweep's points, one-sided pixel bounds included (``impl.vllm.video_geometry.fast`` hands a size with one
    edge to the processor's own call, which refuses it for Qwen2.5-VL)."""
    from deferlab.properties.video_claims import OPTION_SETS

    more = list(MORE)
    points = [(c, r) for r in OPTION_SETS for c in grid_clips()[::10]]
    return points + [(c, r) for c in (*LONG, *UNKNOWN) for r in (*OPTION_SETS, *more)]


def _parted(path: Any, rule: Any, points: list[tuple[Clip, VideoRequest]]) -> tuple[list[str], int]:
    parted, answered = [], 0
    for clip, request in points:
        got, want = _outcome(path.plan, clip, request), _outcome(rule, clip, request)
        answered += not str(got).startswith("refused")
        if json.dumps(got, default=list) != json.dumps(want, default=list):
            parted.append(f"{clip} {request.label()}: served {got} rule {want}"[:400])
    return parted, answered


def _release(path: Any) -> str:
    """The served release, as the rule takes it (``vllm-0.30.0`` -> ``0.30.0``)."""
    return path.system.partition("-")[2]


def _refused_whole(path: Any) -> bool:
    """Whether §20.6 says the release refuses every request of the family (Qwen2.5-VL before 0.31.0)."""
    from deferlab.reference.oracle.video_served import VLLM_METADATA_FROM, _since

    return path.family == "qwen2.5-vl" and not _since(_release(path), VLLM_METADATA_FROM)


@pytest.fixture(scope="module")
def paths(vllm_source):
    from deferlab.impl.vllm.video import video_paths

    return {family: video_paths(vllm_source, family)[0] for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_vllm_serves_what_section_20_6_states_on_every_point(paths, family):
    from deferlab.reference.oracle.video_served import rule_for, vllm_plan

    path = paths[family]
    section, rule = rule_for(path.system)
    assert (section, rule.func, rule.keywords) == ("semantics §20.6", vllm_plan, {"release": _release(path)})
    points = _points(family)
    started = time.perf_counter()
    parted, answered = _parted(path, functools.partial(rule, family), points)
    assert parted == [], (len(parted), [p[-300:] for p in parted[:5]])
    if _refused_whole(path):  # §20.6, older releases: the loader lookup refuses before anything is read
        assert answered == 0 and "TypeError" in path.provenance()["loader"]
    else:
        assert len(points) > 3700 and answered > 3200  # most points answered: the plans were compared
    assert time.perf_counter() - started < 240


@pytest.mark.parametrize(("name", "value"), [("VLLM_MAX_FPS", 1000.0), ("UNKNOWN_FPS", 25)])
def test_a_mutant_of_the_rule_parts_from_vllm(paths, monkeypatch, name, value):
    """The check can fail: the rule with the loaders' fps cap forgotten, or another unknown-rate fallback, parts
    from the real code (both families on the cap; Qwen3-VL, the family with the fallback, on the rate)."""
    from deferlab.reference.oracle import video_served

    monkeypatch.setattr(video_served, name, value)
    families = FAMILIES if name == "VLLM_MAX_FPS" else ("qwen3-vl",)
    points = [(c, r) for c in (*LONG[:5], Clip(600, 60.0), *UNKNOWN) for r in (VideoRequest(), VideoRequest(fps=45.0))]
    first = video_served.VLLM_FPS_CAP_FROM if name == "VLLM_MAX_FPS" else video_served.VLLM_ALIASES_FROM
    for family in families:
        path = paths[family]
        if _refused_whole(path) or not video_served._since(_release(path), first):
            continue  # the release has no such cap or fallback (§20.6): nothing for the mutant to change
        rule = functools.partial(video_served.vllm_plan, family, release=_release(path))
        parted, _ = _parted(path, rule, points)
        assert parted, (family, name)


def video_served_since(release: str) -> bool:
    """Whether the release refuses a lone pixel bound (0.32.0 on, semantics §20.6)."""
    from deferlab.reference.oracle.video_served import VLLM_ALIASES_FROM, _since

    return _since(release, VLLM_ALIASES_FROM)


def test_qwen25_refuses_one_pixel_bound_as_the_processor_call_does(vllm_source):
    """§20.6 as corrected (§20.9): vLLM completes a lone ``min_pixels`` or ``max_pixels`` into a ``size`` with one
    edge, which Qwen2VLVideoProcessor's call refuses; with both, the call and the rule give the same plan."""
    from deferlab.impl.vllm.video import VLLMVideoPath
    from deferlab.reference.oracle.video_served import vllm_plan

    path = VLLMVideoPath(vllm_source, "qwen2.5-vl", exact=True)
    if _refused_whole(path):
        pytest.skip(f"{path.system} refuses every Qwen2.5-VL video at its loader lookup (semantics §20.6)")
    rule = functools.partial(vllm_plan, "qwen2.5-vl", release=_release(path))
    clips = (Clip(20, 10.0), Clip(100, 30.0), Clip(64, 8.0, 63, 47))
    requests = [r for r in MORE if _one_sided(r)] + [VideoRequest(min_pixels=50000, max_pixels=401408)]
    parted, answered = _parted(path, rule, [(c, r) for c in clips for r in requests])
    # from 0.32.0 a lone bound is refused and the pair answered on every clip; before, the flat kwargs reach
    # transformers 5.17.0, which takes them only as a pair: every request answered (semantics §20.6)
    lone = video_served_since(_release(path))
    assert parted == [] and answered == len(clips) * (1 if lone else len(requests))
