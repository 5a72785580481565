# deferlab reproducer (format 1): claim C12 on sglang-0.5.23
# Claim: C12: Staging keeps every PIL mode's true alpha (transparent pixels end on the background, opaque ones
#   keep their colour) or rejects the image clearly before any work.
# System: sglang-0.5.23 (sglang 0.5.23, commit -)
# Spec: 0.5.23
# Flaw: a fully transparent pixel does not end on the background
# Recorded failure: AssertionError: RGBa: a fully transparent pixel is not background
# Counterexample: deferlab's minimal counterexample, from versions.json: ["PIL.Image(mode='RGBa', size=(1, 1),
#   info={}, data=bytes.fromhex('0a141e00'))", "BackgroundConfig(pattern='white', square_size=16, white_value=255,
#   gray_value=200, square_on_top_left=True)"]
# Written by: deferlab 0.1.0 (commit d24c675d3dc6)
# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's
#   loader: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.
"""Reproducer of finding F30 (C12 on 0.5.23): a fully transparent pixel does not end on the background."""

import numpy as np
import torch
from PIL import Image

from sglang.srt.multimodal.kimi_k3_image_processing import fill_transparent_bg, to_chw_uint8

MODE, SIZE, DATA, PALETTE = 'RGBa', (1, 1), bytes.fromhex('0a141e00'), None
BACKGROUND = {'pattern': 'white', 'chessboard_square_size': 16, 'chessboard_white_value': 255, 'chessboard_gray_value': 200, 'chessboard_square_on_top_left': True}  # the checkpoint's transparent_bg_config


def _background(height, width):
    """The background level of each pixel for BACKGROUND (white, black, gray or a chessboard)."""
    bg = BACKGROUND
    if bg["pattern"] != "chessboard":
        return np.full((height, width), {"white": 255, "black": 0, "gray": 128}[bg["pattern"]], dtype=np.float32)
    y, x = np.mgrid[0:height, 0:width]
    gray = (y // bg["chessboard_square_size"] + x // bg["chessboard_square_size"]) % 2 == (
        1 if bg["chessboard_square_on_top_left"] else 0
    )
    return np.where(gray, bg["chessboard_gray_value"], bg["chessboard_white_value"]).astype(np.float32)


def test_c12_fully_transparent_pixels_end_on_the_background():
    """Staging (to_chw_uint8) then compositing (fill_transparent_bg) must put every pixel whose alpha is 0
    (as Pillow reads the image) on the background."""
    image = Image.frombytes(MODE, SIZE, DATA)
    if PALETTE is not None:
        image.putpalette(PALETTE)
    alpha = np.asarray(image.convert("RGBA"))[..., 3]
    x = to_chw_uint8(image, device="cpu").to(torch.float32).unsqueeze(0)
    got = fill_transparent_bg(x, BACKGROUND)[0].numpy()  # (3, H, W)
    clear = alpha == 0
    assert clear.any()
    want = _background(*alpha.shape)
    assert (got[:, clear] == want[clear]).all(), f"{MODE}: transparent pixels became {got[:, clear].T.tolist()}"
