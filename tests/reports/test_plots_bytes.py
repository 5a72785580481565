"""C20's figure (`reports.report.plots.bytes.side_by_side`): a PNG of the fixed size, cropped to where the two
decodes differ, and one-line refusals of what it cannot draw (semantics §20.8)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.system.errors import InputValueError
from deferlab.reports.report.plots import bytes as plots


def _noise(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_writes_a_png_of_the_fixed_size(tmp_path: Path) -> None:
    a = _noise(30, 40)
    b = a.copy()
    b[5:9, 10:14] = 255 - b[5:9, 10:14]
    out = plots.side_by_side(a, b, "RGBA PNG 40x30", tmp_path / "f.png")
    assert out == tmp_path / "f.png"
    with Image.open(out) as png:
        assert png.format == "PNG" and png.size == (900, 360)
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"]  # written atomically: no temp file left


def test_crops_to_where_the_decodes_differ() -> None:
    differ = np.zeros((30, 40), bool)
    differ[5:9, 10:14] = True
    rows, cols = plots._crop(differ)
    assert (rows.start, rows.stop, cols.start, cols.stop) == (4, 10, 9, 15)
    assert plots._crop(np.zeros((3, 4), bool)) == (slice(None), slice(None))


def test_draws_different_sizes_and_grey_images(tmp_path: Path) -> None:
    turned = plots.side_by_side(_noise(30, 40), _noise(40, 30), "EXIF 6", tmp_path / "turned.png")
    grey = plots.side_by_side(_noise(9, 13)[..., 0], _noise(9, 13)[..., :1], "L", tmp_path / "grey.png")
    for out in (turned, grey):
        with Image.open(out) as png:
            assert png.size == (900, 360)


@pytest.mark.parametrize(
    ("trained", "served", "path", "message"),
    [
        (np.zeros((3, 4, 3), np.float32), _noise(3, 4), "x.png", "trained is float32 .*accepted: a non-empty uint8"),
        (_noise(3, 4), [[1, 2]], "x.png", "served is list; accepted"),
        (_noise(3, 4), np.zeros((3, 4, 2), np.uint8), "x.png", r"served has shape \(3, 4, 2\); accepted"),
        (np.zeros((0, 4, 3), np.uint8), _noise(3, 4), "x.png", "trained is uint8 .*non-empty"),
        (_noise(3, 4), _noise(3, 4), "x.jpg", "is not a .png file; accepted: a path ending .png"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, trained, served, path: str, message: str) -> None:
    with pytest.raises(InputValueError, match=message) as caught:
        plots.side_by_side(trained, served, "t", tmp_path / path)
    assert "\n" not in str(caught.value)
    assert not list(tmp_path.iterdir())
