"""PaddleOCR-VL's image processor restated (`reference.oracle.paddleocr`, semantics §18.9).

Hand values for each branch of its smart_resize (the small-side step that Qwen's has not, the 200 ratio refusal,
both pixel branches, ties), the raster patch layout by index, the vectorized form against the scalar one (every
size to 120 x 120, every 1 x n and n x 1, drawn sizes, the exhaustive 4096 x 4096 sweep, timed), then transformers
5.24.0 run for real: geometry on the same sizes and pixels bitwise on small images of every class."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.oracle import paddleocr
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.family_configs import PaddleOCRVLConfig, family_profile, published_config
from tests.reference import family_checks as checks
from tests.reference.test_qwen import classes

CFG = family_profile("paddleocr-vl")  # factor 28, 147384..2822400 pixels
TIGHT = PaddleOCRVLConfig(min_pixels=784, max_pixels=3136)  # small sizes reach the max-pixel branch


BY_HAND = [  # (config, (h, w), resize target)
    (CFG, (1, 1), (392, 392)),  # 28 x 28 after the small-side step, then grown to the minimum
    (CFG, (1, 200), (28, 5600)),  # 28 x 5600: ratio 200 exactly, not refused (Qwen refuses 1 x 201 only)
    (CFG, (200, 1), (5600, 28)),
    (CFG, (20, 30), (336, 476)),  # 28 x round(42) = 42, then grown
    (CFG, (1000, 800), (1008, 812)),  # in budget: 35.7 -> 36, 28.57 -> 29 factors
    (CFG, (3000, 4000), (1428, 1932)),  # over: x 1/sqrt(12e6 / 2822400), floored
    (TIGHT, (100, 100), (56, 56)),  # 112 x 112 = 12544 > 3136: shrunk
    (TIGHT, (10, 10), (28, 28)),  # small-side step to 28 x 28 = 784, the minimum: kept
]
# the ratio is read after the small-side step: 1 x 5600 is refused, 1 x 200 (28 x 5600) kept
TestResizeRules = checks.resize_rules(
    paddleocr, CFG, targets=BY_HAND, grid=((1000, 800), (1, 72, 58), 72 * 58 // 4),
    refused=[(1, 5600), (27, 5401), (5601, 28)], sweep={"published": CFG, "tight": TIGHT},
    refusals=("side ratio .* is over 200", family_profile("qwen2.5-vl"), "cfg must be a PaddleOCRVLConfig"),
)  # fmt: skip


def test_preprocess_without_rgb_conversion_refuses_other_modes() -> None:
    with pytest.raises(InputValueError, match="do_convert_rgb is false"):
        paddleocr.preprocess(Image.new("L", (4, 4)), PaddleOCRVLConfig(do_convert_rgb=False))


@pytest.mark.slow
def test_exhaustive_sweep_is_fast_and_counts_its_refusals() -> None:
    """Every width x height in 1..4096 in well under 60 s; 79,840 refused (the small-side step keeps 1 x 200)."""
    start, refused, ws = time.perf_counter(), 0, np.arange(1, 4097)
    for h0 in range(1, 4097, 256):
        h, _ = paddleocr.resize_targets(np.arange(h0, h0 + 256)[:, None], ws[None, :], CFG)
        refused += int((h == 0).sum())
    assert time.perf_counter() - start < 60 and refused == 79840


def test_patchify_is_raster_over_patches() -> None:
    """Row r is patch (r // gw, r % gw); inside it (C, p, p): element [c, y, x] is pixel (c, py + y, px + x)."""
    cfg = PaddleOCRVLConfig(patch_size=2, merge_size=2)
    chw = np.arange(3 * 4 * 6, dtype=np.float32).reshape(3, 4, 6)
    rows = paddleocr.patchify(chw, cfg)
    assert rows.shape == (2 * 3, 3, 2, 2)
    for r in range(6):
        gy, gx = divmod(r, 3)
        assert (rows[r] == chw[:, 2 * gy : 2 * gy + 2, 2 * gx : 2 * gx + 2]).all()


def transformers_processor():
    module = pytest.importorskip("transformers.models.paddleocr_vl.image_processing_pil_paddleocr_vl")
    return module, module.PaddleOCRVLImageProcessorPil.from_dict(published_config("paddleocr-vl"))


@pytest.mark.extra("transformers")
def test_geometry_and_patches_equal_transformers() -> None:
    module, processor = transformers_processor()
    checks.smart_resize_equals(paddleocr, module, processor, CFG, TIGHT)


@pytest.mark.extra("transformers")
def test_pixels_equal_transformers_on_every_class() -> None:
    _, processor = transformers_processor()
    for image in [*classes(), Image.new("RGB", (1, 1), (9, 200, 31)), Image.new("RGB", (3, 90), (1, 2, 3))]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                theirs = processor(image, return_tensors="np")
            except Exception as e:  # noqa: BLE001 - a refusal is compared with ours
                with pytest.raises(InputValueError):
                    paddleocr.preprocess(image, CFG)
                assert e is not None
                continue
        values, grid = paddleocr.preprocess(image, CFG)
        assert (
            values.dtype == theirs["pixel_values"].dtype == np.float32 and values.shape == theirs["pixel_values"].shape
        )
        assert (values.view(np.uint32) == theirs["pixel_values"].view(np.uint32)).all(), image.mode
        assert grid.tolist() == theirs["image_grid_thw"].tolist()
