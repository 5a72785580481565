"""Where the sweeps get the deferral decision from: the oracle's `reference.oracle.gate`, else a local stand-in.

The sweeps must judge the system by the oracle's own vectorized gate
(``reference.oracle.gate.decide_arrays``). While that module is being written, a
private fallback computes the same semantics §4 byte rule from
``reference.oracle.navit.resize_config_arrays`` so the report still runs; the report
says which one it used (`decision_source`). Sweeps call `decide_arrays`
through this module's attribute so a test can swap the rule (e.g. ``<``
instead of ``<=``) and watch the regression gate catch it.
"""

from __future__ import annotations

import numpy as np

from deferlab.reference.oracle.navit import resize_config_arrays
from deferlab.reference.system.config import PreprocessConfig

PROCESSED_CHANNELS = 3  # the FP32 patch tensor is always RGB
FP32_BYTES = 4


def _fallback_decide_arrays(
    widths: np.ndarray, heights: np.ndarray, channels: np.ndarray | int, config: PreprocessConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FALLBACK until reference.oracle.gate lands: semantics §4 per image, raw = C*W*H, processed = 3*Pw*Ph*4, defer iff raw <= processed."""
    w = np.asarray(widths, dtype=np.int64)
    h = np.asarray(heights, dtype=np.int64)
    c = np.asarray(channels, dtype=np.int64)
    r = resize_config_arrays(w, h, config)
    raw = c * w * h
    processed = PROCESSED_CHANNELS * FP32_BYTES * r.padded_width * r.padded_height
    raw, processed = np.broadcast_arrays(raw, processed)
    return raw.astype(np.int64), processed.astype(np.int64), raw <= processed


def decision_source() -> str:
    """Name of the decision function the sweeps use right now (reported in report.json)."""
    try:
        from deferlab.reference.oracle.gate import decide_arrays as _  # noqa: F401
    except Exception:
        return "reports.gate_source fallback (reference.oracle.gate.decide_arrays missing)"
    return "deferlab.reference.oracle.gate.decide_arrays"


def decide_arrays(
    widths: np.ndarray, heights: np.ndarray, channels: np.ndarray | int, config: PreprocessConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(raw int64, processed int64, defer bool) per image, broadcast over the inputs."""
    try:
        from deferlab.reference.oracle.gate import decide_arrays as oracle
    except Exception:
        oracle = _fallback_decide_arrays
    w, h, c = np.broadcast_arrays(
        np.asarray(widths, dtype=np.int64), np.asarray(heights, dtype=np.int64), np.asarray(channels, dtype=np.int64)
    )
    raw, processed, defer = oracle(w, h, c, config)
    return np.asarray(raw, dtype=np.int64), np.asarray(processed, dtype=np.int64), np.asarray(defer, dtype=bool)
