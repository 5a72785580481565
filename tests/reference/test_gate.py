"""The deferral gate oracle (semantics §4): SGLang's own cases, the byte rule, ties, per-image and vectorized forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from deferlab.reference.oracle.gate import ImagePayload, decide_arrays, payload, should_defer, should_defer_per_image
from deferlab.reference.oracle.navit import resize_config
from deferlab.reference.system.profiles import profile

K3 = profile("kimi-k3")
L1 = profile("sglang-gate-test-l1")


def test_sglang_case_small_tensor_defers() -> None:
    """(3, 32, 32) uint8 with in_patch_limit 65536 defers: raw 3072 <= processed 3*56*56*4 = 37632 (semantics §4.2)."""
    image = np.zeros((3, 32, 32), np.uint8)
    assert payload([image], profile("sglang-gate-test")) == [ImagePayload(32, 32, 3, 3072, 37632)]
    assert should_defer([image], profile("sglang-gate-test")) is True


def test_sglang_case_large_tensor_with_limit_one_does_not_defer() -> None:
    """(3, 1024, 1024) with in_patch_limit 1 stays eager: raw 3,145,728 > processed 9,408 (semantics §4.2)."""
    image = np.zeros((3, 1024, 1024), np.uint8)
    assert payload([image], L1) == [ImagePayload(1024, 1024, 3, 3_145_728, 9_408)]
    assert should_defer([image], L1) is False


@pytest.mark.parametrize(
    ("images", "transport", "cuda"),
    [
        ([np.zeros((3, 32, 32), np.float32)], "cpu", True),  # not raw uint8
        ([], "cpu", True),  # no images
        ([np.zeros((3, 32, 32), np.uint8)], "cuda_ipc", True),
        ([np.zeros((3, 32, 32), np.uint8)], "fabric", True),  # the tests' bypass keeps fabric eager
        ([np.zeros((3, 32, 32), np.uint8)], "cpu", False),  # no CUDA
        ([np.zeros((3, 32, 32), np.uint8), "not an image"], "cpu", True),
        ([Image.new("RGB", (8, 8)), np.zeros((3, 8, 8), np.int32)], "cpu", True),
    ],
)
def test_gate_closed_cases(images: list, transport: str, cuda: bool) -> None:
    """No images, non-cpu transport, no CUDA, or any non-(PIL | uint8) input: never deferred."""
    assert should_defer(images, K3, transport=transport, cuda_available=cuda) is False


def test_tie_defers() -> None:
    """raw == processed defers: a 56x56 RGB array under in_patch_limit 1 is 9,408 bytes both ways."""
    image = np.zeros((3, 56, 56), np.uint8)
    (p,) = payload([image], L1)
    assert p.raw_bytes == p.processed_bytes == 3 * 56 * 56
    assert should_defer([image], L1) is True
    assert should_defer([np.zeros((4, 56, 56), np.uint8)], L1) is False  # one more channel tips it


@pytest.mark.parametrize(
    ("image", "channels"),
    [
        (np.zeros((9, 7), np.uint8), 3),  # 2-D counts 3 (the semantics's intent; upstream raises IndexError first)
        (np.zeros((1, 9, 7), np.uint8), 3),
        (np.zeros((3, 9, 7), np.uint8), 3),
        (np.zeros((4, 9, 7), np.uint8), 4),
        (Image.new("RGB", (7, 9)), 3),
        (Image.new("RGBA", (7, 9)), 4),
        (Image.new("L", (7, 9)), 3),
        (Image.new("LAB", (7, 9)), 4),
    ],
)
def test_channel_rule(image: object, channels: int) -> None:
    """Raw bytes use the gate's channel rule at the source size: channels * w * h."""
    (p,) = payload([image], K3)
    assert (p.width, p.height, p.channels, p.raw_bytes) == (7, 9, channels, channels * 7 * 9)


def test_colour_keyed_images_count_four_channels() -> None:
    """P / L with a transparency key count 4 channels; RGB with one counts 3 (never promoted)."""
    for mode, key in (("P", 0), ("L", 5), ("RGB", (1, 2, 3))):
        image = Image.new(mode, (7, 9))
        image.info["transparency"] = key
        assert payload([image], K3)[0].channels == (3 if mode == "RGB" else 4)


sides = st.integers(1, 9000)


@given(st.lists(st.tuples(st.integers(1, 600), st.integers(1, 600), st.sampled_from([3, 4])), min_size=1, max_size=5))
def test_request_decision_is_the_byte_sum(sizes: list[tuple[int, int, int]]) -> None:
    """should_defer == (sum raw <= sum processed), and each term equals decide_arrays' column form."""
    raw, processed, _ = decide_arrays(
        np.array([w for w, _, _ in sizes]), np.array([h for _, h, _ in sizes]), np.array([c for *_, c in sizes]), L1
    )
    images = [np.zeros((c, h, w), np.uint8) for w, h, c in sizes]
    assert [p.raw_bytes for p in payload(images, L1)] == raw.tolist()
    assert [p.processed_bytes for p in payload(images, L1)] == processed.tolist()
    assert should_defer(images, L1) == (int(raw.sum()) <= int(processed.sum()))


@given(st.lists(st.tuples(st.integers(1, 600), st.integers(1, 600)), min_size=1, max_size=4))
def test_per_image_is_the_gate_applied_alone(sizes: list[tuple[int, int]]) -> None:
    """should_defer_per_image[i] == should_defer([image_i]) for every image."""
    images = [np.zeros((3, h, w), np.uint8) for w, h in sizes]
    assert should_defer_per_image(images, L1) == [should_defer([im], L1) for im in images]


def test_request_and_per_image_decisions_can_differ() -> None:
    """One decision per request can defer an image the per-image gate keeps eager (a boundary the semantics names)."""
    big, small = np.zeros((3, 1024, 1024), np.uint8), np.zeros((3, 14, 14), np.uint8)
    cfg = profile("sglang-gate-test").with_(in_patch_limit=64)
    per_image = should_defer_per_image([big] + [small] * 400, cfg)
    assert per_image[0] is False and all(per_image[1:])
    assert should_defer([big] + [small] * 400, cfg) is True


@given(st.lists(sides, min_size=1, max_size=30), st.lists(sides, min_size=1, max_size=30))
def test_decide_arrays_broadcasts_and_matches_scalar(widths: list[int], heights: list[int]) -> None:
    """A row of widths against a column of heights gives the scalar payload at every (h, w)."""
    raw, processed, defer = decide_arrays(np.array(widths)[None, :], np.array(heights)[:, None], 3, K3)
    assert raw.shape == processed.shape == defer.shape == (len(heights), len(widths))
    for i, h in enumerate(heights[:3]):
        for j, w in enumerate(widths[:3]):
            rc = resize_config(w, h, K3)
            assert raw[i, j] == 3 * w * h
            assert processed[i, j] == 3 * rc.padded_width * rc.padded_height * 4
            assert defer[i, j] == (raw[i, j] <= processed[i, j])
