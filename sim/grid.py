"""Does deferral help *my* topology? Capacity gain over TP size x image size, per cost profile and host shape.

For each TP size (1, 2, 4, 8) and image size (4 RGB images per request), on
hosts of 8 GPUs and of 4 GPUs (a GB300 NVL72 tray: TP 8 then spans two nodes,
and SGLang pickles the features instead of using shared memory): each path's
capacity (throughput at unlimited concurrency), the gain, and the P90 TTFT
change at half the eager path's capacity (a load both paths carry).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from deferlab.reference.system.policies import PR_33921, Policy
from deferlab.reference.system.profiles import profile
from deferlab.sim.costmodel import load_cost_model, shipped_profiles
from deferlab.sim.latency import capacity, compare_modes
from deferlab.sim.topology import Topology
from deferlab.sim.workload import WorkloadSpec, generate

TP_SIZES = (1, 2, 4, 8)
IMAGE_SIZES = ((512, 512), (1024, 768), (1536, 1024), (3072, 2048))
GPUS_PER_NODE = (8, 4)


def grid(
    profiles: list[str] | None = None,
    *,
    tp_sizes: tuple[int, ...] = TP_SIZES,
    image_sizes: tuple[tuple[int, int], ...] = IMAGE_SIZES,
    gpus_per_node: tuple[int, ...] = GPUS_PER_NODE,
    n_requests: int = 200,
    policy: Policy = PR_33921,
    seed: int = 0,
) -> dict[str, Any]:
    """Rows of (profile, GPUs per node, TP, image size) -> capacities, gain and P90 change at half load."""
    cfg = profile("kimi-k3")
    rows = []
    for name in profiles or shipped_profiles():
        cm = load_cost_model(name)
        kw = {"decode_on_gpu": cm.decode_on_gpu}
        for per_node in gpus_per_node:
            for tp in tp_sizes:
                topo = Topology(tp_size=tp, nodes=max(1, tp // per_node))
                for w, h in image_sizes:
                    spec = WorkloadSpec(
                        family="fixed", image_size=(w, h), images_per_request=4, n_requests=n_requests, seed=seed
                    )
                    caps = capacity(spec, topo, policy, cfg, cm, **kw)
                    half = replace(spec, arrival="poisson", rate=0.5 * caps["eager"])
                    res = compare_modes(generate(half), topo, policy, cfg, cm, **kw)
                    rows.append(
                        {
                            "profile": name,
                            "gpus_per_node": per_node,
                            "tp_size": tp,
                            "nodes": topo.nodes,
                            "width": w,
                            "height": h,
                            "eager_rps": caps["eager"],
                            "deferred_rps": caps["deferred"],
                            "gain_pct": 100.0 * (caps["deferred"] / caps["eager"] - 1.0),
                            "p90_change_pct_half_load": res["change_pct"]["ttft_p90_s"],
                        }
                    )
    return {
        "tp_sizes": list(tp_sizes),
        "image_sizes": [list(s) for s in image_sizes],
        "gpus_per_node": list(gpus_per_node),
        "workload": "4 RGB images per request of one size, 256 text tokens, policy " + policy.name,
        "rows": rows,
    }
