"""Every difference explained (semantics §20.5, §20.6): `reference.oracle.video_served`'s restatement of SGLang's and
vLLM's own video rules, by the sections' worked numbers, and the video claims' reading of a served plan against it (`properties.video_claims`):
a difference the stated rule gives keeps the claim's documented wording; one it does not is a distinct signature
that ``claims.toml``'s failure pattern does not name. The restatement against SGLang's real code on the grid is
``tests/impl/sglang/test_video_rule.py`` (vLLM's: ``tests/impl/vllm/test_video_rule.py``)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from deferlab.properties import video_claims as vc
from deferlab.reference.oracle import video as oracle
from deferlab.reference.oracle import video_served as vs
from deferlab.reference.system.signatures import signature
from deferlab.reference.system.video import Clip, Refused, Unsupported, VideoRequest

CLAIMS = Path(__file__).resolve().parents[2] / "reference" / "system" / "claims.toml"


def test_the_restated_rule_gives_section_20_5s_worked_numbers() -> None:
    q25, q3 = (
        vs.sglang_plan("qwen2.5-vl", Clip(4, 1.0), VideoRequest()),
        vs.sglang_plan("qwen3-vl", Clip(4, 1.0), VideoRequest()),
    )
    assert q25.pre_size == q3.pre_size == (392, 280) and q25.size == (392, 280)  # min_pixels 100352, factor 28
    assert q3.size == (384, 288) and q3.grid == (2, 18, 24)  # the processor cuts again to 32
    assert q25.times == (0.0, 2 / 24) and q3.times == (0.5, 2.5)
    assert vs.sglang_plan("qwen2.5-vl", Clip(5, 1.0), VideoRequest()).indices == (0, 1, 2, 4)  # truncating linspace
    assert vs.sglang_plan("qwen3-vl", Clip(3, 1.0), VideoRequest()).times == (1.0,)
    long = vs.sglang_plan("qwen3-vl", Clip(36000, 30.0), VideoRequest())
    assert len(long.indices) == 768 and long.size == (192, 128)


def test_the_budget_is_the_per_frame_cap_the_total_share_or_the_floor() -> None:
    assert vs.sglang_budget(60, VideoRequest()) == (100352, 602112)  # 768 x 28 x 28 caps
    assert vs.sglang_budget(540, VideoRequest()) == (100352, vs.SGLANG_TOTAL_PIXELS / 540 * 2)  # the share binds
    assert vs.sglang_budget(540, VideoRequest(min_pixels=548800)) == (548800, 576240)  # int(min x 1.05) binds
    assert vs.sglang_budget(540, VideoRequest(min_pixels=548800, max_pixels=300000)) == (548800, 300000)


@pytest.mark.parametrize(
    ("clip", "request_", "why"),
    [
        (Clip(1, 30.0), VideoRequest(), "nframes should in interval"),
        (Clip(60, 30.0), VideoRequest(fps=1.0, num_frames=8), "Only accept either"),
        (Clip(60, 0.0), VideoRequest(), "frame rate is 0"),
        (Clip(60, 0.0), VideoRequest(num_frames=8), "frame rate is 0"),
        (Clip(60, 30.0, 16, 127), VideoRequest(min_pixels=3136, max_pixels=3136), "0 side"),
        (Clip(60, 30.0, 5000, 20), VideoRequest(), "aspect ratio"),
    ],
)
def test_the_restated_rule_refuses_where_section_20_5_says_sglang_does(clip, request_, why) -> None:
    with pytest.raises(Refused, match=why):
        vs.sglang_plan("qwen3-vl", clip, request_)


def test_only_engines_whose_rule_the_semantics_state_have_one() -> None:
    assert vs.rule_for("sglang-0.5.23")[0] == "semantics §20.5"
    section, rule = vs.rule_for("vllm-0.34.0")  # vLLM's rule differs by release (§20.6, older releases)
    assert (section, rule.func, rule.keywords) == ("semantics §20.6", vs.vllm_plan, {"release": "0.34.0"})
    assert vs.rule_for("lmdeploy-0.18.0") == ("semantics §20.7", vs.lmdeploy_plan) and vs.rule_for("") is None


def test_vllms_rule_before_0_32_0_as_section_20_6_states_it() -> None:
    """§20.6, older releases: Qwen2.5-VL refused at the loader lookup before 0.31.0, its lone pixel bound ignored on
    0.31.0 (refused from 0.32.0); Qwen3-VL without the 24-fps fallback before 0.32.0; no 30-fps cap before 0.30.0."""
    clip, defaults = Clip(10, 30.0), VideoRequest()
    with pytest.raises(Refused, match="loader lookup"):
        vs.vllm_plan("qwen2.5-vl", clip, defaults, release="0.30.0")
    assert vs.vllm_plan("qwen2.5-vl", clip, defaults, release="0.31.0") == vs.vllm_plan("qwen2.5-vl", clip, defaults)
    lone = VideoRequest(min_pixels=50000)
    assert vs.vllm_plan("qwen2.5-vl", clip, lone, release="0.31.0").size == (56, 56)  # the checkpoint's edges
    with pytest.raises(Refused, match="one pixel bound"):
        vs.vllm_plan("qwen2.5-vl", clip, lone, release="0.32.0")
    with pytest.raises(Refused, match="ZeroDivisionError"):
        vs.vllm_plan("qwen3-vl", Clip(48, 0.0), defaults, release="0.31.0")
    assert len(vs.vllm_plan("qwen3-vl", Clip(48, 0.0), defaults, release="0.32.0").indices) == 4  # 24 fps: 4 frames
    fast = VideoRequest(fps=60.0)  # 60 fps asked of a 60 fps clip: uncapped, every frame is read and the processor
    assert len(set(vs.vllm_plan("qwen3-vl", Clip(120, 60.0), fast, release="0.29.0").indices)) == 4  # resamples
    assert len(set(vs.vllm_plan("qwen3-vl", Clip(120, 60.0), fast, release="0.30.0").indices)) == 60  # capped at 30


def test_vllms_restated_rule_gives_section_20_6s_worked_numbers() -> None:
    """§20.6's own examples (tests/impl/vllm/test_video.py's worked clips): the rate-driven loaders, Qwen2.5-VL's
    truncated arange, Qwen3-VL's resampling of a clip read whole, its 24 fps fallback and the ignored count."""
    q25 = vs.vllm_plan("qwen2.5-vl", Clip(10, 30.0), VideoRequest())
    assert (q25.indices, q25.size, q25.grid, q25.tokens, q25.times) == (
        (0, 2, 5, 7),
        (56, 56),
        (2, 4, 4),
        8,
        (0, 1 / 6),
    )
    assert vs.vllm_plan("qwen2.5-vl", Clip(3, 30.0), VideoRequest()).indices == (0, 1)
    assert vs.vllm_plan("qwen3-vl", Clip(30, 3.0), VideoRequest(fps=4.0)).indices == tuple(
        round(i * 29 / 19) for i in range(20)
    )  # 40 asked, all 30 read: the processor samples again at 2 fps (§20.6's off-grid clip)
    unknown = vs.vllm_plan("qwen3-vl", Clip(48, 0.0), VideoRequest())
    assert unknown.indices == (0, 16, 31, 47) and unknown.times == (8 / 24, 39 / 24)
    counted = vs.vllm_plan("qwen3-vl", Clip(120, 30.0), VideoRequest(num_frames=16))
    assert counted.indices == vs.vllm_plan("qwen3-vl", Clip(120, 30.0), VideoRequest()).indices and counted.notes
    capped = vs.vllm_plan("qwen2.5-vl", Clip(600, 60.0), VideoRequest(fps=45.0))
    assert len(capped.indices) == 300  # 45 fps capped at 30


@pytest.mark.parametrize(
    ("family", "clip", "request_", "why"),
    [
        ("qwen2.5-vl", Clip(1, 1.0), VideoRequest(), Refused),
        ("qwen2.5-vl", Clip(30, 0.0), VideoRequest(), Refused),
        ("qwen2.5-vl", Clip(30, 10.0), VideoRequest(max_pixels=50000), Refused),
        ("qwen3-vl", Clip(1, 1.0), VideoRequest(), Refused),
        ("qwen3-vl", Clip(30, 10.0), VideoRequest(total_pixels=50000), Unsupported),
    ],
)
def test_vllms_restated_rule_refuses_where_section_20_6_says(family, clip, request_, why) -> None:
    with pytest.raises(why):
        vs.vllm_plan(family, clip, request_)


class Served:
    """SGLang's stated rule with one change made on demand (a size, a pre-resize, a refusal): a served side."""

    system, label, real_code = "sglang-0.0.0", "SGLANG", False

    def __init__(self, family: str, change: str = "") -> None:
        self.family, self.change = family, change

    def plan(self, clip: Clip, request: VideoRequest):
        got = vs.sglang_plan(self.family, clip, request)
        if self.change == "size":
            return replace(got, size=(got.size[0] + 28, got.size[1]))
        if self.change == "pre":
            return replace(got, pre_size=(got.pre_size[0] + 28, got.pre_size[1]))
        if self.change == "refuse" and clip.frames > 100:
            raise ValueError("made up")
        return got


class Trained:
    family, system, label, real_code = "qwen3-vl", "deferlab", "TRAINED", False

    def plan(self, clip: Clip, request: VideoRequest):
        return oracle.trained_plan("qwen3-vl", clip, request)


POINT = (Clip(8100, 30.0, 1280, 720), VideoRequest())  # one of C17's rule pins: SGLang's total share binds


def failure(change: str, claim: str = "C17", point: tuple[Clip, VideoRequest] = POINT) -> str:
    with pytest.raises(AssertionError) as caught:
        vc.check(claim, [Served("qwen3-vl", change)], Trained(), *point)
    return str(caught.value)


def pattern(claim: str) -> str:
    rows = [c for c in tomllib.loads(CLAIMS.read_text())["claim"] if c["id"] == claim][0]["failure"]
    return rows["qwen3-vl sglang 0.5.17-0.5.23"]


@pytest.mark.parametrize("change", ["size", "pre", "refuse"])
def test_a_difference_the_stated_rule_does_not_give_is_a_new_signature(change) -> None:
    explained, odd = failure(""), failure(change)
    assert "not as semantics §20.5 states the engine's own rule" in odd and "not as" not in explained
    assert signature(f"AssertionError: {odd}", "defaults") != signature(f"AssertionError: {explained}", "defaults")
    assert re.search(pattern("C17"), f"AssertionError: {explained}")
    assert not re.search(pattern("C17"), f"AssertionError: {odd}")  # strict runs fail on it: the semantics must say


def test_a_pre_resize_the_rule_does_not_give_is_seen_only_by_c17() -> None:
    assert "pre-resize (784, 420) != (756, 420)" in failure("pre")
    assert "not as" not in failure("pre", "C16") and "not as" not in failure("pre", "C18")


def test_the_sweep_counts_the_differences_the_rule_explains() -> None:
    clips = (Clip(4, 1.0), Clip(120, 30.0), POINT[0])
    rows = {vc.TRAINED: Trained()}
    same, odd = vc.sweep(Served("qwen3-vl"), rows, clips), vc.sweep(Served("qwen3-vl", "size"), rows, clips)
    assert "every one as semantics §20.5 states the engine's rule" in same.evidence("C17", rows)
    assert re.search(r"\d+ not as semantics §20\.5 states", odd.evidence("C17", rows))
    assert "as semantics" not in vc.sweep(Trained(), rows, clips).evidence("C17", rows)  # no stated rule: no count
