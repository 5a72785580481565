"""The GPU feature pool's acknowledgement bookkeeping, and claim C9 over it (semantics §8).

`pool` models the two pools (generation words, counters); `machine` drives
them with a Hypothesis state machine fed by any count source; `claim` turns
that into C9's verdicts per policy or real source. ``sim.ipc.verdicts`` is
the entry point.
"""

from deferlab.sim.ipc.claim import verdicts

__all__ = ["verdicts"]
