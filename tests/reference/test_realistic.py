"""The realistic input distribution (semantics §21.5): enough records, every class cited and drawn, one list per
seed, and every size within its class's stated bounds."""

from __future__ import annotations

from collections import Counter

import pytest

from deferlab.reference.system import realistic
from deferlab.reference.system.errors import InputValueError


@pytest.fixture(scope="module")
def images() -> list[realistic.ImageRecord]:
    return realistic.images()


@pytest.fixture(scope="module")
def videos() -> list[realistic.VideoRecord]:
    return realistic.videos()


def test_the_default_draw_is_at_least_2000_images_and_200_videos(images: list, videos: list) -> None:
    assert len(images) >= 2000 and len(videos) >= 200


def test_every_class_is_cited_weighted_and_drawn(images: list, videos: list) -> None:
    for c in realistic.IMAGE_CLASSES + realistic.VIDEO_CLASSES:
        assert len(c.source) > 20 and c.weight > 0, c.name
    assert abs(sum(c.weight for c in realistic.IMAGE_CLASSES) - 1) < 1e-9
    assert abs(sum(c.weight for c in realistic.VIDEO_CLASSES) - 1) < 1e-9
    assert set(Counter(r.kind for r in images)) == {c.name for c in realistic.IMAGE_CLASSES}
    assert set(Counter(r.kind for r in videos)) == {c.name for c in realistic.VIDEO_CLASSES}


def test_one_seed_gives_one_list_and_another_seed_another() -> None:
    assert realistic.images(300, seed=7) == realistic.images(300, seed=7)
    assert realistic.videos(50, seed=7) == realistic.videos(50, seed=7)
    assert realistic.images(300, seed=7) != realistic.images(300, seed=8)


def test_image_sizes_modes_and_orientations_are_their_class_s(images: list) -> None:
    classes = {c.name: c for c in realistic.IMAGE_CLASSES}
    for r in images:
        c = classes[r.kind]
        low, high = c.bounds
        assert low <= min(r.width, r.height) and max(r.width, r.height) <= high, r
        assert r.mode in dict(c.modes) and r.orientation in dict(c.orientations), r
    assert {r.orientation for r in images} >= {1, 3, 6, 8}
    assert {"RGB", "RGBA", "L", "P"} <= {r.mode for r in images}
    assert (4032, 3024) in {(r.width, r.height) for r in images}
    assert (2480, 3508) in {(r.width, r.height) for r in images}  # A4 at 300 dpi


def test_videos_have_the_class_s_sizes_rates_and_a_frame_count_of_duration_times_fps(videos: list) -> None:
    classes = {c.name: c for c in realistic.VIDEO_CLASSES}
    for v in videos:
        c = classes[v.kind]
        assert (v.width, v.height) in c.sizes and v.fps in c.rates, v
        assert c.duration[0] - 1e-3 <= v.duration <= c.duration[1] + 1e-3, v
        assert v.frames == max(1, round(v.duration * v.fps)), v
    assert any(abs(v.fps - 30000 / 1001) < 1e-12 for v in videos)  # NTSC


def test_displayed_swaps_the_sides_of_orientations_5_to_8() -> None:
    r = realistic.ImageRecord("phone 12 MP", 4032, 3024, "RGB", 6)
    assert realistic.displayed(r) == (3024, 4032)
    assert realistic.displayed(realistic.ImageRecord("icon", 32, 16, "RGBA", 1)) == (32, 16)


@pytest.mark.parametrize("n", [0, -1, 2.5, True])
def test_a_count_that_is_not_positive_is_refused_in_one_line(n: object) -> None:
    with pytest.raises(InputValueError, match=r"^images n=.*: not a positive whole number; accepted: 1 or more$"):
        realistic.images(n)  # type: ignore[arg-type]
