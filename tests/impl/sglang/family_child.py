"""The Qwen-VL family paths (and PaddleOCR-VL's, a Qwen-VL processor subclass), run in a child process of their own (``python -m tests.impl.sglang.family_child SPEC``).

Why a child: the Qwen paths compute with the release's pinned transformers and torchvision (the loader's
companions), which must be active before anything imports transformers; the test session has imported
deferlab's own (5.24.0) long before. The child loads SGLang with its companions, runs both Qwen families on a
few images and prints what the test checks, as one `support.JSON_MARK` line.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.families import family_path
from deferlab.impl.sglang.sources import load
from deferlab.reference.oracle import paddleocr, qwen
from deferlab.reference.system.family_configs import family_profile
from tests.impl.sglang.support import JSON_MARK

SIZES = ((640, 480), (100, 50), (20, 30), (1000, 700))


def family(source: Any, name: str) -> dict[str, Any]:
    """What one Qwen family path gives on `SIZES` (random RGB images; an RGBA one last)."""
    path, cfg = family_path(source, name), family_profile(name)
    oracle = paddleocr if name == "paddleocr-vl" else qwen
    rng = np.random.default_rng(7)
    images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in SIZES]
    images.append(Image.new("RGBA", (64, 64), (10, 200, 30, 0)))
    t0 = time.perf_counter()
    values, grid, tokens = path.run(images[:1], cfg)
    one = time.perf_counter() - t0
    values, grid, tokens = path.run(images, cfg)
    geometry = [path.geometry(im.width, im.height, cfg) for im in images]
    levels = path.levels(cfg)
    mean, std = np.asarray(cfg.image_mean)[:, None], np.asarray(cfg.image_std)[:, None]
    exact = (np.arange(256) / 255 - mean) / std
    return {
        "system": path.system,
        "attributes": [path.family, path.label, path.path, path.dtype, path.real_code],
        "processor": type(path.processor(cfg)._processor.image_processor).__module__,
        "served_grid": grid.tolist(),
        "served_tokens": tokens,
        "values_shape": list(values.shape),
        "bf16_exact": bool(np.array_equal(torch.from_numpy(values).bfloat16().float().numpy(), values)),
        "geometry": [[g.width, g.height, list(g.grid), g.tokens] for g in geometry],
        "trained_size": [list(oracle.resize_target(im.height, im.width, cfg))[::-1] for im in images],
        "one_by_200": [path.geometry(200, 1, cfg).width, path.geometry(200, 1, cfg).height],
        "levels_shape": list(levels.shape),
        "levels_nondecreasing": bool(np.all(np.diff(levels, axis=1) >= 0)),
        "levels_error": float(np.max(np.abs(levels - exact) / np.maximum(np.abs(exact), 2.0**-8))),
        "provenance": path.provenance(),
        "serve_one_seconds": one,
    }


def main(argv: list[str]) -> None:
    t0 = time.perf_counter()
    source = load(argv[1], companions=("transformers", "torchvision"))
    loaded = time.perf_counter() - t0
    out = {name: family(source, name) for name in ("qwen2.5-vl", "qwen3-vl", "paddleocr-vl")}
    out["companions"] = {name: c.version for name, c in source.companions.items()}
    out["load_seconds"] = loaded
    print(JSON_MARK + json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
