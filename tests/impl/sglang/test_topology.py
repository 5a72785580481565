"""`impl.sglang.topology`: what SGLang's parallel-state reads are answered with, and a read it lacks is loud."""

from __future__ import annotations

import pytest

from deferlab.impl.sglang import topology


def test_attention_dp_splits_the_group():
    on = topology.parallel(8, dp_size=2, enable_dp_attention=True, tp_rank=5)
    assert (on.attn_tp_size, on.attn_dp_size, on.attn_tp_rank) == (4, 2, 1)
    off = topology.parallel(8, dp_size=2)
    assert (off.attn_tp_size, off.attn_dp_size) == (8, 1)
    args = topology.server_args(8, 2, True)
    assert (args.tp_size, args.dp_size, args.enable_dp_attention) == (8, 2, True)


def test_an_unanswered_read_raises_and_is_remembered():
    with pytest.raises(topology.UnansweredRead, match="server_args.pp_size"):
        _ = topology.server_args(2).pp_size
    assert "server_args.pp_size" in topology.MISSES
    topology.MISSES.discard("server_args.pp_size")
