"""C13's served side of an SGLang family with a geometry of its own (ERNIE-4.5-VL, MiMo-V2.5; semantics §18.9),
run in one child per family, and the checks every such family's test makes of it.

Why shared: both families' geometry tests load SGLang with its companions, read the path's geometry and C13's
verdict at the sizes §18.9 works by hand, and run the exhaustive sweep; only the worked sizes, the family's own
extra reads (``extra``: Python run in the child after the path is built, adding keys to ``out``) and the numbers
estimated before the code ran differ, and those stay in each family's test (`worked_tests` gives each the fixture
and the worked-size test it would otherwise write again).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.impl.sglang.support import default_spec, run_child

CHILD = """
import json, sys
import numpy as np
from deferlab.impl import compiled
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam, family_geometry
from tests.impl.sglang.support import JSON_MARK

name = sys.argv[2]
source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config(name), fam.Trained(name)
path = family_path(source, name, dtype="float32")
out = {{"sizes": {{}}, "provenance": path.provenance()}}
for w, h in json.loads(sys.argv[3]):
    g = path.geometry(w, h, cfg)
    out["sizes"][f"{{w}}x{{h}}"] = [[g.width, g.height], list(g.grid), g.tokens, fam.geometry_problem(path, w, h, cfg, want)]
{extra}
ex = family_geometry.exhaustive("sglang", [path], cfg)
s = ex.sweep
out["sweep"] = [s.route, s.sizes, s.mismatches, list(s.first or ()), s.engine, s.oracle, s.seconds, ex.spot]
print(JSON_MARK + json.dumps(out))
"""


def served(family: str, worked: dict[tuple[int, int], Any], extra: str = "") -> dict[str, Any]:
    """The child's findings for ``family`` on the default release at the ``worked`` (width, height) sizes."""
    spec = default_spec()
    code = CHILD.format(extra=extra)
    return run_child(code, spec, family, json.dumps(list(worked)), spec=spec, timeout=900)


def check_worked(served: dict[str, Any], size: tuple[int, int], expected: tuple[tuple[int, int], bool]) -> None:
    """The path serves ``size`` at the expected (width, height), with its grid and tokens, and C13 finds a
    difference exactly where §18.9 says the checkpoint's differs."""
    (width, height), differs = expected
    found, grid, tokens, problem = served["sizes"][f"{size[0]}x{size[1]}"]
    assert found == [width, height] and grid == [1, height // 14, width // 14] and tokens == width * height // 784
    assert (problem is not None) == differs, problem


def check_sweep(
    served: dict[str, Any], mismatches: int, first: list[int], engine: list[int], oracle: list[int]
) -> None:
    """The exhaustive sweep ran compiled over every size to 4096 x 4096 within 60 s and found what §18.9
    estimated before the code ran: ``mismatches`` sizes, the first ``first`` (served ``engine``, checkpoint
    ``oracle``), no spot-check disagreement."""
    route, sizes, found, at, got, want, seconds, spot = served["sweep"]
    assert (route, sizes, found, at) == ("compiled", 4096 * 4096, mismatches, first)
    assert (got, want, spot) == (engine, oracle, [])
    assert seconds < 60


def worked_tests(
    family: str, worked: dict[tuple[int, int], Any], extra: str = ""
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The module fixture ``served`` (`served` of these arguments) and the test of the path's geometry at each
    ``worked`` size (`check_worked`), for a family's test module to bind to its own names, under which pytest
    collects them."""

    @pytest.fixture(scope="module", name="served")
    def fixture() -> dict[str, Any]:
        return served(family, worked, extra)

    @pytest.mark.extra("transformers")
    @pytest.mark.parametrize(("size", "expected"), list(worked.items()), ids=[f"{w}x{h}" for w, h in worked])
    def at_worked_sizes(served: dict[str, Any], size: tuple[int, int], expected: tuple[tuple[int, int], bool]) -> None:
        check_worked(served, size, expected)

    return fixture, at_worked_sizes
