"""What the tests of SGLang's normalization-only image paths share (`test_gemma4`, `test_step3_vl`,
`test_mimo_v2`): the child that runs a family's path on a release, and the check of its levels against the ones a test states
(in FP32, and after the model's BF16 cast).

Why one child: each of these families' tests reads the same things off its path (the levels per dtype, C15's
problem against the trained table, the provenance, the geometry refused or answered), loaded the same way (SGLang
with transformers and torchvision as companions, a release per child); only what else a family's test asks
(the image processor's class, an unknown dtype's refusal) differs, and it asks by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.impl.sglang.support import bits, release_child

_CHILD = """
import json, sys
from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.properties import families as fam
from tests.impl.sglang.support import JSON_MARK, outcome

FAMILY, DTYPES, ASKED = {family!r}, {dtypes!r}, {asked!r}
source = load(sys.argv[1], companions=("transformers", "torchvision"))
cfg, want = fam.config(FAMILY), fam.Trained(FAMILY)
out = {{"version": source.version}}
for dtype in DTYPES:
    path = family_path(source, FAMILY, dtype=dtype)
    out[dtype] = {{"levels": path.levels(cfg).tolist(), "problem": fam.normalization_problem(path, cfg, want)}}
if "backend" in ASKED:
    out["backend"] = type(path.image_processor(cfg)).__name__
out["provenance"] = path.provenance()
out["geometry"] = outcome(lambda: path.geometry(10, 10, cfg), "answered {{}}")
if "dtype" in ASKED:
    out["dtype"] = outcome(lambda: family_path(source, FAMILY, dtype="float16"), "accepted")
print(JSON_MARK + json.dumps(out))
"""


def served(
    family: str, release: str, dtypes: tuple[str, ...] = ("float32", "bfloat16"), asked: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``family``'s path on SGLang ``release`` (``"newest"``: the default spec), from a child: per dtype its levels
    and C15's problem, its provenance and its geometry's outcome; and, as ``asked``, ``"backend"`` (the class of the
    image processor it builds) and ``"dtype"`` (what an unknown dtype, float16, came to)."""
    return release_child(_CHILD.format(family=family, dtypes=dtypes, asked=asked), release)


def levels(served: dict[str, Any], stated: np.ndarray) -> dict[str, np.ndarray]:
    """The path's levels per dtype, checked: FP32's are ``stated`` (3, 256) bit for bit, and BF16's, where the child
    ran it, are ``stated`` rounded once to BF16 (`to_bf16`: the model's cast of the FP32 values)."""
    got = {d: np.asarray(served[d]["levels"], dtype=np.float32) for d in ("float32", "bfloat16") if d in served}
    assert got["float32"].shape == (3, 256) and np.array_equal(bits(got["float32"]), bits(stated))
    if "bfloat16" in got:
        assert np.array_equal(bits(got["bfloat16"]), bits(to_bf16(stated)))
    return got


def to_bf16(a: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even to BF16, widened back to float32 (as torch's cast does)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)
