"""The frame-index code generated clips carry (semantics §20.3): each frame's source index written into its pixels
as 20 black or white blocks, and read back after a codec or a resize, so which frames a side took is read, not
inferred. NumPy only; `reference.oracle.video` re-exports it.
"""

from __future__ import annotations

import numpy as np

from deferlab.reference.system.errors import InputValueError

INDEX_BITS, CHECK_BITS, _COLS, _ROWS = 16, 4, 5, 4  # 16 index + 4 check bits: a 5 x 4 grid of black/white cells
_GREY, _LOW, _HIGH = 128, 96, 160


def _cells(height: int, width: int) -> list[tuple[int, int, int, int]]:
    """(top, bottom, left, right) of each bit's cell, row-major, inside a margin of an eighth of each side
    (semantics §20.3)."""
    my, mx = height // 8, width // 8
    ys = np.linspace(my, height - my, _ROWS + 1).round().astype(int)
    xs = np.linspace(mx, width - mx, _COLS + 1).round().astype(int)
    return [(ys[r], ys[r + 1], xs[c], xs[c + 1]) for r in range(_ROWS) for c in range(_COLS)]


def _check(index: int) -> int:
    """The 4 check bits: the XOR of the index's nibbles, XOR 0b1010 (a frame rotated or mirrored by a decoder
    reads as another pattern, which this check refuses 15 times in 16; semantics §20.3)."""
    return (index ^ index >> 4 ^ index >> 8 ^ index >> 12 ^ 0b1010) & 0xF


def encode_index(height: int, width: int, index: int) -> np.ndarray:
    """A (height, width, 3) uint8 RGB frame carrying ``index`` (0..65535) and 4 check bits as 20 blocks (semantics
    §20.3): greys only, so 4:2:0 chroma cannot flip a bit; blocks of an eighth of the frame, so a codec's
    quantization and a resize keep each block's centre black or white."""
    if not 0 <= index < 1 << INDEX_BITS:
        raise InputValueError(f"frame index {index} out of range; accepted: 0..{(1 << INDEX_BITS) - 1}")
    if height < 16 or width < 16:
        raise InputValueError(f"index frame {width}x{height} too small; accepted: at least 16x16")
    frame = np.full((height, width, 3), _GREY, dtype=np.uint8)
    code = index | _check(index) << INDEX_BITS
    for bit, (t, b, left, r) in enumerate(_cells(height, width)):
        frame[t:b, left:r] = 255 if code >> bit & 1 else 0
    return frame


def read_index(frame: np.ndarray) -> int:
    """The index `encode_index` wrote into ``frame`` (H, W, 3) uint8 RGB, after a codec or a resize (semantics
    §20.3): each block's central half must read clearly black or white, the margin grey, the check bits match;
    else `InputValueError` naming what failed (not an index frame, damaged past reading, rotated or mirrored)."""
    a = np.asarray(frame)
    if a.ndim != 3 or a.shape[2] != 3 or min(a.shape[:2]) < 16:
        raise InputValueError(f"read_index takes an (H, W, 3) frame of at least 16x16, got shape {a.shape}")
    luma = a.astype(np.float64).mean(axis=2)
    h, w = luma.shape
    edge = luma[: max(1, h // 16)].mean()
    if not _LOW <= edge <= _HIGH:
        raise InputValueError(f"unreadable index frame {w}x{h}: its top margin averages {edge:.1f}, not mid-grey")
    index = 0
    for bit, (t, b, left, r) in enumerate(_cells(h, w)):
        dy, dx = (b - t) // 4, (r - left) // 4
        v = luma[t + dy : b - dy, left + dx : r - dx].mean()
        if _LOW <= v <= _HIGH:
            raise InputValueError(f"unreadable index frame {w}x{h}: block {bit} averages {v:.1f} (neither black "
                                  "nor white)")  # fmt: skip
        index |= int(v > _HIGH) << bit
    code, index = index >> INDEX_BITS, index & (1 << INDEX_BITS) - 1
    if code != _check(index):
        raise InputValueError(f"unreadable index frame {w}x{h}: check bits {code:04b} do not match index {index} "
                              "(a rotated, mirrored or damaged frame)")  # fmt: skip
    return index
