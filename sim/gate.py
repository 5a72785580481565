"""Deferral decisions over a whole workload (SPEC 4), per request or per image.

The byte counts come from ``reference.gate.decide_arrays`` (the oracle's
vectorized gate). Until that module exists in a checkout, `_decide_arrays`
falls back to SPEC 4's two byte formulas on `reference.navit`'s vectorized
resize config, which is the same definition; `GATE_SOURCE` says which ran.
The request-level rule sums the bytes over a request's images and defers all
or none (the PR); ``per-image`` is the 3d3194f6c+ rule.
"""

from __future__ import annotations

import numpy as np

from reference.config import PreprocessConfig
from reference.navit import resize_config_arrays

GATE_MODES = ("pr", "per-image", "always", "never")

try:  # pragma: no cover - depends on which engineer's work is checked out
    from reference.gate import decide_arrays as _ref_decide_arrays

    GATE_SOURCE = "reference.gate.decide_arrays"
except ImportError:  # pragma: no cover
    _ref_decide_arrays = None
    GATE_SOURCE = "sim.gate fallback (SPEC 4 formulas on reference.navit.resize_config_arrays)"


def _decide_arrays(
    widths: np.ndarray, heights: np.ndarray, channels: np.ndarray, config: PreprocessConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if _ref_decide_arrays is not None:
        raw, processed, defer = _ref_decide_arrays(widths, heights, channels, config)
        return np.asarray(raw, np.int64), np.asarray(processed, np.int64), np.asarray(defer, bool)
    rc = resize_config_arrays(widths, heights, config)
    raw = np.asarray(channels, np.int64) * widths * heights
    processed = 3 * rc.padded_width * rc.padded_height * 4
    return raw, processed, raw <= processed


def decide(
    widths: np.ndarray,
    heights: np.ndarray,
    channels: np.ndarray,
    offsets: np.ndarray,
    config: PreprocessConfig,
    mode: str = "pr",
) -> np.ndarray:
    """Per image: is it shipped deferred (raw uint8)? ``offsets`` delimit requests.

    ``pr`` compares the request's summed raw bytes with its summed processed
    bytes (ties defer, SPEC 4); ``per-image`` decides each image alone.
    Transport and policy conditions (non-``cpu`` transport never defers) are
    the caller's, so this stays a pure function of geometry.
    """
    if mode not in GATE_MODES:
        raise ValueError(f"gate mode must be one of {GATE_MODES}, got {mode!r}")
    n = len(widths)
    if mode == "always":
        return np.ones(n, bool)
    if mode == "never" or n == 0:
        return np.zeros(n, bool)
    raw, processed, defer = _decide_arrays(widths, heights, channels, config)
    if mode == "per-image":
        return defer
    counts = np.diff(offsets)
    nonempty = counts > 0
    starts = offsets[:-1][nonempty]
    req_raw = np.add.reduceat(raw, starts)
    req_proc = np.add.reduceat(processed, starts)
    return np.repeat(req_raw <= req_proc, counts[nonempty])
