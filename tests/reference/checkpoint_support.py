"""What the checkpoint oracle's test files share: the small profile their images go through, its sizes, the
normalizations, and reproducible noise.

Why a module: `test_checkpoint` (hand values, refusals, properties) and `test_checkpoint_modes` (every PIL mode
at both fill stages) check one oracle on the same inputs. `reseed` puts the one generator back to its first
draw in place (the test files hold the same object), so each test draws the same noise whatever ran before it
and a failure reproduces.
"""

from __future__ import annotations

import numpy as np

from deferlab.reference.oracle import checkpoint as ck
from deferlab.reference.system.config import BackgroundConfig, PreprocessConfig
from deferlab.reference.system.profiles import profile

HALF = ((0.5,) * 3, (0.5,) * 3)
CLIP = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
BOARD = BackgroundConfig("chessboard", square_size=3, white_value=255, gray_value=180)
# p 2, m 2, L 16: a 20x14 image is resized to 9x6 (scale sqrt(16/70)), padded to 12x8.
SMALL = profile("sglang-epd-test").with_(in_patch_limit=16, patch_limit_on_one_side=32, background=BOARD)
STAGES = ("after_resize", "before_resize")
W, H, NW, NH = 20, 14, 9, 6
SEED = 20260809
RNG = np.random.default_rng(SEED)


def reseed() -> None:
    """`RNG` back to its first draw, in place."""
    RNG.bit_generator.state = np.random.default_rng(SEED).bit_generator.state


def lv(image, stage: str, cfg: PreprocessConfig = SMALL) -> np.ndarray:
    return ck.levels(image, cfg.with_(fill_stage=stage))


def noise(*shape: int) -> np.ndarray:
    return RNG.integers(0, 256, shape, dtype=np.uint8)
