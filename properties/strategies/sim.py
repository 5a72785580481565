"""Hypothesis strategies for the simulator's tests: topologies and small hand-sized workloads.

Pixel-free, so sizes go up to 8000 px; request and image counts stay small
so each example runs in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from deferlab.sim.topology import Topology
from deferlab.sim.workload import Workload


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def topologies(draw: st.DrawFn, *, transports: tuple[str, ...] = ("cpu",), epd: bool = False) -> Topology:
    """Valid colocated (or EPD) topologies with tp_size <= 8. Shrinks towards TP 1 on one node."""
    tp = draw(st.sampled_from([1, 2, 4, 8, 3, 6]))
    dp = draw(st.sampled_from(_divisors(tp)))
    transport = draw(st.sampled_from(transports))
    nodes = 1 if transport == "cuda_ipc" else draw(st.sampled_from(_divisors(tp)))
    encoders = draw(st.integers(1, 4)) if epd else 0
    return Topology(
        tp_size=tp,
        attn_dp_size=dp,
        vision_dp=draw(st.booleans()),
        epd_encoders=encoders,
        nodes=nodes,
        transport=transport,
    )


images = st.tuples(st.integers(1, 8000), st.integers(1, 8000), st.sampled_from([3, 4]))


@st.composite
def workloads(draw: st.DrawFn, *, max_requests: int = 6, max_images: int = 5, min_images: int = 0) -> Workload:
    """Hand-sized workloads: up to ``max_requests`` requests of ``min_images``..``max_images`` images."""
    reqs = draw(st.lists(st.lists(images, min_size=min_images, max_size=max_images), min_size=1, max_size=max_requests))
    return Workload.from_requests(reqs, text_tokens=draw(st.integers(0, 512)))


def cost_profile_file(tmp: Path, body: str, *, drop: str | None = None) -> Path:
    """A complete cost profile referring every constant to gb300-class, except ``body``'s own tables and ``drop``."""
    from deferlab.sim.profile_schema import CONSTANTS

    lines = ["[meta]", 'name = "t"', ""]
    own = {line.split(".", 1)[1].rstrip("]") for line in body.splitlines() if line.startswith("[constants.")}
    for name in CONSTANTS:
        if name not in own and name != drop:
            lines += [f"[constants.{name}]", 'from = "gb300-class"', ""]
    p = tmp / "p.toml"
    p.write_text("\n".join(lines) + "\n" + body)
    return p
