"""What the vLLM tests run in a child process (a process holds one vLLM tree, with or without companions):
``python -m tests.impl.vllm.child SCENARIO SPEC``, printing one ``JSON:`` line (`support.child` reads it).

Scenarios:

* ``kimi SPEC``: the Kimi-K3 paths loaded the default report's way (no companions): labels, timings, the
  transformers records, one served image per path.
* ``families SPEC``: every family's paths (`impl.vllm.served.paths`, companions loaded): labels, a few
  geometries, one served image per path, the companions and what was stood in for them; ``n/a`` lines.
* ``offline SPEC``: a load with companions under ``DEFERLAB_OFFLINE=1`` (the test points ``DEFERLAB_CACHE`` at a
  cache without them): the one-line refusal.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import time
from typing import Any

SIZES = {"qwen2.5-vl": [(640, 480), (90, 60), (28, 28)], "qwen3-vl": [(640, 480), (90, 60), (28, 28)]}
SIZES["internvl"] = [(448, 448), (896, 448), (1344, 448)]


def _kimi(spec: str) -> dict[str, Any]:
    from deferlab.impl.vllm.served import paths
    from deferlab.reference.system.profiles import profile
    from tests.impl.vllm.support import rgb

    installed = importlib.util.find_spec("transformers") is not None  # before anything is loaded
    t0 = time.perf_counter()
    found = paths(spec, "kimi-k3")
    out: dict[str, Any] = {"load_seconds": round(time.perf_counter() - t0, 2), "paths": [], "installed": installed}
    for path in found:
        t0 = time.perf_counter()
        values, grids = path.serve([rgb(50, 30)], profile("kimi-k3"))
        out["paths"].append(
            {
                "label": path.label,
                "path": path.path,
                "dtype": path.dtype,
                "serve_seconds": round(time.perf_counter() - t0, 3),
                "shape": list(values.shape),
                "grids": grids.tolist(),
            }
        )
    source = found[0].source
    out["transformers"] = [r.as_dict() for r in source.stand_ins if r.module.split(".")[0] == "transformers"]
    out["companions"] = sorted(source.companions)
    return out


def _families(spec: str) -> dict[str, Any]:
    from deferlab.impl.vllm import sources
    from deferlab.impl.vllm.family import NotCovered
    from deferlab.impl.vllm.served import FAMILIES, paths
    from tests.impl.vllm.support import CONFIGS, rgb

    t0 = time.perf_counter()
    source = sources.load(spec, companions=("transformers", "torchvision"))
    out: dict[str, Any] = {"load_seconds": round(time.perf_counter() - t0, 2), "families": {}}
    for family in FAMILIES:
        if family == "kimi-k3":
            continue
        cfg = CONFIGS[family]
        try:
            found = paths(source, family)
        except NotCovered as e:
            out["families"][family] = str(e)
            continue
        rows = []
        for path in found:
            row: dict[str, Any] = {"label": path.label, "path": path.path, "dtype": path.dtype}
            row["levels"] = path.levels(cfg).tolist()
            if family in SIZES:
                row["geometry"] = [dataclasses.astuple(path.geometry(w, h, cfg)) for w, h in SIZES[family]]
                t0 = time.perf_counter()
                values, grids = path.serve([rgb(896, 448) if family == "internvl" else rgb(90, 60)], cfg)
                row.update(serve_seconds=round(time.perf_counter() - t0, 3), shape=list(values.shape))
                row["grids"] = grids.tolist()
            rows.append(row)
        out["families"][family] = rows
    out["companions"] = {name: c.describe() for name, c in source.companions.items()}
    out["stand_ins"] = [
        r.as_dict() for r in source.stand_ins if r.kind in ("companion", "declared", "missing", "failed")
    ]
    return out


def _offline(spec: str) -> dict[str, Any]:
    from deferlab.impl.vllm import sources

    try:
        sources.load(spec, companions=("transformers", "torchvision"))
    except sources.VLLMSourceError as e:
        return {"error": str(e), "type": type(e).__name__}
    return {"error": None}


def main(argv: list[str]) -> int:
    scenario, spec = argv
    run = {"kimi": _kimi, "families": _families, "offline": _offline}[scenario]
    print("JSON:" + json.dumps(run(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
