"""`impl.sglang.families.glm4v`'s geometry (C13, semantics §18.9): transformers' ``glm4v`` ``smart_resize`` of the
release's pin, called as its image processor's ``resize`` calls it, against the checkpoint's rule
(`reference.oracle.glm4v`, checked against transformers 5.24.0 in ``tests/reference/test_glm4v.py``).

What is checked against what: the arguments the path reads off the processor against the published config (T 2,
factor 28, 12,544..9,633,792); the path's geometry at the sizes §18.9 works by hand, each against the oracle; a
side ratio over 200 after the scale-up refused as the checkpoint refuses it; the exhaustive sweep of the compiled
function against the vectorized oracle: every size to 4096 x 4096 compiled, 0 differing (the expectation written
before the code ran), within 60 s, on 0.5.17 (transformers 5.12.1) and the newest release (5.19.0).
"""

from __future__ import annotations

import json

import pytest

from tests.impl.sglang.support import default_spec, run_child

# (width, height) -> (width, height) served and expected (semantics §18.9, tests/reference/test_glm4v.py)
WORKED = {
    (1, 1): (84, 84),
    (1, 200): (28, 5600),
    (6, 1): (196, 56),
    (112, 112): (112, 112),
    (70, 42): (112, 84),
    (1920, 1080): (1932, 1092),
    (4000, 3000): (2520, 1876),
    (4096, 4096): (2184, 2184),
}

CHILD = """
import json, sys
import numpy as np
from deferlab.impl import compiled as gc
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.families.glm4v import CALL
from deferlab.impl.sglang.sources import load
from deferlab.properties import geometry_sweep as gs
from deferlab.reference.oracle import glm4v
from tests.impl.sglang.support import JSON_MARK

source = load(sys.argv[1], companions=("transformers", "torchvision"))
from deferlab.properties import families as fam
cfg = fam.config("glm-4.1v")
path = family_path(source, "glm-4.1v", dtype="float32")
geo = glm4v.Glm4vGeometry()
module, name, fn, args, then = path.staged_geometry(cfg)
out = {"args": list(args), "then": then is None, "function": f"{module}.{name}", "sizes": {}}
for w, h in json.loads(sys.argv[2]):
    g = path.geometry(w, h, cfg)
    want = glm4v.resize_target(h, w, geo)
    out["sizes"][f"{w}x{h}"] = [[g.width, g.height], list(g.grid), g.tokens, [want[1], want[0]]]
for name_, call in (("refused", lambda: path.geometry(1, 201, cfg)), ("oracle_refused", lambda: glm4v.resize_target(201, 1, geo))):
    try:
        out[name_] = str(call())
    except ValueError as e:
        out[name_] = type(e).__name__

def oracle(ws, hs):
    h, w = glm4v.resize_targets(hs, ws, geo)
    found = np.stack([w, h])
    return np.where(found == 0, gc.REFUSED, found)

s = gs.sweep_function(fn, CALL, args, f"{module}.{name}", oracle, steps=(14, 28))
out["sweep"] = [s.route, s.sizes, s.mismatches, list(s.first or ()), s.seconds]
print(JSON_MARK + json.dumps(out))
"""


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    spec = default_spec() if request.param == "newest" else request.param
    return run_child(CHILD, spec, json.dumps(list(WORKED)), spec=spec, timeout=900)


@pytest.mark.extra("transformers")
def test_the_arguments_are_the_processors_published_values(served):
    assert served["args"] == [2, 28, 12544, 9633792] and served["then"]
    assert served["function"] == "transformers.models.glm4v.image_processing_glm4v.smart_resize"


@pytest.mark.extra("transformers")
@pytest.mark.parametrize(("size", "expected"), list(WORKED.items()), ids=[f"{w}x{h}" for w, h in WORKED])
def test_geometry_at_the_worked_sizes(served, size, expected):
    found, grid, tokens, oracle = served["sizes"][f"{size[0]}x{size[1]}"]
    width, height = expected
    assert found == [width, height] == oracle
    assert grid == [1, height // 14, width // 14] and tokens == width * height // 784


@pytest.mark.extra("transformers")
def test_a_ratio_over_200_after_the_scale_up_is_refused_by_both(served):
    assert served["refused"] == "ValueError" and served["oracle_refused"] == "InputValueError"


@pytest.mark.extra("transformers")
def test_exhaustive_sweep_is_compiled_and_agrees_everywhere(served):
    route, sizes, mismatches, first, seconds = served["sweep"]
    assert (route, sizes, mismatches, first) == ("compiled", 4096 * 4096, 0, [])
    assert seconds < 60
