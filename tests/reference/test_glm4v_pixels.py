"""GLM-4.1V's trained pixels restated (`reference.oracle.glm4v.preprocess`, semantics §18.9): C14's trained side,
checked bitwise against transformers 5.24.0's ``Glm4vImageProcessorPil`` run for real on every image class that
converts differently and on sizes that take each branch of its resize (scaled up from a side under the factor, kept,
rounded), plus the layout (temporal patch 2: each frame twice) and the refusals by hand."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.oracle import glm4v
from deferlab.reference.oracle.family_norm import checkpoint_levels
from deferlab.reference.system.errors import InputTypeError, InputValueError
from deferlab.reference.system.family_configs import family_profile, published_config
from tests.reference.test_ernie45_vl_pixels import assert_bitwise, classes, transformers_pixels

GLM = family_profile("glm-4.1v")
PATCH = 3 * 14 * 14  # one frame's values in a row; a row holds two (temporal patch 2)


def test_layout_and_grid_by_hand() -> None:
    """A uniform image: every row is one patch's 3 x 2 x 14 x 14 values, channel-major, each the level's value."""
    pv, grid = glm4v.preprocess(Image.new("RGB", (12, 10), (0, 128, 255)), GLM)
    table = checkpoint_levels(GLM.norm)
    assert grid.tolist() == [[1, 6, 8]] and grid.dtype == np.int64  # 12x10 -> 33x28 -> 112x84 (the minimum)
    assert pv.shape == (48, 2 * PATCH) and pv.dtype == np.float32
    rows = pv.reshape(48, 3, 2 * 196)
    for c, level in enumerate((0, 128, 255)):
        assert (rows[:, c] == table[level, c]).all()


def test_patch_order_is_merge_window_first_and_each_frame_twice() -> None:
    """A 224 x 56 image whose columns hold their patch index: rows run window by window (2 x 2 patches each), and
    a row's second frame repeats its first."""
    cols = np.repeat(np.arange(16, dtype=np.uint8) * 15, 14)[None, :].repeat(56, axis=0)
    rows_img = np.repeat(np.arange(4, dtype=np.uint8) * 60, 14)[:, None].repeat(224, axis=1)
    image = Image.fromarray(np.stack([cols, rows_img, np.zeros_like(cols)], axis=-1))
    pv, grid = glm4v.preprocess(image, GLM)
    assert grid.tolist() == [[1, 4, 16]]  # 2 * 56 * 224 = 25,088 pixels: kept
    table = checkpoint_levels(GLM.norm)
    level = [(int(np.argmin(abs(table[:, 0] - r[0]))), int(np.argmin(abs(table[:, 1] - r[392])))) for r in pv[:6]]
    assert level == [(0, 0), (15, 0), (0, 60), (15, 60), (30, 0), (45, 0)]
    frames = pv.reshape(len(pv), 3, 2, 196)
    assert (frames[:, :, 0] == frames[:, :, 1]).all()


def test_refusals() -> None:
    with pytest.raises(InputTypeError, match="image must be a PIL.Image.Image"):
        glm4v.preprocess(np.zeros((4, 4, 3), np.uint8), GLM)
    with pytest.raises(InputValueError, match="side ratio over 200"):
        glm4v.preprocess(Image.new("RGB", (1, 201)), GLM)  # scaled to 28 x 5628 first
    with pytest.raises(InputTypeError, match="cfg"):
        glm4v.preprocess(Image.new("RGB", (4, 4)), glm4v.Glm4vGeometry())  # geometry only: no statistics


def sized(seed: int = 7) -> list[Image.Image]:
    """Noise at sizes taking each branch: a side under the factor (1 x 1, 6 x 1, 1 x 200), kept (112 x 112),
    rounded within the bounds (300 x 200), and a long thin one (40 x 1000)."""
    rng = np.random.default_rng(seed)
    sizes = [(1, 1), (6, 1), (1, 200), (112, 112), (300, 200), (40, 1000)]
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


@pytest.mark.extra("transformers")
def test_pixels_equal_transformers_on_every_class_and_branch() -> None:
    module = pytest.importorskip("transformers.models.glm4v.image_processing_pil_glm4v")
    processor = module.Glm4vImageProcessorPil.from_dict(published_config("glm-4.1v"))
    for image in classes() + sized():
        assert_bitwise(glm4v.preprocess(image, GLM), transformers_pixels(processor, image))
