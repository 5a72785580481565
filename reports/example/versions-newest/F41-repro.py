# deferlab reproducer (format 1): claim C14 on vllm-0.34.0
# Claim: C14: For every image class the checkpoint accepts (and uint8 arrays), the served pixel values equal the
#   checkpoint's, every differing element explained: at most 1 uint8 level off, and within the C15 allowance of
#   the checkpoint's normalization of the served level.
# System: vllm-0.34.0 (vllm 0.34.0, commit -)
# Spec: 0.34.0
# Model family: internvl (InternVL 2.5/3), the engine's default serving path
# Flaw: the served pixels of an image are more than one level off the checkpoint's
# Recorded failure: AssertionError: [RGBA partly transparent] 12x10: vllm-0.34.0 (internvl, served): 7649837 of
#   7827456 values unexplained (7746516 differ, up to 255 levels off; first patch 0 channel 0 element 0: level 239
#   served, 255 trained)
# Counterexample: deferlab's minimal counterexample, from versions.json: ['RGBA partly transparent', 12, 10, 0]
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --vllm SPEC (deferlab's
#   loader, with transformers, torchvision at the release's pins: no vLLM dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F41 (C14 on internvl:vllm-0.34.0): the served pixels of an image are more than one level off the checkpoint's."""

import numpy as np
from PIL import Image

from vllm.multimodal.parse import MultiModalDataParser
from vllm.transformers_utils.processors.internvl import InternVLChatImageProcessor

TILE = 448
MIN_NUM = 1
MAX_NUM = 12
USE_THUMBNAIL = True
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
# An image of the recorded class 'RGBA partly transparent' and size:
MODE = 'RGBA'
SIZE = (12, 10)
SEED = 0


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


def _image():
    """An image of the recorded class and size (deferlab's own draw is not in the record): fixed random bytes
    from SEED, alpha strictly between 0 and 255 where the class has an alpha band."""
    rng = np.random.RandomState(SEED)
    height, width = SIZE[1], SIZE[0]
    if MODE == "RGBA":
        data = np.concatenate([rng.randint(0, 256, (height, width, 3)), rng.randint(1, 255, (height, width, 1))], 2)
    else:  # "LA"
        data = np.concatenate([rng.randint(0, 256, (height, width, 1)), rng.randint(1, 255, (height, width, 1))], 2)
    return Image.fromarray(data.astype(np.uint8), MODE)


def _card_levels(image):
    """The model card's load_image up to the levels (semantics §18.4): convert("RGB") (alpha dropped), the grid,
    image.resize((cols*SIZE, rows*SIZE)) (Pillow's default filter), crops row-major, the thumbnail
    image.resize((SIZE, SIZE)) when more than one tile: uint8 (tiles, 3, SIZE, SIZE)."""
    rgb = image.convert("RGB")
    cols, rows = _card_grid(*rgb.size)
    resized = rgb.resize((cols * TILE, rows * TILE))
    tiles = [resized.crop((c * TILE, r * TILE, (c + 1) * TILE, (r + 1) * TILE)) for r in range(rows) for c in range(cols)]
    if USE_THUMBNAIL and len(tiles) != 1:
        tiles.append(rgb.resize((TILE, TILE)))
    return np.stack([np.asarray(t) for t in tiles]).transpose(0, 3, 1, 2).astype(np.int16)


def _served_levels(image):
    """What vLLM feeds the tower: its request parser (MultiModalDataParser, which composites transparency onto
    white), then its own InternVLChatImageProcessor (the card's tiling, torchvision's ToTensor and Normalize with
    ImageNet's statistics); each value read back as the level it normalizes."""
    parsed = MultiModalDataParser()._parse_image_data([image]).get(0)
    processor = InternVLChatImageProcessor(
        image_size=TILE, min_dynamic_patch=MIN_NUM, max_dynamic_patch=MAX_NUM, dynamic_image_size=True,
        use_thumbnail=USE_THUMBNAIL,
    )
    values = processor(images=[parsed], return_tensors="pt")["pixel_values_flat"].double().numpy()
    mean, std = np.asarray(MEAN).reshape(1, 3, 1, 1), np.asarray(STD).reshape(1, 3, 1, 1)
    return np.rint((values * std + mean) * 255).astype(np.int16)


def test_c14_the_served_pixels_are_the_cards():
    """Every served value must be the card's level, at most one level off (C14's part (a); the float ulps are
    C15's)."""
    image = _image()
    served, trained = _served_levels(image), _card_levels(image)
    assert served.shape == trained.shape, f"{served.shape} served, the card's {trained.shape}"
    _at_most_one_level_off(served, trained, "card's", "tile")


def _at_most_one_level_off(served, trained, whose, unit):
    """Raise naming how many values are more than one uint8 level off ``whose`` and the first of them."""
    off = np.abs(served - trained)
    bad = off > 1
    if bad.any():
        n, c, y, x = (int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{int(bad.sum())} of {off.size} values more than 1 level off the {whose} (up to {int(off.max())} "
            f"levels; first {unit} {n} channel {c} ({y}, {x}): level {served[n, c, y, x]} served, "
            f"{trained[n, c, y, x]} trained)"
        )
