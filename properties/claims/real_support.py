"""What the ``real_code`` properties of the request's, the contract's and the gate's refusals share.

Why a module: `test_real_contract` (the producer, the owner, the EPD encoder, the whitelist) and
`test_real_gate` (the gate's transport, dtype and channel rules) were one file, split by the part of the
system they reach; their inputs are the same (K3's limits, under which small images always defer; Hypothesis
settings for a search whose test takes the ``impl`` fixture; tiny distinct uint8 images), so they are written
once, here.
"""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, settings

from deferlab.reference.system.profiles import profile

K3 = profile("kimi-k3")  # small images always defer under it
SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)


def tiny(h: int, w: int, seed: int = 0) -> torch.Tensor:
    """A uint8 (3, h, w) image whose values depend on ``seed`` and the position (cheap, and each one distinct)."""
    return ((torch.arange(3 * h * w, dtype=torch.int64) * 37 + seed * 11) % 256).to(torch.uint8).reshape(3, h, w)
