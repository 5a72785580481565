"""`impl.sglang.families.minicpm_v46`'s geometry (C13, semantics §18.9): SGLang's own ``MiniCPMV4_6ImageProcessor``
slicing, against the checkpoint's rule (`reference.oracle.minicpm_v`, checked against transformers 5.24.0 in
``tests/reference/test_minicpm_v.py``).

What is checked against what: the path's geometry at the worked sizes against the values §18.9 states and the
oracle; the path's numbers against SGLang's own ``_preprocess_images`` run on an image (its ``tgt_sizes`` and
grid), so the path's reading of the methods is the processor's; the compiled sweep of the three methods against the
vectorized oracle: every size to 4096 x 4096 compiled, 0 differing (the expectation written before the claims
runner ran), within 60 s, on 0.5.17 and the newest release.
"""

from __future__ import annotations

import json

import pytest

from tests.impl.sglang.support import default_spec, run_child

# (width, height) -> (source w x h, (rows, cols, slice w, slice h), tokens), semantics §18.9
WORKED = {
    (1, 1): ((448, 448), (0, 0, 0, 0), 64),
    (449, 448): ((448, 448), (1, 2, 336, 616), 196),
    (1920, 1080): ((616, 336), (2, 4, 448, 448), 578),
    (4096, 1): ((28672, 56), (0, 0, 0, 0), 512),
    (4096, 4096): ((448, 448), (3, 3, 448, 448), 640),
}
SERVED = [(449, 448), (700, 700), (37, 3000)]  # run through _preprocess_images

CHILD = """
import inspect, json, sys
import numpy as np
from PIL import Image
from deferlab.impl.sglang.families import common, family_path
from deferlab.impl.sglang.families.minicpm_v46 import CALL
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam, geometry_sweep as gs
from deferlab.properties.family_geometry import oracle_grid
from deferlab.reference.oracle import minicpm_v
from tests.impl.sglang.support import JSON_MARK

source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg = fam.config("minicpm-v-4.6")
path = family_path(source, "minicpm-v-4.6", dtype="float32")
module, name, fn, args, then = path.staged_geometry(cfg)
out = {"args": [list(a) for a in args], "then": then is None, "function": f"{module}.{name}", "sizes": {}, "served": {}}
for w, h in json.loads(sys.argv[2]):
    g = path.geometry(w, h, cfg)
    out["sizes"][f"{w}x{h}"] = [[g.width, g.height], list(g.grid), g.tokens, minicpm_v.geometry(h, w, cfg)]
proc = path.processor()
extra = (proc.image_processor,) if len(inspect.signature(proc._preprocess_images).parameters) == 2 else ()
for w, h in json.loads(sys.argv[3]):
    with common.cpu_engine(source):
        _, sizes, grids = proc._preprocess_images([Image.new("RGB", (w, h))], *extra)
    g = path.geometry(w, h, cfg)
    out["served"][f"{w}x{h}"] = [[list(s) for s in sizes[0]], list(grids[0]), [g.width, g.height], list(g.grid)]
s = gs.sweep_function(fn, CALL, args, f"{module}.{name}", lambda ws, hs: oracle_grid(cfg, ws, hs), steps=(56, 448))
out["sweep"] = [s.route, s.sizes, s.mismatches, list(s.first or ()), s.seconds]
print(JSON_MARK + json.dumps(out))
"""


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    spec = default_spec() if request.param == "newest" else request.param
    sizes = json.dumps([list(s) for s in WORKED])
    return run_child(CHILD, spec, sizes, json.dumps(SERVED), spec=spec, timeout=900)


@pytest.mark.extra("transformers")
def test_the_driver_reads_the_processors_hard_coded_settings(served):
    assert served["args"] == [[9, 448, 14]] and served["then"]
    assert served["function"].endswith("minicpmv4_6.MiniCPMV4_6ImageProcessor._get_sliced_grid/_find_best_resize/"
                                       "_get_refine_size")  # fmt: skip


@pytest.mark.extra("transformers")
@pytest.mark.parametrize(("size", "expected"), list(WORKED.items()), ids=[f"{w}x{h}" for w, h in WORKED])
def test_geometry_at_the_worked_sizes(served, size, expected):
    source, grid, tokens, oracle = served["sizes"][f"{size[0]}x{size[1]}"]
    assert (tuple(source), tuple(grid), tokens) == expected
    (oh, ow), (rows, cols, ph, pw), otokens = oracle
    assert (tuple(source), tuple(grid), tokens) == ((ow, oh), (rows, cols, pw, ph), otokens)


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("size", SERVED, ids=[f"{w}x{h}" for w, h in SERVED])
def test_the_paths_geometry_is_what_preprocess_serves(served, size):
    sizes, grid, (width, height), (rows, cols, pw, ph) = served["served"][f"{size[0]}x{size[1]}"]
    assert grid == [rows, cols]
    assert sizes == [[height // 14, width // 14]] + [[ph // 14, pw // 14]] * (rows * cols)


@pytest.mark.extra("transformers")
def test_exhaustive_sweep_is_compiled_and_agrees_everywhere(served):
    route, sizes, mismatches, first, seconds = served["sweep"]
    assert (route, sizes, mismatches, first) == ("compiled", 4096 * 4096, 0, [])
    assert seconds < 60
