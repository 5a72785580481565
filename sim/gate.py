"""Deferral decisions over a whole workload (SPEC 4), per request or per image.

The per-image byte counts come from the oracle's vectorized gate,
``reference.oracle.gate.decide_arrays`` (raw = C*W*H, processed = 3*Hp*Wp*4). The
request-level rule sums them over a request's images and defers all or none
(the PR); ``per-image`` is the 3d3194f6c+ rule.
"""

from __future__ import annotations

import numpy as np

from deferlab.reference.oracle.gate import decide_arrays
from deferlab.reference.system.config import PreprocessConfig

GATE_MODES = ("pr", "per-image", "always", "never")
GATE_SOURCE = "deferlab.reference.oracle.gate.decide_arrays"


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
    raw, processed, defer = decide_arrays(widths, heights, channels, config)
    raw, processed, defer = np.asarray(raw, np.int64), np.asarray(processed, np.int64), np.asarray(defer, bool)
    if mode == "per-image":
        return defer
    counts = np.diff(offsets)
    nonempty = counts > 0
    starts = offsets[:-1][nonempty]
    req_raw = np.add.reduceat(raw, starts)
    req_proc = np.add.reduceat(processed, starts)
    return np.repeat(req_raw <= req_proc, counts[nonempty])
