"""ERNIE-4.5-VL's and MiMo-V2.5's trained pixels restated (`reference.oracle.ernie45_vl`, semantics §18.9): C14's
trained side, checked bitwise against transformers 5.24.0 run for real on every image class that converts
differently (``Ernie4_5_VLMoeImageProcessorPil``; MiMo-V2.5's ``Qwen2VLImageProcessorPil`` with its profile), plus
the layout and the refusals by hand."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.oracle import ernie45_vl as ernie
from deferlab.reference.oracle.family_norm import checkpoint_levels
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import family_profile, published_config

ERNIE, MIMO = family_profile("ernie-4.5-vl"), family_profile("mimo-v2.5")


def classes(seed: int = 31) -> list[Image.Image]:
    """One small image of each class whose RGB conversion differs (semantics §16.3), 23 x 37: resized up."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (23, 37, 4), dtype=np.uint8)
    rgb, rgba, grey = Image.fromarray(a[..., :3]), Image.fromarray(a), Image.fromarray(a[..., 0])
    p = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    p_trns = p.copy()
    p_trns.info["transparency"] = 3
    keyed = rgb.copy()
    keyed.info["transparency"] = tuple(int(v) for v in a[0, 0, :3])
    return [rgb, grey, rgba, rgba.convert("LA"), p, p_trns, grey.convert("1"), rgb.convert("CMYK"), keyed]


def test_layout_and_grid_by_hand() -> None:
    """A uniform image: every row is one patch's 3 x 14 x 14 values, channel-major, each the level's value."""
    pv, grid = ernie.preprocess(Image.new("RGB", (12, 10), (0, 128, 255)), ERNIE)
    table = checkpoint_levels(ERNIE.norm)
    assert grid.tolist() == [[1, 4, 6]] and grid.dtype == np.int64  # 12x10 -> 84x56 (the min-pixels branch)
    assert pv.shape == (24, 3 * 14 * 14) and pv.dtype == np.float32
    rows = pv.reshape(24, 3, 196)
    for c, level in enumerate((0, 128, 255)):
        assert (rows[:, c] == table[level, c]).all()


def test_patch_order_is_merge_window_first() -> None:
    """A 112 x 56 image whose columns hold their patch index: rows run window by window (2 x 2 patches each)."""
    cols = np.repeat(np.arange(8, dtype=np.uint8) * 30, 14)[None, :].repeat(56, axis=0)
    rows_img = np.repeat(np.arange(4, dtype=np.uint8) * 60, 14)[:, None].repeat(112, axis=1)
    image = Image.fromarray(np.stack([cols, rows_img, np.zeros_like(cols)], axis=-1))
    pv, grid = ernie.preprocess(image, ERNIE)
    assert grid.tolist() == [[1, 4, 8]]
    table = checkpoint_levels(ERNIE.norm)
    first = [(int(np.argmin(abs(table[:, 0] - r[0]))), int(np.argmin(abs(table[:, 1] - r[196])))) for r in pv[:6]]
    assert first == [(0, 0), (30, 0), (0, 60), (30, 60), (60, 0), (90, 0)]


def test_refusals() -> None:
    with pytest.raises(InputTypeError, match="image must be a PIL.Image.Image"):
        ernie.preprocess(np.zeros((4, 4, 3), np.uint8), ERNIE)
    with pytest.raises(InputValueError, match="side ratio 201 is over 200"):
        ernie.preprocess(Image.new("RGB", (201, 1)), ERNIE)
    with pytest.raises(InputTypeError, match="cfg"):
        ernie.preprocess(Image.new("RGB", (4, 4)), object())


def test_mimo_is_qwen_with_its_bounds_and_statistics() -> None:
    qcfg = ernie.qwen_config(MIMO, 2)
    assert (qcfg.temporal_patch_size, qcfg.max_pixels, qcfg.image_mean) == (2, MIMO.max_pixels, MIMO.image_mean)
    pv, grid = ernie.mimo_preprocess(Image.new("RGB", (12, 10), (1, 2, 3)), MIMO)
    assert grid.tolist() == [[1, 4, 6]] and pv.shape == (24, 3 * 2 * 196)


def transformers_pixels(processor, image: Image.Image):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = processor(image, return_tensors="np")
    return out["pixel_values"], out["image_grid_thw"]


def assert_bitwise(ours: tuple[np.ndarray, np.ndarray], theirs: tuple[np.ndarray, np.ndarray]) -> None:
    assert ours[0].dtype == theirs[0].dtype == np.float32 and ours[0].shape == theirs[0].shape
    assert (ours[0].view(np.uint32) == theirs[0].view(np.uint32)).all()
    assert (ours[1] == theirs[1]).all()


# family -> its transformers image processor (module under ``transformers.models``, class), the restatement, profile
PIXELS = {
    "ernie-4.5-vl": (
        "ernie4_5_vl_moe.image_processing_pil_ernie4_5_vl_moe",
        "Ernie4_5_VLMoeImageProcessorPil",
        ernie.preprocess,
        ERNIE,
    ),
    "mimo-v2.5": ("qwen2_vl.image_processing_pil_qwen2_vl", "Qwen2VLImageProcessorPil", ernie.mimo_preprocess, MIMO),
}


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("family", list(PIXELS))
def test_pixels_equal_transformers_on_every_class(family: str) -> None:
    module_name, processor_class, preprocess, cfg = PIXELS[family]
    module = pytest.importorskip(f"transformers.models.{module_name}")
    processor = getattr(module, processor_class).from_dict(published_config(family))
    for image in classes():
        assert_bitwise(preprocess(image, cfg), transformers_pixels(processor, image))
