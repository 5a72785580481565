"""The §21.7 impact numbers (`properties.impact`): bf16 rounding and ulps, PSNR, the tower-dtype pixel numbers,
the realistic images as sent, and the verdict row that carries them (semantics §21.7)."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties import impact
from deferlab.properties.verdicts import Recorder
from deferlab.reference.system import realistic


def _bf16_by_decimal(x: float) -> float:
    """bf16 rounding restated another way: the float32 value's 8-bit significand rounded to nearest, ties to even,
    with Python's exact arithmetic (no bit tricks)."""
    if x == 0 or not math.isfinite(x):
        return x
    if abs(x) < 2**-126:  # subnormal: the quantum is fixed at 2**-133 (8 bits below the smallest normal binade)
        return round(x / 2**-133) * 2**-133
    m, e = math.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1
    scaled = m * 2**8  # 8 significant bits (1 implicit + 7 stored)
    return math.ldexp(round(scaled), e - 8)  # Python's round: ties to even


@given(st.floats(-(2.0**100), 2.0**100, allow_nan=False, width=32))
@example(1.0 + 2**-8)  # a tie between 1 and 1 + 2**-7: to even (1.0)
@example(1.0 + 3 * 2**-8)  # a tie: to even (1 + 2**-6)
@example(-2.2)
@example(1e-45)  # float32's smallest subnormal rounds to 0 in bf16
@example(3 * 2**-134)  # a subnormal tie: to even (2**-132)
def test_bf16_rounds_to_nearest_even(x: float) -> None:
    got = float(impact.bf16(np.array([x], np.float32))[0])
    assert got == _bf16_by_decimal(float(np.float32(x)))


def test_bf16_ulps_are_the_trained_binade_s() -> None:
    trained = np.array([1.0, 1.0, 2.0, -0.5, 0.0], np.float32)
    served = np.array([1.0 + 2**-7, 1.0 - 2**-7, 2.0 + 2**-5, -0.5 - 2**-8, 0.0], np.float32)
    assert impact.bf16_ulps(served, trained).tolist() == [1.0, 1.0, 2.0, 1.0, 0.0]


def test_psnr_of_one_level_everywhere_and_of_equal_arrays() -> None:
    a = np.zeros((4, 4, 3), np.uint8)
    assert impact.psnr(a + 1, a) == pytest.approx(20 * math.log10(255), abs=1e-12)
    assert impact.psnr(a, a) == math.inf


def test_pixel_numbers_count_levels_and_what_survives_bf16() -> None:
    trained = np.full((2, 2, 3), 128, np.uint8)
    served = trained.copy()
    served[0, 0, 0] = 129  # one level: does it survive the bf16 cast of (x/255 - 0.5)/0.5?
    served[1, 1, 2] = 0  # 128 levels: it does
    got = impact.pixel_numbers(served, trained, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    assert (got["compared"], got["differ"], got["max_levels"]) == (12, 2, 128)
    # 128/255*2-1 = 0.00392...; 129/255*2-1 = 0.01176...: both exactly representable apart in bf16
    a = impact.bf16(np.array([(128 / 255 - 0.5) / 0.5, (129 / 255 - 0.5) / 0.5], np.float32))
    assert got["bf16_differ"] == 1 + int(a[0] != a[1])
    assert got["psnr_db"] == round(impact.psnr(served, trained), 2)
    with pytest.raises(ValueError, match="shapes"):
        impact.pixel_numbers(served[:1], trained, (0.5,) * 3, (0.5,) * 3)


def test_pixel_numbers_of_equal_images_say_so() -> None:
    a = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    got = impact.pixel_numbers(a, a.copy(), (0.48, 0.45, 0.4), (0.27, 0.26, 0.28))
    assert (got["differ"], got["bf16_differ"], got["max_bf16_ulps"], got["psnr_db"]) == (0, 0, 0.0, "inf")


@pytest.mark.parametrize("record", realistic.images(300), ids=lambda r: f"{r.kind}-{r.mode}-{r.orientation}")
def test_a_realistic_image_is_sent_in_its_mode_orientation_and_format(record: realistic.ImageRecord) -> None:
    w, h = impact._small(record)
    data = impact.image_bytes(record.kind, record.mode, record.orientation, w, h)
    image = Image.open(io.BytesIO(data))
    jpeg = record.kind in impact.JPEG_CLASSES and record.mode in ("RGB", "L")
    assert image.format == ("JPEG" if jpeg else "PNG")
    assert image.size == (w, h) and max(w, h) == impact.LONG_SIDE
    assert image.mode == record.mode
    assert image.getexif().get(0x0112, 1) == record.orientation
    if record.mode in ("RGBA", "LA"):
        alpha = np.asarray(image.getchannel("A"))
        assert (alpha.min() < 255) == (record.kind in impact.TRANSPARENT_CLASSES)
    if record.mode == "P":
        assert ("transparency" in image.info) == (record.kind in impact.TRANSPARENT_CLASSES)


def test_share_and_ratios() -> None:
    got = impact.share({"b": [1, 4], "a": [0, 6]})
    assert got == {"affected": 1, "of": 10, "share": 0.1, "by_class": {"a": [0, 6], "b": [1, 4]}}
    r = impact.ratios([(20, 10), (5, 10), (10, 10)])
    assert (r["ratio_min"], r["ratio_median"], r["ratio_max"], r["served_total"], r["trained_total"]) == (
        0.5, 1.0, 2.0, 35, 30,
    )  # fmt: skip


class _Loader:
    """A loader that decodes with Pillow and, when ``exif`` is False, ignores the orientation tag."""

    def __init__(self, label: str, exif: bool) -> None:
        self.label, self.exif = label, exif

    def load(self, data: bytes, kind: str) -> Image.Image:
        from PIL import ImageOps

        image = Image.open(io.BytesIO(data))
        return (ImageOps.exif_transpose(image) if self.exif else image).convert("RGB")


def _problem(want, got, data, kind):
    a, b = want.load(data, kind), got.load(data, kind)
    return None if a.size == b.size and np.array_equal(np.asarray(a), np.asarray(b)) else "differs"


def test_bytes_impact_counts_exactly_the_oriented_records_when_a_loader_ignores_exif() -> None:
    got = impact.bytes_impact([_Loader("served", exif=False)], _Loader("trained", exif=True), _problem, n=400)
    records = realistic.images(400)
    # a mirror (2, 4, 5, 7) or a turn changes a gradient image: every orientation other than 1 differs
    assert got["realistic"]["affected"] == sum(r.orientation != 1 for r in records)
    assert got["realistic"]["of"] == 400
    same = impact.bytes_impact([_Loader("served", exif=True)], _Loader("trained", exif=True), _problem, n=400)
    assert same["realistic"]["affected"] == 0


def test_an_impact_is_attached_to_the_last_verdict_of_its_claim_and_policy() -> None:
    rec = Recorder()
    rec.record_claim("C20", "p", "fails", "first")
    rec.record_claim("C20", "p", "fails", "second")
    rec.attach_impact("C20", "p", {"realistic": {"affected": 1}})
    assert "impact" not in rec.claims[0] and rec.claims[1]["impact"] == {"realistic": {"affected": 1}}
    with pytest.raises(ValueError, match="no verdict of C16"):
        rec.attach_impact("C16", "p", {})


class _G:
    """A geometry: equal when its tokens are."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _G) and other.tokens == self.tokens

    __hash__ = None  # type: ignore[assignment]


def test_geometry_impact_counts_the_displayed_sizes_that_differ_and_their_tokens() -> None:
    def trained(w: int, h: int) -> _G:
        return _G(w * h // 1000)

    def served(w: int, h: int) -> _G:  # doubles the tokens of portrait sizes, refuses sizes over 10,000 wide
        if w > 10_000:
            raise ValueError("too wide")
        return _G(w * h // 1000 * (2 if h > w else 1))

    records = realistic.images(500)
    got = impact.geometry_impact([served], trained, n=500)
    sizes = [realistic.displayed(r) for r in records]
    assert got["realistic"]["affected"] == sum(h > w or w > 10_000 for w, h in sizes)
    assert got["tokens"]["ratio_min"] == got["tokens"]["ratio_max"] == 2.0  # refusals have no tokens
    same = impact.geometry_impact([trained], trained, n=500)
    assert same["realistic"]["affected"] == 0 and "tokens" not in same


def test_images_impact_reads_the_problem_on_each_mode_and_alpha() -> None:
    def drops_alpha(image) -> str | None:  # a served side differing only where alpha is below 255
        if image.mode in ("RGBA", "LA"):
            return "differs" if np.asarray(image.getchannel("A")).min() < 255 else None
        return "differs" if image.mode == "P" and "transparency" in image.info else None

    records = realistic.images(600)
    got = impact.images_impact(drops_alpha, n=600)
    want = sum(r.kind in impact.TRANSPARENT_CLASSES and r.mode in ("RGBA", "LA", "P") for r in records)
    assert got["realistic"]["affected"] == want > 0


def test_images_impact_leaves_a_grid_change_at_the_remade_size_out_and_takes_the_familys_size() -> None:
    from deferlab.reference.system.families import FAMILIES

    sizes = set()

    def grid_on_grey(image) -> str | None:  # a grid that differs for grey images only, at whatever size
        sizes.add(image.size)
        return f"[L] {impact._GRID_CHANGE} 9" if image.mode in ("L", "LA") else None

    got = impact.images_impact(grid_on_grey, n=600, size=FAMILIES["internvl"].remade)["realistic"]
    grey = sum(r.mode in ("L", "LA") for r in realistic.images(600))
    assert grey > 0 and got["grid_at_remade_size"] == grey and got["of"] == 600 - grey and got["affected"] == 0
    assert sizes == {(12, 12)}  # InternVL's: one tile on the card's rule (semantics §21.7)
    assert "12x12" in got["distribution"]


def test_tower_numbers_count_bf16_and_levels() -> None:
    trained = np.array([0.5, -1.0, 0.25], np.float32)
    served = np.array([0.5 + 2**-9, -1.0, 0.25 + 2**-5], np.float32)  # the first vanishes in bf16; the last:
    # 2**-5 at 0.25, whose bf16 ulp is 2**(-2 - 7): 16 ulps
    got = impact.tower_numbers(served, trained, np.array([10, 20, 31]), np.array([10, 20, 30]))
    assert (got["bf16_differ"], got["max_bf16_ulps"], got["differ"], got["max_levels"]) == (1, 16.0, 1, 1)


def test_a_measurement_that_raises_is_said_in_one_line() -> None:
    def broken() -> dict:
        raise ValueError("no such family\nsecond line")

    got = impact.guarded(broken)
    assert got == {"not_measured": "ValueError: no such family"}
    assert impact.guarded(lambda: {"realistic": 1}) == {"realistic": 1}


def test_the_levels_kept_for_a_picture_are_a_window_around_the_first_difference() -> None:
    from deferlab.properties.family_impact import WINDOW, window

    served = np.zeros((40, 3, 100), np.uint8)  # 40 patches x 3 channels x 100 elements: 4,000 per channel
    trained = served.copy()
    trained[25, 2, 7] = 9  # element 2,507 of channel 2
    s, t, offset = window(served, trained)
    assert len(s) == len(t) == 3 and len(s[0]) == len(t[0]) == WINDOW
    assert np.argwhere(np.array(t) != np.array(s)).tolist() == [[2, 2507 - offset]]
    assert offset == 2507 - WINDOW // 8


def test_video_impact_counts_apart_the_clips_both_sides_take() -> None:
    """§21.7: a video cell's ``affected`` counts the one-sided refusals too (its crash finding's); ``both_take``
    counts only the clips both sides plan and that differ, the share a cell's other finding states. Read on the
    Gemma 4 rules: TRAINED refuses a clip under 32 frames (one-sided where vLLM's rule takes it); where both take a
    clip, C16 differs wherever vLLM's linspace is not TRAINED's i x N // 32, C17 only at the 70:1 ties."""
    from types import SimpleNamespace

    from deferlab.reference.oracle import video_gemma4 as g4
    from deferlab.reference.oracle import video_served as vs
    from deferlab.reference.system.video import Clip, VideoRequest

    trained = SimpleNamespace(plan=g4.plan)
    served = SimpleNamespace(plan=lambda clip, request: vs.vllm_gemma4_plan("gemma4", clip, request))
    clips = [Clip(r.frames, r.fps, r.width, r.height) for r in realistic.videos(200)]
    short = sum(c.frames < 32 for c in clips)
    linspace = sum(
        c.frames >= 32
        and vs.vllm_gemma4_plan("gemma4", c, VideoRequest()).indices != tuple(g4.taken(c, VideoRequest()))
        for c in clips
    )
    c16 = impact.video_impact("C16", [served], trained)["realistic"]
    assert (c16["affected"], c16["both_take"]) == (short + linspace, linspace)
    c17 = impact.video_impact("C17", [served], trained)["realistic"]
    ties = sum((c.width, c.height) in {(17, 1190), (1190, 17), (34, 2380), (2380, 34)} for c in clips)
    assert (c17["affected"], c17["both_take"]) == (short, ties)
