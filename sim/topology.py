"""Serving topology: which GPUs a request's images reach and where the copies cross nodes.

Ranks are numbered by global TP rank 0..tp_size-1. With attention DP of size D
the TP world is split into D groups of ``tp_size // D`` consecutive ranks
(attention-TP groups); a request is routed to one group, every rank of that
group receives every item under CPU transport (semantics §15.2), and with vision DP
the images are spread over the group's ranks (semantics §7). Ranks are spread over
``nodes`` evenly and in order, so a group may straddle a node boundary; the
producer (tokenizer) sits on node 0. With EPD the vision work moves to
``epd_encoders`` encoder ranks (their own attention-TP group, semantics §7 /
§15.3), and the encoder forces CPU transport.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from deferlab.reference.system.errors import InputTypeError, ScenarioError
from deferlab.reference.system.validate import check_int
from deferlab.sim.tables import dataclass_from_table

TRANSPORTS = ("cpu", "cuda_ipc", "fabric")


def _int_at_least(name: str, value: Any, low: int) -> int:
    return check_int(f"topology.{name}", value, minimum=low)


@dataclass(frozen=True)
class Topology:
    """A colocated or EPD deployment, validated on construction."""

    tp_size: int = 8
    attn_dp_size: int = 1
    vision_dp: bool = True
    epd_encoders: int = 0
    nodes: int = 1
    transport: str = "cpu"

    def __post_init__(self) -> None:
        _int_at_least("tp_size", self.tp_size, 1)
        _int_at_least("attn_dp_size", self.attn_dp_size, 1)
        _int_at_least("epd_encoders", self.epd_encoders, 0)
        _int_at_least("nodes", self.nodes, 1)
        if not isinstance(self.vision_dp, bool):
            raise InputTypeError(f"topology.vision_dp must be a bool, got {self.vision_dp!r}")
        if self.transport not in TRANSPORTS:
            raise ScenarioError(f"topology.transport must be one of {TRANSPORTS}, got {self.transport!r}")
        if self.tp_size % self.attn_dp_size:
            raise ScenarioError(
                f"topology: attn_dp_size={self.attn_dp_size} must divide tp_size={self.tp_size} "
                "(attention-TP groups are tp_size // attn_dp_size ranks each)"
            )
        if self.tp_size % self.nodes:
            raise ScenarioError(
                f"topology: nodes={self.nodes} must divide tp_size={self.tp_size} (ranks are spread evenly over nodes)"
            )
        if self.transport == "cuda_ipc" and self.nodes > 1:
            raise ScenarioError(
                f"topology: transport='cuda_ipc' cannot cross nodes (nodes={self.nodes}); use 'fabric' or 'cpu'"
            )
        if self.epd_encoders and self.transport != "cpu":
            raise ScenarioError(
                f"topology: EPD encoders (epd_encoders={self.epd_encoders}) force mm_feature_transport to 'cpu' "
                f"(semantics §15.3), got transport={self.transport!r}"
            )

    @property
    def attn_tp_size(self) -> int:
        """Ranks per attention-TP group: the ranks one request reaches."""
        return self.tp_size // self.attn_dp_size

    @property
    def ranks_per_node(self) -> int:
        return self.tp_size // self.nodes

    @property
    def vision_ranks(self) -> int:
        """Ranks that share one request's images: the encoder group under EPD, else the attention-TP group."""
        return self.epd_encoders if self.epd_encoders else self.attn_tp_size

    @property
    def vision_world(self) -> int:
        """Owner-assignment world size: 1 (every rank does everything) without vision DP."""
        return self.vision_ranks if self.vision_dp else 1

    def group_ranks(self, group: int) -> range:
        """Global TP ranks of attention-DP group ``group``."""
        if not 0 <= group < self.attn_dp_size:
            raise ScenarioError(f"group must be in 0..{self.attn_dp_size - 1}, got {group}")
        g = self.attn_tp_size
        return range(group * g, (group + 1) * g)

    def node_of(self, rank: int) -> int:
        return rank // self.ranks_per_node

    def nodes_reached(self, group: int) -> int:
        """Distinct nodes the ranks of ``group`` sit on."""
        return len({self.node_of(r) for r in self.group_ranks(group)})

    def remote_ranks(self, group: int) -> int:
        """Ranks of ``group`` off the producer's node (node 0): their copies cross a node boundary."""
        return sum(1 for r in self.group_ranks(group) if self.node_of(r) != 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "topology") -> Topology:
        """Build from a scenario's ``[topology]`` table; unknown keys are an error naming them."""
        return dataclass_from_table(cls, d, where)
