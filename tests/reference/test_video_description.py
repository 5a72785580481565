"""The shared description of requests as sent (semantics §20): the clip metadata, the grid, a user's options."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.video import (
    GRID_FPS,
    Clip,
    VideoRequest,
    check_options,
    differing,
    grid_clips,
    grid_durations,
    user_requests,
)


def test_the_grid_is_300_durations_by_20_rates_with_every_clip_at_least_one_frame() -> None:
    durations = grid_durations()
    assert len(durations) == 300 and len(set(durations)) == 300
    assert durations[0] == 0.1 and durations[99] == 10.0 and durations[-1] == pytest.approx(1200.0)
    assert len(GRID_FPS) == 20 and len(set(GRID_FPS)) == 20
    clips = grid_clips()
    assert len(clips) == 6000
    assert min(c.frames for c in clips) == 1
    # every clip is round(duration x fps) frames: the 0.1 s clip at 240 fps has 24 frames
    assert Clip(24, 240.0) in clips and Clip(288_000, 240.0) in clips


@given(st.integers(1, 100_000), st.floats(0.001, 1000.0))
def test_a_clip_duration_is_frames_over_rate(frames: int, fps: float) -> None:
    assert Clip(frames, fps).duration == frames / fps


@pytest.mark.parametrize("bad", [dict(frames=0, fps=30.0), dict(frames=5, fps=-1.0), dict(frames=5, fps=float("nan")),
                                 dict(frames=5, fps=30.0, width=0)])  # fmt: skip
def test_a_clip_the_samplers_could_not_read_is_refused(bad: dict) -> None:
    with pytest.raises(InputValueError, match="Clip"):
        Clip(**bad)


def test_an_unknown_rate_has_no_duration() -> None:
    assert Clip(10, 0.0).duration == 0.0


def test_request_labels_name_the_options_given() -> None:
    assert VideoRequest().label() == "defaults"
    assert VideoRequest(fps=1.0, num_frames=8).label() == "fps=1, num_frames=8"
    assert VideoRequest(fps=2.5).given() == {"fps": 2.5}


def test_differing_names_the_first_position_or_the_lengths() -> None:
    assert differing((0, 1, 2), (0, 1, 3)) == "index 2: 2 != 3"
    assert differing((0, 1), (0, 1, 2)) == "2 frames != 3"


@pytest.mark.parametrize(
    ("fps", "frames", "match"),
    [("0", None, "--video-fps '0': not a sampling rate"), ("x", None, "--video-fps 'x'"), ("241", None, "240"),
     (None, "0", "--video-frames 0: out of range"), (None, "1.5", "not a whole number"), (None, True, "whole")],
)  # fmt: skip
def test_a_users_video_options_are_checked_in_one_line(fps, frames, match) -> None:
    with pytest.raises(InputValueError, match=match) as info:
        check_options(fps, frames)
    assert "accepted" in str(info.value) and "\n" not in str(info.value)


def test_a_users_options_become_one_request_each() -> None:
    assert user_requests(None) == ()
    found = user_requests(json.dumps(check_options("0.5", "12")))
    assert found == (VideoRequest(fps=0.5), VideoRequest(num_frames=12))
