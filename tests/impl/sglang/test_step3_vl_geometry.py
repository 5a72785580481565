"""SGLang's Step3-VL windowing (``processors/step3_vl.py``'s ``ImagePatcher`` and token count) against deferlab's
restatement of the checkpoint's rule (`reference.oracle.step3_vl`, semantics §18.9): not a claim (C13 is not judged
while the remote code is unread), a measurement of what §18.9 states before the code ran.

What is checked against what: SGLang's own ``get_image_size_for_padding``, ``get_image_size_for_preprocess``,
``determine_window_size``, ``get_image_size_for_crop``, ``get_num_patches`` and ``get_num_image_tokens`` on every
size up to 760 per side and a lattice of larger ones both ways (577,600 + 85,536 sizes), against the oracle read with SGLang's
``<=``: no difference; with vLLM's copy's ``<``: exactly the sizes whose capped long side is 728 with a side ratio
at most 4 (first 728 x 1); and ``_split_images`` on real images at worked sizes (window count, each window's size,
the row breaks; a window past the edge zero-filled). The module imports transformers and torchvision, so SGLang
runs in a child that loads it with its companions.
"""

from __future__ import annotations

import pytest

from tests.impl.sglang.support import default_spec, run_child

CHILD = """
import json, sys
import numpy as np
from PIL import Image
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.reference.oracle import step3_vl as oracle
from tests.impl.sglang.support import JSON_MARK

source = load(sys.argv[1], companions=("transformers", "torchvision"))
proc = family_path(source, "step3-vl").processor()
P = proc.patcher
small = [(w, h) for h in range(1, 761) for w in range(1, 761)]
large = [(w, h) for w in range(700, 4097, 7) for h in range(1, 4097, 47)]
sizes = small + large + [(h, w) for w, h in large]
rows = []
for w, h in sizes:
    pw, ph = P.get_image_size_for_padding(w, h)
    cw, ch = P.get_image_size_for_preprocess(pw, ph)
    win = P.determine_window_size(max(cw, ch), min(cw, ch))
    kw, kh = P.get_image_size_for_crop(cw, ch, win) if win else (0, 0)
    n, breaks = P.get_num_patches(w, h)
    rows.append((cw, ch, win, kw, kh, n, breaks, proc.get_num_image_tokens(w, h)))
got = np.asarray(rows, dtype=np.int64)
ws, hs = (np.asarray(c, dtype=np.int64) for c in zip(*sizes))
out = {"version": source.version, "sizes": len(sizes)}
for boundary in ("<=", "<"):
    g = oracle.geometry(ws, hs, boundary)
    want = np.stack([g["width"], g["height"], g["window"], g["crop_width"], g["crop_height"], g["cols"] * g["rows"],
                     g["breaks"], g["tokens"]], axis=1)
    bad = np.flatnonzero((got != want).any(axis=1))
    capped_long = np.maximum(g["width"], g["height"])
    edge = (capped_long == 728) & (capped_long / np.minimum(g["width"], g["height"]) <= 4)
    out[boundary] = {"differ": int(bad.size), "first": [int(ws[bad[0]]), int(hs[bad[0]])] if bad.size else None,
                     "all_at_the_edge": bool(edge[bad].all()), "edge": int(edge.sum())}
worked = {}
for w, h in [(728, 400), (1000, 300), (728, 1), (100, 600), (1920, 1080), (600, 600), (2600, 500)]:
    image = Image.fromarray(np.full((h, w, 3), 200, np.uint8))
    ((view, patches, mask),) = proc._split_images([image])
    zero = [int((np.asarray(p) == 0).all(axis=-1).sum()) for p in patches]
    worked[f"{w}x{h}"] = {"view": list(view.size), "patches": [list(p.size) for p in patches], "mask": mask,
                          "zero": zero, "tokens": proc.get_num_image_tokens(w, h)}
out["worked"] = worked
print(JSON_MARK + json.dumps(out))
"""


@pytest.fixture(scope="module", params=["0.5.17", "newest"])
def served(request):
    spec = default_spec() if request.param == "newest" else request.param
    return run_child(CHILD, spec, spec=spec, timeout=900)


@pytest.mark.extra("transformers")
def test_sglangs_windowing_is_the_restated_rule_read_with_its_own_boundary(served):
    assert served["sizes"] == 760 * 760 + 2 * 486 * 88
    assert served["<="] == {"differ": 0, "first": None, "all_at_the_edge": True, "edge": served["<="]["edge"]}


@pytest.mark.extra("transformers")
def test_vllms_reading_differs_only_at_a_long_side_of_728(served):
    """§18.9: the copies differ exactly where the capped long side is 728 with a ratio at most 4, first 728 x 1."""
    lt = served["<"]
    assert lt["first"] == [728, 1] and lt["all_at_the_edge"] and 0 < lt["differ"] <= lt["edge"]


# (width, height) -> (global view's size after the cap, window sizes, row-break mask, zero-filled pixels per window,
# tokens): semantics §18.9's rule worked by hand
WORKED = {
    "728x400": ([728, 400], [[400, 400]] * 2, [False, False], [0, 0], 2 * 83 + 171),
    "1000x300": ([1000, 300], [[504, 504]] * 2, [False, False], [504 * 204] * 2, 2 * 83 + 171),  # past the edge
    "728x1": ([728, 728], [], None, [], 171),  # squared (short side under 32, ratio over 4): no window with <=
    "100x600": ([100, 600], [[100, 100]] * 6, [True] * 5 + [False], [0] * 6, 6 * 83 + 171 + 5),
    "1920x1080": ([1920, 1080], [[504, 504]] * 8, [False, False, False, True] + [False] * 4, [0] * 8, 8 * 83 + 172),
    "600x600": ([600, 600], [], None, [], 171),
    "2600x500": ([2600, 500], [[500, 500]] * 6, [False] * 6, [0] * 6, 6 * 83 + 171),  # the float fraction 0.2000...2
}


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("size", list(WORKED))
def test_split_images_at_the_worked_sizes(served, size):
    view, patches, mask, zero, tokens = WORKED[size]
    got = served["worked"][size]
    assert (got["view"], got["patches"], got["mask"], got["zero"], got["tokens"]) == (
        view,
        patches,
        mask,
        zero,
        tokens,
    )
