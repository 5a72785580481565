"""Deferral decisions over a whole workload (semantics §4), at one call site for every request.

Why here: the simulator decides for 100k-image workloads at once, so it needs
the gate over flat arrays delimited by request offsets; the rule itself is
the oracle's (``reference.oracle.gate``: per-image bytes from ``decide_arrays``,
the comparison ``defers``), not a copy. The call sites are the policies'
(``reference.system.policies``, ``gate_paths``): ``request`` sums a request's
images and defers all or none (the PR), ``artifact`` decides each image alone
(3d3194f6c+); ``always`` / ``never`` force the answer.
"""

from __future__ import annotations

import numpy as np

from deferlab.reference.oracle.gate import decide_arrays, defers
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.policies import Policy

GATE_MODES = ("request", "artifact", "always", "never")
GATE_SOURCE = f"{decide_arrays.__module__}.{decide_arrays.__qualname__}"


def decide(
    widths: np.ndarray,
    heights: np.ndarray,
    channels: np.ndarray,
    offsets: np.ndarray,
    config: PreprocessConfig,
    mode: str = "request",
) -> np.ndarray:
    """Per image: is it shipped deferred (raw uint8)? ``offsets`` delimit requests.

    ``request`` compares the request's summed raw bytes with its summed
    processed bytes (ties defer, semantics §4); ``artifact`` decides each image
    alone. Transport and policy conditions (non-``cpu`` transport never defers)
    are the caller's, so this stays a pure function of geometry.
    """
    if mode not in GATE_MODES:
        raise ValueError(f"gate mode must be one of {GATE_MODES}, got {mode!r}")
    n = len(widths)
    if mode == "always":
        return np.ones(n, bool)
    if mode == "never" or n == 0:
        return np.zeros(n, bool)
    raw, processed, defer = decide_arrays(widths, heights, channels, config)
    if mode == "artifact":
        return np.asarray(defer, bool)
    counts = np.diff(offsets)
    nonempty = counts > 0
    starts = offsets[:-1][nonempty]
    req_raw = np.add.reduceat(np.asarray(raw, np.int64), starts)
    req_proc = np.add.reduceat(np.asarray(processed, np.int64), starts)
    return np.repeat(defers(req_raw, req_proc), counts[nonempty])


def default_mode(policy: Policy) -> str:
    """The policy's default call site as a mode: ``artifact`` where it decides per image, else ``request``."""
    return "artifact" if policy.gate_path(None)[1] else "request"
