"""`impl.sglang.counts.IPCCounts`: the producer total, the consumer's request and SGLang's clamp, from its code."""

from __future__ import annotations

import pytest


def test_ipc_counts(sgl):
    counts = sgl.ipc_counts()
    assert counts.producer_total(8) == 8
    assert counts.resolve(8, 8) == 8 and counts.resolve(16, 8) == 8 and counts.resolve(1, 8) == 1
    with pytest.raises(ValueError, match="one consumer or the complete consumer group"):
        counts.resolve(3, 8)
    assert counts.consumer_requested(8, 8) in (1, 8)
    assert {"producer_total[cuda_ipc]", "consumer_requested", "resolve"} <= set(counts.sources)


def test_each_count_names_its_source(sgl):
    counts = sgl.ipc_counts()
    assert counts.pool_kind in ("generation", "counter")
    assert counts.resolve(1, 4) == 1 and counts.producer_total(4) == 4
    assert all(isinstance(v, str) and v for v in counts.sources.values())
