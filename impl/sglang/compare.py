"""Set the real SGLang (through `SGLangImpl`) against deferlab's own torch model, step by step, bitwise.

This is the one module of ``impl/sglang`` that imports deferlab's ``impl``:
only to compare, never to stand in. Each comparison that cannot run (say,
``impl`` was reorganised) is reported as skipped with its error, not hidden.
Run: ``python -m impl.sglang.compare VERSION`` (prints JSON).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.driver import SGLangImpl
from deferlab.reference.system.config import BackgroundConfig
from deferlab.reference.system.profiles import profile

PROFILES = ("kimi-k3", "kimi-k2.5", "sglang-unit-4096", "clip-stats")
CASES = [
    ("RGB", 640, 480), ("RGBA", 333, 257), ("LA", 100, 60), ("L", 50, 70), ("P+t", 90, 33), ("RGB+t", 45, 45),
    ("RGBA", 4000, 300), ("RGB", 1, 1), ("RGB", 14, 14), ("RGBA", 3000, 3000),
]  # fmt: skip


def _pil(mode: str, w: int, h: int, seed: int) -> Image.Image:
    r = np.random.default_rng(seed)
    if mode == "P+t":
        im = Image.fromarray(r.integers(0, 256, (h, w), dtype=np.uint8), "L").convert("P")
        im.info["transparency"] = 5
        return im
    if mode == "RGB+t":
        im = Image.fromarray(r.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB")
        im.info["transparency"] = (1, 2, 3)
        return im
    ch = {"RGB": 3, "RGBA": 4, "LA": 2, "L": 1}[mode]
    return Image.fromarray(r.integers(0, 256, (h, w, ch) if ch > 1 else (h, w), dtype=np.uint8), mode)


def _diff(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape:
        return f"shapes {tuple(a.shape)} vs {tuple(b.shape)}"
    d = (a.float() - b.float()).abs()
    return f"max |d| = {d.max().item():.3g} in {(d > 0).sum().item()} of {d.numel()} values"


def _same(got: Any, want: Any) -> tuple[bool, str]:
    return got == want, f"{got} vs {want}"


def compare(sgl: SGLangImpl) -> dict[str, Any]:
    """Every disagreement between SGLang and deferlab's ``impl`` on a fixed set of inputs."""
    report: dict[str, Any] = {"name": sgl.name, "checks": 0, "disagreements": [], "skipped": []}

    def check(what: str, fn: Callable[[], tuple[bool, str]]) -> None:
        try:
            ok, detail = fn()
        except Exception as e:  # noqa: BLE001 - a comparison that cannot run is reported
            report["skipped"].append(f"{what}: {type(e).__name__}: {e}")
            return
        report["checks"] += 1
        if not ok:
            report["disagreements"].append(f"{what}: {detail}")

    import deferlab.impl.background as dl_bg
    import deferlab.impl.navit as dl_navit
    import deferlab.impl.pipeline as dl_pipeline
    import deferlab.impl.placement as dl_place
    import deferlab.impl.staging as dl_stage

    rng = np.random.default_rng(0)
    for name in PROFILES:
        cfg = profile(name)
        for i, (mode, w, h) in enumerate(CASES):
            imgs = [_pil(mode, w, h, i)]

            def one(imgs: list = imgs, cfg: Any = cfg) -> tuple[bool, str]:
                a, ga = sgl.preprocess(imgs, cfg)
                b, gb = dl_pipeline.preprocess(imgs, cfg, device="cpu")
                ok = a.shape == b.shape and torch.equal(a, b) and torch.equal(ga, gb)
                return ok, "" if ok else _diff(a, b)

            check(f"preprocess {name} {mode} {w}x{h}", one)
        shapes = [(3, 64, 48), (3, 64, 48), (4, 64, 48), (1, 30, 30), (3, 700, 900)]
        batch = [torch.from_numpy(rng.integers(0, 256, s, dtype=np.uint8)) for s in shapes]

        def many(batch: list = batch, cfg: Any = cfg) -> tuple[bool, str]:
            a, ga = sgl.preprocess(batch, cfg)
            b, gb = dl_pipeline.preprocess(batch, cfg, device="cpu")
            ok = torch.equal(a, b) and torch.equal(ga, gb)
            return ok, "" if ok else _diff(a, b)

        check(f"preprocess {name} grouped tensor request", many)
        bad = []
        for w in [*range(1, 200, 7), 3600, 4000, 8000, 10000, 12345]:
            for h in [*range(1, 200, 11), 100, 777, 3000, 3600, 6000]:
                ours = dl_navit.navit_resize_config(w, h, cfg).to_dict()
                if sgl.navit_resize_config(w, h, cfg) != ours:
                    bad.append(f"{w}x{h}")
        check(f"navit_resize_config {name} (~1000 sizes)", lambda bad=bad: (not bad, ", ".join(bad[:10])))
    for _ in range(200):
        k, ranks = int(rng.integers(0, 9)), int(rng.integers(1, 5))
        sizes = [int(x) for x in rng.integers(1, 6, k) * 4]
        ours = dl_place.assign_owners(sizes, ranks)
        check(f"assign_owners {sizes} on {ranks}", lambda s=sizes, r=ranks, o=ours: _same(sgl.assign_owners(s, r), o))
    for bg in (
        {"pattern": "chessboard", "chessboard_square_size": 8, "chessboard_gray_value": 180},
        {"pattern": "white"},
        {"pattern": "gray"},
        None,
    ):
        cfg_bg = None if bg is None else BackgroundConfig.from_dict(bg)
        x = np.zeros((4, 256, 256), np.float32)
        x[0], x[1], x[2], x[3] = np.arange(256)[None, :], 255 - np.arange(256)[None, :], 77, np.arange(256)[:, None]
        check(
            f"fill_transparent_bg {bg} (every alpha)",
            lambda x=x, b=cfg_bg: (
                torch.equal(sgl.fill_transparent_bg(x, b), dl_bg.fill_transparent_bg(torch.as_tensor(x)[None], b)[0]),
                "values differ",
            ),
        )
    for i, (mode, w, h) in enumerate(CASES[:6]):
        im = _pil(mode, w, h, i)
        check(
            f"to_chw_uint8 {mode}",
            lambda im=im: (torch.equal(sgl.to_chw_uint8(im), dl_stage.to_chw_uint8(im)), "differ"),
        )
    return report


def main(argv: list[str]) -> int:
    sgl = SGLangImpl(argv[1] if len(argv) > 1 else None)
    print(json.dumps(compare(sgl), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
