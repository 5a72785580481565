"""The engines' Gemma 4 video rules as semantics §20.10(b) restates them (`reference.oracle.video_served`), on
clips worked by hand here: the numbers come from the section's text, not from the functions under test. That the
engines' own code gives these rules on every grid point is what the video claims read (C16-C18: a difference from
TRAINED the rule does not give is worded unexplained, a signature of its own)."""

from __future__ import annotations

import pytest

from deferlab.reference.oracle import video_served as vs
from deferlab.reference.system.video import Clip, Unsupported, VideoRequest


def test_rule_for_names_the_gemma4_rules_and_leaves_glm_unruled() -> None:
    assert vs.rule_for("vllm-0.34.0", "gemma4")[1] is vs.vllm_gemma4_plan
    assert vs.rule_for("sglang-0.5.23", "gemma4")[1] is vs.sglang_gemma4_plan
    assert vs.rule_for("lmdeploy-0.18.0", "gemma4") is None
    assert vs.rule_for("sglang-0.5.23", "glm-4.1v") is None


def test_vllm_takes_a_truncated_linspace_of_32_or_every_frame() -> None:
    got = vs.vllm_gemma4_plan("gemma4", Clip(33, 1.0), VideoRequest())
    assert got.indices == (*range(31), 32)  # linspace(0, 32, 32): k x 32 / 31 truncated; the last is 32
    assert got.times == (*map(float, range(31)), 32.0) and got.padded == 0
    assert got.size == (432, 336) and got.grid == (32, 21, 27) and got.tokens == 32 * 63
    assert vs.vllm_gemma4_plan("gemma4", Clip(5, 30.0), VideoRequest()).indices == (0, 1, 2, 3, 4)  # n = N
    assert vs.vllm_gemma4_plan("gemma4", Clip(100, 25.0), VideoRequest(num_frames=8)).indices == (
        0, 14, 28, 42, 56, 70, 84, 99)  # fmt: skip
    # a rate: n = min(32, N, floor(N / F x fps)) = floor(4 s x 1) = 4, at least 1
    assert vs.vllm_gemma4_plan("gemma4", Clip(100, 25.0), VideoRequest(fps=1.0)).indices == (0, 33, 66, 99)
    assert vs.vllm_gemma4_plan("gemma4", Clip(3, 30.0), VideoRequest(fps=1.0)).indices == (0,)
    assert vs.vllm_gemma4_plan("gemma4", Clip(48, 0.0), VideoRequest()).times[-1] == 1.0  # 47 / 24, floored


def test_sglang_takes_every_frame_to_32_then_i_n_over_32_and_tells_position_over_24() -> None:
    got = vs.sglang_gemma4_plan("gemma4", Clip(33, 1.0), VideoRequest(num_frames=8))  # num_frames ignored
    assert got.indices == tuple(i * 33 // 32 for i in range(32)) and got.indices[-1] == 31
    assert got.times == tuple(float(p // 24) for p in range(32))  # 0 s for positions 0..23, then 1 s
    assert vs.sglang_gemma4_plan("gemma4", Clip(3, 30.0), VideoRequest(fps=4.0)).indices == (0, 1, 2)
    with pytest.raises(Unsupported, match="pixel bound"):
        vs.sglang_gemma4_plan("gemma4", Clip(33, 1.0), VideoRequest(min_pixels=1, max_pixels=2))
