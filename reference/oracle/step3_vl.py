"""Step3-VL's windowing geometry, restated in NumPy for every image size at once (semantics §18.9).

Why a restatement: the trained side is the checkpoint's remote-code ``processing_step3.py`` (``stepfun-ai/step3``),
which deferlab has not read; what is stated here is its rule as the two engines' copies of it state it (SGLang's
``processors/step3_vl.py``, vLLM's ``transformers_utils/processors/step3_vl.py``). Those copies differ in one
comparison, the window choice for a long side of exactly 728 (SGLang ``<=``, vLLM ``<``), so ``boundary`` names
which reading is meant; until the remote code is read neither is the checkpoint's, and C13 is not judged.

The rule, per (width, height), each step in float64 as the copies compute it in Python:

* a short side under 32 with a side ratio over 4 is padded to a square of the long side;
* a long side over 3024 is scaled to 3024 (``int`` of each side times ``3024 / long``);
* the window: long side within 728, the short side when ``long / short > 1.5``, else none; otherwise
  ``min(short, 504)`` when ``long / short > 4``, else 504;
* each side at least a window snaps to a multiple of it, one more when ``side / window - side // window > 0.2``;
* windows tile the snapped size (a side under a window gets one); a row break after each row but the last;
* tokens: 169 + 2 for the 728 x 728 global view, 81 + 2 per window, one per row break.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BOUNDARIES", "GLOBAL_TOKENS", "WINDOW_TOKENS", "geometry"]

GLOBAL, PATCH, CAP, SMALL = 728, 504, 3024, 32
GLOBAL_TOKENS, WINDOW_TOKENS = 169 + 2, 81 + 2  # each view's features and its start/end tokens
BOUNDARIES = {"<=": "SGLang's copy (and transformers' Step3p7)", "<": "vLLM's copy"}


def _ints(name: str, values: object) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype.kind not in "iu" or a.size == 0 or int(a.min()) < 1:
        raise ValueError(f"{name} must be positive integers (an int or an integer array), got {values!r:.60}")
    return a.astype(np.int64)


def _snap(side: np.ndarray, window: np.ndarray) -> np.ndarray:
    """A side at least a window long snapped to a multiple of it (``get_image_size_for_crop``); others kept."""
    safe = np.maximum(window, 1)
    ratio = side / safe
    whole = side // safe
    k = np.where(ratio - whole > 0.2, whole + 1, whole)
    return np.where((window > 0) & (ratio >= 1), safe * k, side)


def geometry(width: object, height: object, boundary: str = "<=") -> dict[str, np.ndarray]:
    """For arrays (or ints) ``width`` x ``height``: the capped size (``width``, ``height``), the ``window`` side
    (0: none), the snapped crop size (``crop_width``, ``crop_height``), the window grid (``cols``, ``rows``, both 0
    without windows), the row breaks and the image's prompt ``tokens``. ``boundary``: ``"<="`` or ``"<"``."""
    if boundary not in BOUNDARIES:
        raise ValueError(
            f"boundary must be one of {sorted(BOUNDARIES)} ({'; '.join(BOUNDARIES.values())}), got {boundary!r}"
        )
    w, h = np.broadcast_arrays(_ints("width", width), _ints("height", height))
    ratio = w / h
    square = (np.minimum(w, h) < SMALL) & ((ratio > 4) | (ratio < 1 / 4))
    side = np.maximum(w, h)
    w, h = np.where(square, side, w), np.where(square, side, h)
    long = np.maximum(w, h)
    scale = CAP / long
    capped = long > CAP
    w = np.where(capped, (w * scale).astype(np.int64), w)
    h = np.where(capped, (h * scale).astype(np.int64), h)
    long, short = np.maximum(w, h), np.minimum(w, h)
    aspect = long / short
    inside = long <= GLOBAL if boundary == "<=" else long < GLOBAL
    window = np.where(
        inside,
        np.where(aspect > 1.5, short, 0),
        np.where(aspect > 4, np.minimum(short, PATCH), PATCH),
    ).astype(np.int64)
    crop_w, crop_h = _snap(w, window), _snap(h, window)
    has = window > 0
    safe = np.maximum(window, 1)
    cols = np.where(has, np.where(crop_w <= safe, 1, np.ceil((crop_w - safe) / safe + 1)), 0).astype(np.int64)
    rows = np.where(has, np.where(crop_h <= safe, 1, np.ceil((crop_h - safe) / safe + 1)), 0).astype(np.int64)
    breaks = np.where(has, rows - 1, 0)
    tokens = cols * rows * WINDOW_TOKENS + GLOBAL_TOKENS + breaks
    return {
        "width": w,
        "height": h,
        "window": window,
        "crop_width": np.where(has, crop_w, 0),
        "crop_height": np.where(has, crop_h, 0),
        "cols": cols,
        "rows": rows,
        "breaks": breaks,
        "tokens": tokens,
    }
