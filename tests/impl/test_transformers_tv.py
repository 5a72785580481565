"""transformers 5.24.0's torchvision backend of the Qwen2-VL processor as a row of its own, judged against the
PIL backend (the trained side) like an engine path (semantics §18.2, "the torchvision backend as a row of its
own"): the verdicts that paragraph predicts, per family, measured in a child process (`transformers_tv_child`:
one transformers per process, torchvision importable before its image backends); and the one-line refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.impl.children import json_child

pytestmark = pytest.mark.extra("transformers")

# semantics §18.2: the fused normalization's table against the trained one (FP32, after BF16), of 768.
TABLES = {"qwen2.5-vl": (537, 0), "qwen3-vl": (384, 0)}
UPSCALE_LEVELS = 2  # every 12x10 and <= 40 px case: both sides resample horizontally first
VERTICAL_LEVELS = 24  # Pillow 13 height first, torch width first (the worst measured on noise, §13.4)


def child(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return json_child("tests.impl.transformers_tv_child", *args, env=env, timeout=600)


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_torchvision_backend_differs_from_the_pil_backend_by_the_resize_only(family: str) -> None:
    got = child("measure", family)
    if "refused" in got:
        pytest.skip(got["refused"])
    print(json.dumps({k: v for k, v in got.items() if k != "provenance"}, indent=1))
    assert got["system"] == "transformers-5.24.0"
    assert "torchvision 0.28." in got["provenance"]["torchvision"]
    assert got["geometry"]["differ"] == 0 and got["geometry"]["sizes"] > 1400, got["geometry"]["first"]
    assert (got["levels"]["fp32"], got["levels"]["bf16"]) == TABLES[family]
    pixels = got["pixels"]
    assert all(g["grid_differ"] == 0 for g in pixels.values())
    assert pixels["12x10"]["cases"] == 17 and pixels["drawn"]["cases"] == 24
    for group, g in pixels.items():
        bound = VERTICAL_LEVELS if group == "shrink, Pillow vertical first" else UPSCALE_LEVELS
        assert 1 <= g["max_levels"] <= bound, (group, g["max_levels"])
        # every value whose level agrees is the normalization alone, explained; C14 leaves exactly the
        # values 2 or more levels off unexplained
        assert g["differ"] == g["level_differ"] + g["normalization_only"]
        assert g["unexplained"] == sum(n for k, n in g["offsets"].items() if int(k) >= 2)
    assert pixels["shrink, Pillow horizontal first"]["max_levels"] == 1
    assert pixels["shrink, Pillow vertical first"]["max_levels"] > UPSCALE_LEVELS


def test_refused_in_one_line_when_torchvision_cannot_be_had(tmp_path) -> None:
    got = child("measure", "qwen2.5-vl", env={"DEFERLAB_OFFLINE": "1", "DEFERLAB_CACHE": str(tmp_path)})
    line = got["refused"]
    assert "\n" not in line and line.startswith("n/a: torchvision for transformers 5.24.0"), line
    assert "==0.28.*" in line and "DEFERLAB_OFFLINE=1" in line


def test_refused_in_one_line_when_the_image_backends_were_imported_first() -> None:
    line = child("late", "-")["refused"]
    assert line is not None and "\n" not in line and "before torchvision was importable" in line, line
