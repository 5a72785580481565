"""transformers 5.24.0's torchvision-backend Qwen2-VL processor (`impl.transformers_tv`) against the trained
side, in a process of its own (one transformers per process, torchvision importable before its image backends):
``python -m tests.impl.transformers_tv_child SCENARIO ARG``, printing one ``JSON:`` line.

Scenarios:

* ``measure FAMILY``: C13 on the worked, boundary and drawn sizes; C15's table counts; C14 on every image class
  at 12x10, drawn small sizes and the family's shrinking sizes, with how many values differ and by how many
  levels, in C14's terms (`properties.families.compare`: a value is explained when its level, recovered through
  each side's own table, is at most 1 off and the value within 2 ulps of the trained normalization of the served
  level). ``{"refused": line}`` when the row cannot run here.
* ``late -``: transformers' image backends imported before the row is built: the one-line refusal.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

SIDES = 4096
# Sizes (width, height) where Pillow and torch both shrink a side; "vertical": Pillow 13 resamples height first
# (h_in - h_out > 0 and > 2 * (w_in - w_out), semantics §13.4), torch always width first.
SHRINKING = {
    "qwen2.5-vl": {"horizontal": [(90, 60)], "vertical": [(60, 70)]},  # -> 84x56; 56x56
    "qwen3-vl": {"horizontal": [(300, 270)], "vertical": [(262, 335)]},  # -> 288x256; 256x320
}
WORKED = [(90, 60), (1, 1), (42, 70), (70, 42), (3584, 3626), (200, 1), (201, 1), (56, 56), (4096, 4096), (28, 5600)]


def geometry_sizes(factor: int, seed: int = 1813) -> list[tuple[int, int]]:
    """The worked sizes of semantics §18.2, sides around multiples of the factor and their halves, the 200
    ratio edge, and 300 drawn sizes up to 4096 (a third long and thin)."""
    sides = sorted(
        {k * factor + d for k in range(6) for d in (-1, 0, 1, factor // 2 - 1, factor // 2, factor // 2 + 1)}
    )
    sizes = set(WORKED) | {(w, h) for w in sides if w > 0 for h in sides if h > 0}
    sizes |= {(20, 4000), (20, 4001), (4000, 20), (4001, 20)}
    rng = np.random.default_rng(seed)
    for i in range(300):
        a, b = int(rng.integers(1, SIDES + 1)), int(rng.integers(1, 25 if i % 3 == 0 else SIDES + 1))
        sizes.add((a, b) if i % 2 else (b, a))
    return sorted(sizes)


def pixel_cases(family: str, seed: int = 1814, drawn: int = 24) -> list[tuple[str, str, int, int, int]]:
    """(group, image class, width, height, seed): every class at 12x10 (C14's pinned cases), ``drawn`` drawn
    classes and sizes up to 40x40, and RGB noise at the family's shrinking sizes."""
    from deferlab.reference.system.served import IMAGE_CLASSES

    cases = [("12x10", cls, 12, 10, 0) for cls in IMAGE_CLASSES]
    rng = np.random.default_rng(seed)
    for _ in range(drawn):
        cls = IMAGE_CLASSES[int(rng.integers(len(IMAGE_CLASSES)))]
        cases.append(("drawn", cls, int(rng.integers(1, 41)), int(rng.integers(1, 41)), int(rng.integers(2**16))))
    for order, sizes in SHRINKING[family].items():
        cases += [(f"shrink, Pillow {order} first", "RGB", w, h, 7) for w, h in sizes]
    return cases


def _levels(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    from deferlab.reference.oracle import skew

    return skew.recover_levels(values.transpose(1, 0, 2), table).transpose(1, 0, 2)


def compare_case(path: Any, trained: Any, image: Any, cfg: Any) -> dict[str, Any]:
    """One image through both sides: grids, then C14's report and the histogram of level offsets."""
    from deferlab.properties import families as fam
    from deferlab.reference.oracle.numerics import float32_bits

    want, want_grid = trained.serve([image], cfg)
    got, grid = path.serve([image], cfg)
    if grid.tolist() != want_grid.tolist() or got.shape != want.shape:
        return {"grid": grid.tolist(), "want_grid": want_grid.tolist(), "same_grid": False}
    table, want_table = path.levels(cfg), trained.levels(cfg)
    report = fam.compare(got, table, want, want_table, path.dtype)
    off = np.abs(_levels(got, table).astype(np.int16) - _levels(want, want_table).astype(np.int16))
    same_level_differ = (off == 0) & (float32_bits(got) != float32_bits(want))
    return {
        "same_grid": True,
        "grid": grid.tolist(),
        "total": report.total,
        "differ": report.differing,
        "level_differ": int((off > 0).sum()),
        "normalization_only": int(same_level_differ.sum()),
        "unexplained": report.unexplained,
        "max_levels": report.max_levels,
        "offsets": {str(k): int(v) for k, v in zip(*np.unique(off[off > 0], return_counts=True), strict=True)},
    }


def measure(family: str) -> dict[str, Any]:
    from deferlab.impl.transformers_tv import TorchvisionBackendPath, Unavailable

    t0 = time.perf_counter()
    try:
        path = TorchvisionBackendPath(family)
    except Unavailable as e:
        return {"refused": str(e)}
    from deferlab.properties import families as fam
    from deferlab.properties.strategies import served as ss

    cfg, trained = fam.config(family), fam.Trained(family)
    out: dict[str, Any] = {"name": path.name, "system": path.system, "provenance": path.provenance()}
    out["load_seconds"] = round(time.perf_counter() - t0, 2)
    sizes = geometry_sizes(cfg.factor)
    bad = [(w, h, p) for w, h in sizes if (p := fam.geometry_problem(path, w, h, cfg, trained))]
    out["geometry"] = {"sizes": len(sizes), "differ": len(bad), "first": bad[:3]}
    fp32, bf16 = fam.levels_differ(path.levels(cfg), trained.levels(cfg))
    out["levels"] = {"fp32": fp32, "bf16": bf16, "of": 3 * 256}
    groups: dict[str, dict[str, Any]] = {}
    for group, cls, w, h, seed in pixel_cases(family):
        r = compare_case(path, trained, ss.make_image(cls, w, h, seed), cfg)
        g = groups.setdefault(group, {"cases": 0, "grid_differ": 0, "offsets": Counter(), "per_class": {}})
        g["cases"] += 1
        if not r["same_grid"]:
            g["grid_differ"] += 1
            continue
        for k in ("total", "differ", "level_differ", "normalization_only", "unexplained"):
            g[k] = g.get(k, 0) + r[k]
        g["max_levels"] = max(g.get("max_levels", 0), r["max_levels"])
        g["offsets"].update(r["offsets"])
        c = g["per_class"].setdefault(cls, {"max_levels": 0, "unexplained": 0})
        c["max_levels"] = max(c["max_levels"], r["max_levels"])
        c["unexplained"] += r["unexplained"]
    for g in groups.values():
        g["offsets"] = dict(sorted(g["offsets"].items(), key=lambda kv: int(kv[0])))
    out["pixels"] = groups
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def late() -> dict[str, Any]:
    import transformers.image_processing_backends  # noqa: F401 - before torchvision is importable

    from deferlab.impl.transformers_tv import TorchvisionBackendPath, Unavailable

    try:
        TorchvisionBackendPath("qwen2.5-vl")
    except Unavailable as e:
        return {"refused": str(e)}
    return {"refused": None}


def main(argv: list[str]) -> None:
    scenario, arg = argv[1], argv[2]
    result = measure(arg) if scenario == "measure" else late()
    print("JSON:" + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv)
