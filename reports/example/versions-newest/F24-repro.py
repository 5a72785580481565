# deferlab reproducer (format 1): claim C13 on sglang-0.5.23
# Claim: C13: For every image size, the served resize target, padding, grid and prompt tokens equal the
#   checkpoint's.
# System: sglang-0.5.23 (sglang 0.5.23, commit -)
# Spec: 0.5.23
# Model family: internvl (InternVL 2.5/3), the engine's default serving path
# Flaw: the served tiling or resize target differs from the checkpoint's
# Recorded failure: AssertionError: [448x448]: sglang-0.5.23 (internvl, served): 1344x1344 grid (3, 3, 10) 2560
#   tokens != checkpoint's 448x448 grid (1, 1, 1) 256 tokens
# Counterexample: deferlab's minimal counterexample, from versions.json: [448, 448]
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's
#   loader: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F24 (C13 on internvl:0.5.23): the served tiling or resize target differs from the checkpoint's."""

import torch

from sglang.srt.multimodal.processors.internvl import InternVLProcessor

TILE = 448
MIN_NUM = 1
MAX_NUM = 12
USE_THUMBNAIL = True
SIZE = (448, 448)
# (width, height) of the counterexample


def _served_tiles(width, height):
    """SGLang's own tiling: InternVLProcessor.dynamic_preprocess, called as its request method calls it
    (image_size=TILE, max_num=MAX_NUM, use_thumbnail=True) on the normalized image tensor (3, height, width)."""
    tiles = InternVLProcessor.dynamic_preprocess(
        torch.zeros(3, height, width), image_size=TILE, max_num=MAX_NUM, use_thumbnail=USE_THUMBNAIL
    )
    return int(tiles.shape[0])


def _card_grid(width, height):
    """The model card's find_closest_aspect_ratio (semantics §18.4): the candidates (cols, rows) with
    MIN_NUM <= cols*rows <= MAX_NUM, built as a set and sorted by cols*rows; walking them, a strictly nearer
    w/h replaces the best, an equally near one only when width*height > 0.5 * TILE**2 * cols*rows."""
    ratios = sorted(
        {(i, j) for n in range(MIN_NUM, MAX_NUM + 1) for i in range(1, n + 1) for j in range(1, n + 1)
         if MIN_NUM <= i * j <= MAX_NUM},
        key=lambda r: r[0] * r[1],
    )
    aspect, best, best_diff = width / height, (1, 1), float("inf")
    for cols, rows in ratios:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * TILE * TILE * cols * rows:
            best = (cols, rows)
    return best


def _card_tiles(width, height):
    """The card's tile count: cols*rows, plus the thumbnail when USE_THUMBNAIL and more than one tile."""
    cols, rows = _card_grid(width, height)
    return cols * rows + (1 if USE_THUMBNAIL and cols * rows != 1 else 0)


def test_c13_the_served_tiling_is_the_cards():
    """The tiles served for an image of SIZE (width, height) must be the model card's (C13: the served grid and
    its prompt tokens, one token block per tile)."""
    served = _served_tiles(*SIZE)
    want = _card_tiles(*SIZE)
    assert served == want, (
        f"{SIZE[0]}x{SIZE[1]}: {served} tiles served, the card's {want} (grid {_card_grid(*SIZE)} cols x rows)"
    )
