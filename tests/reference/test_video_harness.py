"""The video claims' harness (properties.video_claims, semantics §20.2-§20.3) on sides made up here: each reading
can fail, the smallest differing point is the one pinned, refusals and options a side does not take are told apart."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from deferlab.properties import video_claims as vc
from deferlab.reference.system.video import Clip, DecodedVideo, Unsupported, VideoPlan, VideoRequest


@dataclass
class Side:
    """A sampler of ``n`` frames spread over the clip, rounded or truncated; refusing or not answering on demand."""

    rounding: bool = True
    n: int = 4
    refuse_below: int = 0
    takes_counts: bool = True
    times_offset: float = 0.0
    family: str = "qwen3-vl"
    label: str = "FAKE"
    system: str = "fake-1.0"
    real_code: bool = False

    def plan(self, clip: Clip, request: VideoRequest) -> VideoPlan:
        if request.num_frames is not None and not self.takes_counts:
            raise Unsupported("num_frames: not taken")
        if clip.frames < self.refuse_below:
            raise ValueError(f"too short: {clip.frames}")
        n = min(request.num_frames or self.n, clip.frames)
        x = np.linspace(0, clip.frames - 1, n)
        idx = tuple(int(v) for v in (np.round(x) if self.rounding else x.astype(int)))
        fps = clip.fps or 24.0
        times = tuple(i / fps + self.times_offset for i in idx[::2])
        return VideoPlan(idx, (28, 28), (len(idx) // 2 or 1, 2, 2), max(1, len(idx) // 2), times)

    def decode(self, data: bytes, request: VideoRequest) -> DecodedVideo:
        raise NotImplementedError

    def provenance(self) -> dict[str, str]:
        return {"sample": "modelled: a test side"}


CLIPS = (Clip(1, 30.0), Clip(4, 30.0), Clip(7, 30.0), Clip(300, 30.0), Clip(12, 24.0))


def test_the_same_rule_agrees_everywhere() -> None:
    found = vc.sweep(Side(), {vc.TRAINED: Side()}, CLIPS)
    assert found.points == len(CLIPS) * len(vc.OPTION_SETS)
    assert all(not found.differ[vc.TRAINED][c] for c in vc.FIELDS)


def test_truncating_against_rounding_fails_sampling_at_its_smallest_clip() -> None:
    found = vc.sweep(Side(rounding=False), {vc.TRAINED: Side()}, CLIPS)
    # 1, 4 and 7 frames spread exactly (steps 0, 1, 2: no fraction to round); 12 frames at 4 are 0, 3.67, ...
    assert found.first("C16") == (Clip(12, 24.0), VideoRequest())
    assert vc.compare("C16", vc.answer(Side(rounding=False), Clip(12, 24.0), VideoRequest()),
                      vc.answer(Side(), Clip(12, 24.0), VideoRequest())) == (
        "frames taken differ from the trained side's: index 1: 3 != 4")  # fmt: skip


def test_times_are_compared_within_a_microsecond() -> None:
    assert vc.compare("C18", vc.answer(Side(times_offset=5e-7), CLIPS[3], VideoRequest()),
                      vc.answer(Side(), CLIPS[3], VideoRequest())) is None  # fmt: skip
    said = vc.compare("C18", vc.answer(Side(times_offset=0.5), CLIPS[3], VideoRequest()),
                      vc.answer(Side(), CLIPS[3], VideoRequest()))  # fmt: skip
    assert said is not None and said.startswith("times differ from the trained side's: grid step 0: 0.500000 s")


def test_stamps_are_compared_as_text_where_both_sides_write_them() -> None:
    """C18 reads the text before each frame exactly (a moved space differs) when both sides give it, and skips it
    when one side writes none (every family but Gemma 4)."""
    told = VideoPlan((0, 30), times=(0.0, 1.0), stamps=("00:00 ", " 00:01 "))
    moved = VideoPlan((0, 30), times=(0.0, 1.0), stamps=("00:00 ", "00:01 "))
    assert vc.field_difference("C18", told, told) is None
    assert vc.field_difference("C18", moved, told) == "stamp 1: '00:01 ' != ' 00:01 '"
    assert vc.field_difference("C18", VideoPlan((0,), times=(0.0,), stamps=("00:00 ",)), told) == "1 times != 2"
    assert vc.field_difference("C18", VideoPlan((0, 30), times=(0.0, 1.0), stamps=("00:00 ",)), told) == (
        "1 stamps != 2"
    )
    assert vc.field_difference("C18", VideoPlan((0, 30), times=(0.0, 1.0)), told) is None
    assert vc.field_difference("C17", moved, told) is None  # only C18 reads them


def test_a_one_sided_refusal_fails_and_a_shared_one_agrees() -> None:
    short = Clip(2, 30.0)
    served, trained = vc.answer(Side(refuse_below=3), short, VideoRequest()), vc.answer(Side(), short, VideoRequest())
    assert vc.compare("C17", served, trained) == (
        "the served side refused what the trained side takes (ValueError: too short: 2)"
    )
    assert vc.compare("C17", trained, served).startswith("the served side took what the trained side refuses")
    assert vc.compare("C17", served, served) is None


def test_an_option_a_side_does_not_take_is_counted_not_failed() -> None:
    found = vc.sweep(Side(takes_counts=False), {vc.TRAINED: Side()}, CLIPS)
    assert found.unanswered == {"num_frames=8": len(CLIPS), "num_frames=16": len(CLIPS)}
    assert all(not found.differ[vc.TRAINED][c] for c in vc.FIELDS)


def test_check_raises_with_the_point_and_what_differs() -> None:
    with pytest.raises(AssertionError, match=r"^\[12@24 64x48; defaults\] frames taken differ .*index 1: 3 != 4"):
        vc.check("C16", [Side(rounding=False)], Side(), Clip(12, 24.0), VideoRequest())
    vc.check("C16", [Side()], Side(), Clip(12, 24.0), VideoRequest())  # agreement: nothing raised


def test_geometry_reads_every_field() -> None:
    a, b = VideoPlan((0, 1), (28, 28), (1, 2, 2), 1), VideoPlan((0, 1), (28, 28), (1, 2, 2), 2)
    assert vc.field_difference("C17", a, b) == "tokens 1 != 2"
    assert vc.field_difference("C17", a, VideoPlan((0, 1), (28, 56), (1, 2, 2), 1)) == "size (28, 28) != (28, 56)"
    assert vc.field_difference("C16", a, b) is None


def test_the_strip_record_names_every_side() -> None:
    fig = vc.strips([Side(rounding=False)], {vc.TRAINED: Side()}, (Clip(12, 24.0), VideoRequest()))
    assert fig["kind"] == "video-strips" and fig["differs"] and fig["frames"] == 12
    assert [s["side"] for s in fig["sides"]] == ["fake-1.0 (qwen3-vl, video)", vc.TRAINED]
    assert fig["sides"][0]["indices"] != fig["sides"][1]["indices"]


def test_the_strip_shows_the_first_clip_both_sides_take() -> None:
    """A one-sided refusal draws no frame: the strip's point is the first difference both sides answer (a refusal
    still comes first for the claim's own counterexample)."""
    found = vc.sweep(Side(rounding=False, refuse_below=2), {vc.TRAINED: Side()}, CLIPS)
    assert found.first("C16") == (Clip(1, 30.0), VideoRequest())  # the served side refuses one frame
    assert found.first_taken("C16") == (Clip(12, 24.0), VideoRequest())  # where the two samplers differ
    assert vc.sweep(Side(refuse_below=2), {vc.TRAINED: Side()}, CLIPS).first_taken("C16") is None  # refusals only


def test_the_first_difference_the_rule_does_not_explain_is_pinned() -> None:
    """An unexplained difference anywhere on the grid is replayed (so it reaches the claim's signature); none when
    every difference is the rule's, or when no rule is stated."""
    odd = vc.UNEXPLAINED.format(rule="semantics §20.6")
    found = [
        (Clip(1, 5.0), VideoRequest(), "frames taken differ from the trained side's: index 0: 0 != 1"),
        (Clip(602, 1.0), VideoRequest(fps=4.0), f"the served side refused what the trained side takes{odd} (x)"),
    ]
    swept = vc.Sweep(differ={vc.TRAINED: {"C16": found}}, rule="semantics §20.6")
    assert swept.first("C16") == (Clip(1, 5.0), VideoRequest())
    assert swept.first_unexplained("C16") == (Clip(602, 1.0), VideoRequest(fps=4.0))
    assert vc.Sweep(differ={vc.TRAINED: {"C16": found[:1]}}, rule="semantics §20.6").first_unexplained("C16") is None
    assert vc.Sweep(differ={vc.TRAINED: {"C16": found}}).first_unexplained("C16") is None
    assert swept.first_unexplained("C17") is None
