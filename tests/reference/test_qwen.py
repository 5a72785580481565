"""Qwen2-VL's image processor restated (`reference.oracle.qwen`, semantics §18.2).

Hand values for every branch of smart_resize (rounding ties at .5, the min- and max-pixel branches, the 200
ratio refusal, 1x1), the layout by index arithmetic, the vectorized form against the scalar one (boundaries,
drawn sizes, the exhaustive 4096 x 4096 sweep, timed), then transformers run for real: geometry on every
boundary and drawn sizes, pixels bitwise on small images of every mode, under both RGB-conversion rules."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from PIL import Image

from deferlab.properties.strategies.images import ALL_MODES, pil_images
from deferlab.reference.oracle import qwen
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import HALF, QwenVLConfig, family_profile, published_config

Q25, Q3 = family_profile("qwen2.5-vl"), family_profile("qwen3-vl")
# factor 28 with a 784..3136 pixel budget: small sizes reach the max-pixel branch
TIGHT = QwenVLConfig(min_pixels=784, max_pixels=3136)
# patch 2, merge 2 (factor 4), 16..1600 pixels: images of sides <= 40 are shrunk, grown or kept
SMALL_DICT = {"patch_size": 2, "merge_size": 2, "temporal_patch_size": 2, "min_pixels": 16, "max_pixels": 1600}
SMALL = QwenVLConfig.from_preprocessor_config(SMALL_DICT)


@pytest.mark.parametrize(
    ("cfg", "hw", "expected"),
    [
        (Q25, (60, 90), (56, 84)),  # 60/28 = 2.14 -> 2, 90/28 = 3.21 -> 3: 4704 pixels, in budget
        (Q25, (42, 70), (56, 56)),  # 1.5 -> 2 and 2.5 -> 2 (ties to even): 3136 = min_pixels, not under
        (Q25, (70, 98), (56, 112)),  # 2.5 -> 2, 3.5 -> 4
        (Q25, (10, 20), (56, 84)),  # 0 and 1 factors: under; x sqrt(3136/200) = 3.96: ceil(1.41), ceil(2.83)
        (Q25, (1, 1), (56, 56)),  # rounds to 0x0: grown by 56, one 2x2 merge window
        (Q3, (1, 1), (256, 256)),  # factor 32, min 65536: grown by 256
        (Q25, (3598, 3584), (3584, 3584)),  # 128.5 -> 128: exactly max_pixels, not over
        (Q25, (3626, 3584), (3584, 3556)),  # 129.5 -> 130: over; / 1.00584: floor(128.75), floor(127.26)
        (TIGHT, (200, 100), (56, 28)),  # 196x112 over 3136; / sqrt(20000/3136) = 2.525: floor(2.83), floor(1.41)
        (TIGHT, (1000, 20), (392, 28)),  # floor(0.28) = 0 -> at least one factor
        (TIGHT, (200, 1), (420, 28)),  # the min branch ignores max_pixels: 420 x 28 = 11760 > 3136
        (TIGHT, (4000, 20), (784, 28)),  # ratio exactly 200, accepted; / 5.05: floor(28.28), floor(0.14) -> 1
    ],
)
def test_resize_target_by_hand(cfg: QwenVLConfig, hw: tuple[int, int], expected: tuple[int, int]) -> None:
    assert qwen.resize_target(*hw, cfg) == expected
    h, w = qwen.resize_targets(np.array([hw[0]]), np.array([hw[1]]), cfg)
    assert (int(h[0]), int(w[0])) == expected


def test_grid_and_tokens_by_hand() -> None:
    assert qwen.grid(60, 90, Q25) == (1, 4, 6) and qwen.num_tokens(60, 90, Q25) == 6
    assert qwen.grid(1, 1, Q3) == (1, 16, 16) and qwen.num_tokens(1, 1, Q3) == 64
    assert qwen.num_tokens(3626, 3584, Q25) == 256 * 254 // 4  # (3584 / 14) * (3556 / 14) / 2**2


@pytest.mark.parametrize("hw", [(201, 1), (1, 201), (4020, 20), (20, 4001)])
def test_side_ratio_over_200_is_refused(hw: tuple[int, int]) -> None:
    with pytest.raises(InputValueError, match=r"side ratio 20\d.* over 200.*smart_resize refuses"):
        qwen.resize_target(*hw, Q25)
    assert qwen.token_counts(np.array([hw[0]]), np.array([hw[1]]), Q25).tolist() == [0]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: qwen.resize_target(0, 5, Q25), InputValueError, "height must be an int >= 1, got 0"),
        (lambda: qwen.resize_target(5, 5, {}), InputTypeError, "cfg must be a QwenVLConfig"),
        (
            lambda: qwen.resize_targets(np.array([1.0]), np.array([1]), Q25),
            InputTypeError,
            "heights must be an integer",
        ),
        (
            lambda: qwen.resize_targets(np.array([1]), np.array([0]), Q25),
            InputValueError,
            r"widths must all be in 1\.\.",
        ),
        (lambda: qwen.preprocess(np.zeros((4, 4, 3), np.uint8), SMALL), InputTypeError, "image must be a PIL"),
        (lambda: qwen.preprocess(Image.new("RGB", (0, 3)), SMALL), InputValueError, "image is empty"),
        (
            lambda: qwen.preprocess(Image.new("RGB", (4, 4)), SMALL, transformers_version="4.57.0"),
            InputValueError,
            "transformers_version must be a transformers 5.x release",
        ),
        (
            lambda: qwen.convert_rgb(Image.new("La", (2, 2))),
            InputValueError,
            "convert_to_rgb refuses it: Pillow raises",
        ),
    ],
)
def test_front_door_refusals(call, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def boundary_sides(cfg: QwenVLConfig) -> list[int]:
    """Sides where smart_resize changes its mind: around each multiple of the factor and its half, around the
    square roots of both pixel bounds, and the ratio edge."""
    f = cfg.factor
    sides = {k * f + d for k in range(0, 6) for d in (-1, 0, 1, f // 2 - 1, f // 2, f // 2 + 1)}
    for bound in (cfg.min_pixels, cfg.max_pixels):
        root = int(bound**0.5)
        sides |= {root + d for d in range(-f - 1, f + 2)}
    sides |= {200, 201, 400, 401}
    return sorted(s for s in sides if s >= 1)


@pytest.mark.parametrize("cfg", [Q25, Q3, TIGHT, SMALL], ids=["qwen2.5-vl", "qwen3-vl", "tight", "small"])
def test_vectorized_equals_scalar_on_boundaries(cfg: QwenVLConfig) -> None:
    sides = np.array(boundary_sides(cfg))
    got_h, got_w = qwen.resize_targets(sides[:, None], sides[None, :], cfg)
    tokens = qwen.token_counts(sides[:, None], sides[None, :], cfg)
    for i, h in enumerate(sides.tolist()):
        for j, w in enumerate(sides.tolist()):
            try:
                expected = (*qwen.resize_target(h, w, cfg), qwen.num_tokens(h, w, cfg))
            except InputValueError:
                expected = (0, 0, 0)
            assert (got_h[i, j], got_w[i, j], tokens[i, j]) == expected, (h, w)


@given(h=st.integers(1, 1 << 20), w=st.integers(1, 1 << 20))
@example(h=41, w=41).via("a grown side that lands on a whole number of factors")
@example(h=1 << 20, w=5242).via("ratio just over 200")
def test_vectorized_equals_scalar_on_drawn_sizes(h: int, w: int) -> None:
    for cfg in (Q25, Q3):
        try:
            expected = qwen.resize_target(h, w, cfg)
        except InputValueError:
            expected = (0, 0)
        got = qwen.resize_targets(np.array(h), np.array(w), cfg)
        assert (int(got[0]), int(got[1])) == expected


def exhaustive(cfg: QwenVLConfig, side: int = 4096, rows: int = 256) -> np.ndarray:
    widths = np.arange(1, side + 1)[None, :]
    return np.concatenate(
        [
            qwen.token_counts(np.arange(a, min(a + rows, side + 1))[:, None], widths, cfg)
            for a in range(1, side + 1, rows)
        ]
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen2.5-vl", "qwen3-vl"])
def test_exhaustive_sweep_is_fast_and_agrees(name: str) -> None:
    """Every width x height in 1..4096 (16.8M sizes) in well under 60 s; the refusals counted by hand
    (2 * sum over m = 1..20 of (4096 - 200 m) = 79840), drawn cells equal to the scalar form."""
    cfg = family_profile(name)
    start = time.perf_counter()
    tokens = exhaustive(cfg)
    elapsed = time.perf_counter() - start
    assert elapsed < 60, f"{name}: {elapsed:.1f} s"
    assert tokens.shape == (4096, 4096) and int((tokens == 0).sum()) == 79840
    rng = np.random.default_rng(18)
    for h, w in rng.integers(1, 4097, (300, 2)).tolist():
        expected = 0 if max(h, w) > 200 * min(h, w) else qwen.num_tokens(h, w, cfg)
        assert tokens[h - 1, w - 1] == expected, (h, w)


def test_patchify_layout_by_index() -> None:
    """Row r of the output is patch (gy, gx) in merge-window order; its values are (c, t, py, px)."""
    cfg = QwenVLConfig(patch_size=2, merge_size=2, temporal_patch_size=3, min_pixels=16, max_pixels=1600)
    c, h, w = 3, 8, 12
    x = np.arange(c * h * w, dtype=np.float32).reshape(c, h, w)
    out = qwen.patchify(x, cfg)
    assert out.shape == (h // 2 * w // 2, c * 3 * 2 * 2) and out.dtype == np.float32
    gw, m, p = w // 2, 2, 2
    for r in range(out.shape[0]):
        window, inner = divmod(r, m * m)
        wy, wx = divmod(window, gw // m)
        gy, gx = wy * m + inner // m, wx * m + inner % m
        row = out[r].reshape(c, 3, p, p)
        for t in range(3):
            assert (row[:, t] == x[:, gy * p : gy * p + p, gx * p : gx * p + p]).all(), (r, t)
    with pytest.raises(InputValueError, match="multiples of patch_size"):
        qwen.patchify(np.zeros((3, 6, 8), np.float32), cfg)


def test_preprocess_by_hand_on_a_uniform_image() -> None:
    """8x4 of level 128 stays 8x4 (factor 4 divides both, 32 pixels in 16..1600); every value is
    (f32(128/255) - 0.5) / 0.5 = 2 * f32(128 * (1/255)) - 1."""
    cfg = QwenVLConfig.from_preprocessor_config({**SMALL_DICT, "image_mean": list(HALF), "image_std": list(HALF)})
    pixels, grid = qwen.preprocess(Image.new("RGB", (8, 4), (128, 128, 128)), cfg)
    assert grid.tolist() == [[1, 2, 4]] and grid.dtype == np.int64
    assert pixels.shape == (8, 3 * 2 * 2 * 2) and pixels.dtype == np.float32
    assert (pixels == np.float32(2) * np.float32(128 * (1 / 255)) - np.float32(1)).all()


def pixels(image: Image.Image) -> list[list[int]]:
    return np.asarray(image).reshape(-1, 3).tolist()


def test_rgb_conversion_rule_changed_in_5_21() -> None:
    rgba = Image.new("RGBA", (2, 1), (10, 20, 30, 0))
    rgba.putpixel((1, 0), (10, 20, 30, 255))
    assert pixels(qwen.convert_rgb(rgba, "5.24.0")) == [[255, 255, 255], [10, 20, 30]]
    assert pixels(qwen.convert_rgb(rgba, "5.20.2")) == [[10, 20, 30], [10, 20, 30]]  # alpha dropped
    keyed = Image.new("RGB", (2, 1), (1, 2, 3))
    keyed.info["transparency"] = (1, 2, 3)
    assert pixels(qwen.convert_rgb(keyed, "5.21.0")) == [[255, 255, 255]] * 2  # a keyed RGB image too
    assert qwen.convert_rgb(keyed, "5.19.0") is keyed  # RGB returned as is before 5.21
    half = Image.new("LA", (1, 1), (100, 128))
    assert qwen.convert_rgb(half, "5.24.0").getpixel((0, 0)) == (177, 177, 177)  # Pillow's blend over white


def test_normalize_levels_is_the_family_table() -> None:
    t = qwen.normalize_levels(Q3)
    assert t.shape == (256, 3) and t[0, 0] == -1.0 and t[255, 2] == 1.0


# --- transformers run for real ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tf():
    from transformers.models.qwen2_vl import image_processing_pil_qwen2_vl as module

    return module


def transformers_target(tf, h: int, w: int, cfg: QwenVLConfig) -> tuple[int, int] | None:
    try:
        return tf.smart_resize(h, w, factor=cfg.factor, min_pixels=cfg.min_pixels, max_pixels=cfg.max_pixels)
    except ValueError:
        return None


def ours_target(h: int, w: int, cfg: QwenVLConfig) -> tuple[int, int] | None:
    try:
        return qwen.resize_target(h, w, cfg)
    except InputValueError:
        return None


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("name", ["qwen2.5-vl", "qwen3-vl"])
def test_geometry_and_tokens_equal_transformers_on_every_boundary(tf, name: str) -> None:
    cfg = family_profile(name)
    processor = tf.Qwen2VLImageProcessorPil.from_dict(published_config(name))
    sides = boundary_sides(cfg)
    for h in sides:
        for w in sides:
            expected = transformers_target(tf, h, w, cfg)
            assert ours_target(h, w, cfg) == expected, (h, w)
            if expected is not None:
                assert qwen.num_tokens(h, w, cfg) * cfg.merge_size**2 == processor.get_number_of_image_patches(h, w)


@pytest.mark.extra("transformers")
@given(h=st.integers(1, 20000), w=st.integers(1, 20000))
@example(h=41, w=41)
@example(h=3626, w=3584)
def test_geometry_equals_transformers_on_drawn_sizes(tf, h: int, w: int) -> None:
    for cfg in (Q25, Q3, TIGHT):
        assert ours_target(h, w, cfg) == transformers_target(tf, h, w, cfg)


def transformers_pixels(tf, image: Image.Image, cfg_dict: dict):
    processor = tf.Qwen2VLImageProcessorPil.from_dict(cfg_dict)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = processor(image, return_tensors="np")
        except Exception as e:  # noqa: BLE001 - any refusal of transformers is compared with ours
            return e
    return out["pixel_values"], out["image_grid_thw"]


def assert_same_pixels(tf, image: Image.Image, cfg_dict: dict, version: str = "5.24.0", fed=None) -> None:
    """Ours for ``version`` vs transformers 5.24.0 fed ``fed`` (default the image itself): both refuse, or both
    give the same float32 bits and grid."""
    cfg = QwenVLConfig.from_preprocessor_config(cfg_dict)
    theirs = transformers_pixels(tf, image if fed is None else fed, cfg_dict)
    try:
        ours = qwen.preprocess(image, cfg, transformers_version=version)
    except InputValueError as e:
        assert isinstance(theirs, Exception), f"we refuse ({e}), transformers does not"
        return
    assert not isinstance(theirs, Exception), f"transformers refuses ({theirs!r}), we do not"
    assert ours[0].dtype == theirs[0].dtype == np.float32 and ours[0].shape == theirs[0].shape
    assert (ours[0].view(np.uint32) == theirs[0].view(np.uint32)).all()
    assert ours[1].dtype == np.int64 and (ours[1] == theirs[1]).all()


def classes(seed: int = 24) -> list[Image.Image]:
    """One small image of each class of semantics §16.3 that Qwen's converter sees differently."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (23, 37, 4), dtype=np.uint8)
    rgb = Image.fromarray(a[..., :3])
    rgba = Image.fromarray(a)  # partly transparent: alpha is noise
    p = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    p_trns = p.copy()
    p_trns.info["transparency"] = 3
    keyed = rgb.copy()
    keyed.info["transparency"] = tuple(int(v) for v in a[0, 0, :3])
    i16 = Image.frombytes("I;16", (37, 23), (a[..., 0].astype("<u2") * 200).tobytes())
    grey = Image.fromarray(a[..., 0])
    return [rgb, grey, rgba, rgba.convert("LA"), p, p_trns, grey.convert("1"), i16, rgb.convert("CMYK"), keyed]


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("name", ["qwen2.5-vl", "qwen3-vl"])
def test_pixels_equal_transformers_on_every_class(tf, name: str) -> None:
    for image in classes():
        assert_same_pixels(tf, image, published_config(name))


def keyed(mode: str, transparency: object) -> Image.Image:
    """A 1x1 image of ``mode`` whose ``transparency`` key is ``transparency`` (any value a file may carry)."""
    image = Image.new(mode, (1, 1))
    image.info["transparency"] = transparency
    return image


def old_rule(image: Image.Image) -> Image.Image:
    """transformers 5.0-5.20's convert_to_rgb restated here: RGB as is, anything else convert("RGB"); the result
    is rebuilt from its pixels so that 5.24.0 sees no key."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    return Image.fromarray(np.asarray(rgb))


@pytest.mark.extra("transformers")
def test_pre_5_21_rule_equals_transformers_fed_the_dropped_alpha(tf) -> None:
    for image in classes(7):
        assert_same_pixels(tf, image, SMALL_DICT, version="5.19.0", fed=old_rule(image))


@pytest.mark.extra("transformers")
@pytest.mark.filterwarnings("ignore:Palette images with Transparency:UserWarning")  # Pillow's, on convert("RGB")
@given(image=pil_images(modes=ALL_MODES, max_side=40), old=st.booleans())
@example(image=Image.new("La", (3, 2)), old=False).via("Pillow cannot convert La: both refuse")
@example(image=keyed("L", (1, 2, 3)), old=True).via("an L image keyed by an RGB triple: Pillow's TypeError, a refusal")
def test_pixels_equal_transformers_on_drawn_images(tf, image: Image.Image, old: bool) -> None:
    if old:
        try:
            fed = old_rule(image)
        except (ValueError, TypeError, OverflowError, OSError):  # Pillow cannot convert it (the refusals the
            # oracle maps to InputValueError): nothing to feed transformers, and we refuse
            with pytest.raises(InputValueError, match="refuses it"):
                qwen.preprocess(image, SMALL, transformers_version="5.20.2")
            return
        assert_same_pixels(tf, image, SMALL_DICT, version="5.20.2", fed=fed)
    else:
        assert_same_pixels(tf, image, SMALL_DICT)
