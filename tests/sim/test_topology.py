"""Topology validation (sim.topology): invalid combinations name their constraint."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deferlab.properties.strategies.sim import topologies
from deferlab.sim.topology import Topology


@given(topo=topologies(transports=("cpu", "fabric")))
def test_groups_partition_the_ranks(topo: Topology) -> None:
    """Attention-DP groups are disjoint, consecutive, and cover every TP rank once."""
    ranks = [r for g in range(topo.attn_dp_size) for r in topo.group_ranks(g)]
    assert ranks == list(range(topo.tp_size))
    assert all(len(topo.group_ranks(g)) == topo.attn_tp_size for g in range(topo.attn_dp_size))


@given(topo=topologies(transports=("cpu", "fabric")), g=st.integers(0, 7))
def test_nodes_reached_counts_distinct_nodes(topo: Topology, g: int) -> None:
    """A group reaches between 1 and ``nodes`` nodes; its remote ranks are those off node 0."""
    g %= topo.attn_dp_size
    reached = topo.nodes_reached(g)
    assert 1 <= reached <= topo.nodes
    assert topo.remote_ranks(g) == sum(1 for r in topo.group_ranks(g) if r >= topo.ranks_per_node)


def test_vision_world() -> None:
    """Vision DP spreads over the attention-TP group, or the encoders under EPD; off means one world."""
    assert Topology(tp_size=8, attn_dp_size=2).vision_world == 4
    assert Topology(tp_size=8, epd_encoders=3).vision_world == 3
    assert Topology(tp_size=8, vision_dp=False).vision_world == 1
