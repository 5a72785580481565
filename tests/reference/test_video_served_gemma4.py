"""The engines' Gemma 4 video rules as semantics §20.10(b) restates them (`reference.oracle.video_served`), on
clips worked by hand here: the numbers come from the section's text, not from the functions under test. That the
engines' own code gives these rules on every grid point is what the video claims read (C16-C18: a difference from
TRAINED the rule does not give is worded unexplained, a signature of its own)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


def test_vllm_counts_soft_tokens_from_the_frame_size_with_its_own_arithmetic() -> None:
    """§20.10(b) "vLLM's soft-token count", worked by hand: 64x48 and 190x142 scale to 432x336 (9 x 7 units of
    48: 21 x 27 patches, 63 tokens); 1920x16 rounds its short side up to 48 and is clamped at 70 (the long side
    alone gives 91 units); at 17x1190 (70:1) the exact arithmetic puts the sides at 48 and 3360, TRAINED's floats
    land on them (70 tokens), vLLM's (H / 16)(W / 16) product lands the long side under 3360 (3312: 69)."""
    assert vs.vllm_gemma4_soft_tokens(64, 48) == vs.vllm_gemma4_soft_tokens(190, 142) == 63
    assert vs.vllm_gemma4_soft_tokens(1920, 16) == vs.vllm_gemma4_soft_tokens(16, 1920) == 70
    assert vs.vllm_gemma4_soft_tokens(17, 1190) == vs.vllm_gemma4_soft_tokens(2380, 34) == 69
    got = vs.vllm_gemma4_plan("gemma4", Clip(12, 30.0, 17, 1190), VideoRequest(num_frames=12))
    assert (got.size, got.grid, got.tokens) == ((48, 3360), (12, 210, 3), 12 * 69)  # the grid is TRAINED's


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4096), st.integers(1, 4096))
@example(17, 1190)
@example(1190, 17)
@example(34, 2380)
@example(190, 142)
@example(1920, 16)
def test_vllm_and_trained_count_alike_but_at_the_70_to_1_ties(width: int, height: int) -> None:
    """The two counts agree on every frame size to 4096 a side but the four ties §20.10(b) lists (a scan of all
    16.8 million sizes found exactly those four; this draws from them)."""
    trained = vs.g4.plan_of(Clip(1, 1.0, width, height), [0], (0.0,)).tokens
    ties = {(17, 1190), (1190, 17), (34, 2380), (2380, 34)}
    assert (vs.vllm_gemma4_soft_tokens(width, height) != trained) == ((width, height) in ties)
