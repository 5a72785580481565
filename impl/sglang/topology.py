"""The parallel state and server arguments SGLang's count code reads, answered for one topology.

Why not a ``types.SimpleNamespace``: different commits read different names
(``get_parallel().tp_size`` at the PR, ``server_args.enable_dp_attention`` in
the VMM pool's count from 3d3194f6c on, ``attn_cp_rank`` in the VMM proxy's
ack range, ...). A namespace missing one raises ``AttributeError`` from
inside SGLang's own frame, which the claim harness would then blame on
SGLang. `Topology` answers every name derivable from one topology and
refuses any other name with `UnansweredRead`, raised from this file: a driver
gap, never SGLang's flaw. ``getattr(x, name, default)`` still falls back to
the default as it would on a namespace, and the miss is recorded in the
process-wide `MISSES` (which `features()` reports). The same class
(`Answers`) stands for the other namespaces the driver hands SGLang's code:
the request object of the request path, the processor around
``server_args`` in the pool's count expression.
"""

from __future__ import annotations

from typing import Any

# Every name SGLang asked a stand-in for that it could not answer, in this process ("role.name"):
# `features()` reports it, and it stays empty on every tree the driver supports.
MISSES: set[str] = set()


class UnansweredRead(AttributeError):
    """SGLang read a name the stand-in cannot derive from the topology (a driver gap: add it here)."""


class Answers:
    """A namespace SGLang reads from (``get_parallel()``, ``ServerArgs``, a request): given names, misses recorded.

    Any other name raises `UnansweredRead` here, in the driver, so a missing answer is never mistaken
    for a failure of SGLang's own code.
    """

    def __init__(self, role: str, fields: dict[str, Any]) -> None:
        object.__setattr__(self, "_role", role)
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        role = object.__getattribute__(self, "_role")
        MISSES.add(f"{role}.{name}")
        raise UnansweredRead(
            f"SGLang read {role}.{name}, which deferlab's {role} stand-in does not answer (it answers "
            f"{sorted(fields)}); derive it from the topology in impl/sglang/topology.py"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_fields")[name] = value

    def __repr__(self) -> str:
        fields = object.__getattribute__(self, "_fields")
        return f"Answers({object.__getattribute__(self, '_role')}, {fields})"


Topology = Answers  # the parallel state and server arguments of one topology


def parallel(
    tp_size: int,
    attn_tp_size: int | None = None,
    dp_size: int = 1,
    enable_dp_attention: bool = False,
    tp_rank: int = 0,
) -> Topology:
    """What ``get_parallel()`` answers for this topology: every name SGLang's count, loader and ack code reads.

    Attention DP on: ``dp_size`` groups of ``tp_size // dp_size`` ranks; off: one group of ``tp_size``.
    No attention context parallelism (``attn_cp_rank`` 0: the VMM proxy's group start is
    ``attn_cp_rank * attn_tp_size``).
    """
    attn = attn_tp_size if attn_tp_size is not None else (tp_size // dp_size if enable_dp_attention else tp_size)
    fields = {
        "tp_size": tp_size,
        "attn_tp_size": attn,
        "dp_size": dp_size,
        "attn_dp_size": dp_size if enable_dp_attention else 1,
        "num_dp_ranks": dp_size,
        "attn_dp_enabled": enable_dp_attention,
        "enable_dp_attention": enable_dp_attention,
        "tp_rank": tp_rank,
        "attn_tp_rank": tp_rank % max(attn, 1),
        "attn_cp_rank": 0,
        "attn_cp_size": 1,
    }
    return Topology("get_parallel()", fields)


def server_args(tp_size: int, dp_size: int = 1, enable_dp_attention: bool = False) -> Topology:
    """The topology fields of ``ServerArgs`` (``tp_size``, ``dp_size``, ``enable_dp_attention``) and nothing else."""
    fields = {"tp_size": tp_size, "dp_size": dp_size, "enable_dp_attention": enable_dp_attention}
    return Topology("server_args", fields)
