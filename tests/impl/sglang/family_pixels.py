"""C14's served side of ERNIE-4.5-VL and MiMo-V2.5 on SGLang (semantics §18.9), run in one child per family.

Why shared: both paths are read the same way (every image class at C14's pinned 12 x 10 against the trained side,
an image neither side resizes against the path's own level table laid out by `reference.oracle.qwen.patchify`, the
grid and tokens against the path's geometry); only the expectations differ, and those stay in each family's test,
but for the checks both make alike (`shared_tests`: each class's verdict, the unresized image and the served grid,
given the failing classes and the patch's values). The paths import transformers and torchvision, so a child loads SGLang with its companions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from deferlab.reference.system.served import IMAGE_CLASSES
from tests.impl.sglang.support import default_spec, run_child

CHILD = """
import json, sys
import numpy as np
from PIL import Image
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from deferlab.properties.strategies import served as ss
from deferlab.reference.oracle import ernie45_vl, qwen
from tests.impl.sglang.support import JSON_MARK

name, temporal, side = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config(name), fam.Trained(name)
path = family_path(source, name, dtype="float32")
out = {"classes": {}, "provenance": path.provenance(), "sizes": {}}
for cls in ss.IMAGE_CLASSES:
    out["classes"][cls] = fam.pixel_problem(path, ss.make_image(cls, 12, 10, 0), cfg, want)
rgb = ss.make_image("RGB", 12, 10, 0)
got, _ = path.serve([rgb], cfg)
theirs, _ = want.serve([rgb], cfg)
report = fam.compare(got, path.levels(cfg), theirs, want.levels(cfg), path.dtype)
out["rgb"] = [report.total, report.differing, report.unexplained, report.max_levels]
levels = np.random.default_rng(7).integers(0, 256, (side, side, 3), dtype=np.uint8)
values, grid = path.serve([Image.fromarray(levels)], cfg)
table = path.levels(cfg)
chw = np.stack([table[c, levels[..., c]] for c in range(3)])
stated = qwen.patchify(chw, ernie45_vl.qwen_config(cfg, temporal))
out["kept"] = [list(values.shape), grid.tolist(), bool((values.reshape(stated.shape) == stated).all())]
for w, h in json.loads(sys.argv[5]):
    values, grids, tokens = path.run([ss.make_image("RGB", w, h, 3)], cfg)
    g = path.geometry(w, h, cfg)
    out["sizes"][f"{w}x{h}"] = [grids.tolist(), tokens, [list(g.grid)], [g.tokens], list(values.shape)]
bf = family_path(source, name, dtype="bfloat16")
v16, _ = bf.serve([rgb], cfg)
out["bf16"] = bool((v16.view(np.uint32) & 0xFFFF == 0).all()) and bool(np.abs(v16 - got).max() < 0.02)
print(JSON_MARK + json.dumps(out))
"""


def served(family: str, temporal: int, side: int, sizes: list[tuple[int, int]]) -> dict[str, Any]:
    """The child's findings for ``family`` on the default release: ``temporal`` is the trained patch layout's
    temporal patch, ``side`` a square size neither side resizes, ``sizes`` (width, height) served beside their
    geometry."""
    spec = default_spec()
    return run_child(CHILD, spec, family, str(temporal), str(side), json.dumps(sizes), spec=spec, timeout=900)


def shared_tests(
    family: str, temporal: int, side: int, sizes: list[tuple[int, int]], values: int, failing: frozenset[str]
) -> tuple[Callable[..., Any], ...]:
    """The module fixture ``served`` (`served` of these arguments), and the checks every family's test makes alike
    with its own numbers: each image class's verdict (the classes in ``failing`` with values unexplained, every
    other one explained), the unresized image as the path's table in the patch layout (16 patches of ``values``,
    grid 1 x 4 x 4), the grid and tokens served at each of ``sizes`` as the path's geometry. A test module binds
    them to its own names, under which pytest collects them."""

    @pytest.fixture(scope="module", name="served")
    def fixture() -> dict[str, Any]:
        return served(family, temporal, side, sizes)

    @pytest.mark.extra("transformers")
    @pytest.mark.parametrize("cls", IMAGE_CLASSES)
    def each_class(served: dict[str, Any], cls: str) -> None:
        problem = served["classes"][cls]
        if cls in failing:
            assert problem is not None and "values unexplained" in problem, problem
        else:
            assert problem is None, problem

    @pytest.mark.extra("transformers")
    def kept(served: dict[str, Any]) -> None:
        shape, grid, equal = served["kept"]
        assert shape == [16, 3, values] and grid == [[1, 4, 4]] and equal

    @pytest.mark.extra("transformers")
    @pytest.mark.parametrize("size", sizes, ids=[f"{w}x{h}" for w, h in sizes])
    def geometry(served: dict[str, Any], size: tuple[int, int]) -> None:
        grids, tokens, want_grids, want_tokens, shape = served["sizes"][f"{size[0]}x{size[1]}"]
        assert grids == want_grids and tokens == want_tokens
        assert shape == [grids[0][1] * grids[0][2], 3, values]

    return fixture, each_class, kept, geometry
