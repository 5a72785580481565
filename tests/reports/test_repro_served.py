"""The checkpoint's processor as the served-vs-trained reproducers state it equals deferlab's checkpoint oracle.

Why: a reproducer computes its expected values in the file, from first
principles (`reports.repro.served_texts`), because it may import nothing of
deferlab; if that restatement drifted from `reference.oracle.checkpoint`, a
reproducer would fail (or pass) for a reason the claim never saw. So its
helpers are run here, engine-free, against the oracle: the resize decision on
the worked and long thin sizes, the levels of every C14 exemplar class (both
fill stages, with and without a background, resized or not), the
normalization bit for bit, and the served-level recovery. No engine is loaded.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from PIL import Image

from deferlab.properties.strategies import served as ss
from deferlab.reference.oracle import checkpoint
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.profiles import profile
from deferlab.reports.repro import served as repro_served
from deferlab.reports.repro import served_texts

K3 = profile("kimi-k3")
SIZES = [(1, 1), (14, 14), (32, 32), (640, 480), (1920, 1080), (3840, 2160), (7400, 9), (9, 7400), (10000, 100)]


def helpers(cfg: PreprocessConfig, engine: str = "sglang") -> dict[str, Any]:
    """The reproducer's checkpoint helpers (its `_CHECKPOINT` text) run in a namespace with ``cfg``'s CFG."""
    namespace: dict[str, Any] = {"np": np, "Image": Image, "math": math}
    namespace["CFG"] = repro_served.media_proc_cfg(cfg, engine)
    exec(compile(served_texts._CHECKPOINT, "<reproducer helpers>", "exec"), namespace)  # noqa: S102 - our text
    return namespace


def _levels(fn: Any, image: Any) -> np.ndarray | str:
    try:
        return fn(image)
    except (ValueError, TypeError, OSError) as e:  # Pillow refusing (e.g. La): both sides must refuse
        return f"refused ({type(e).__name__})"


@pytest.mark.parametrize(
    "geometry", [(14, 2, 65536, 512), (2, 1, 1, 2), (1, 1, 4, 100), (14, 2, 16384, 512), (16, 1, 1, 1)]
)
def test_the_resize_decision_is_the_checkpoints(geometry: tuple[int, int, int, int]) -> None:
    p, m, limit, side = geometry
    cfg = replace(K3, patch_size=p, merge_kernel_size=m, in_patch_limit=limit, patch_limit_on_one_side=side)
    resize = helpers(cfg)["_resize"]
    for w, h in SIZES + [(w, h) for w in range(1, 40, 3) for h in range(1, 40, 5)]:
        rc = checkpoint.resize_config(w, h, cfg)
        assert resize(w, h) == (rc.new_width, rc.new_height, rc.pad_width, rc.pad_height), (geometry, w, h)


@pytest.mark.parametrize("stage", ["after_resize", "before_resize"])
@pytest.mark.parametrize("background", ["chessboard", None, "gray"])
def test_the_levels_are_the_checkpoints_for_every_exemplar(stage: str, background: str | None) -> None:
    """Every C14 exemplar (each image class, uint8 arrays, the corpus's small images; resized and not)."""
    bg = None if background is None else replace(K3.background, pattern=background)
    base = replace(K3, fill_stage=stage, background=bg)
    checked = 0
    for case in ss.exemplars():
        cfg = case.config(base)
        ours = _levels(helpers(cfg)["_checkpoint_levels"], case.image)
        want = _levels(lambda im, cfg=cfg: checkpoint.levels(im, cfg), case.image)
        if isinstance(want, str):
            assert isinstance(ours, str), (case, "the oracle refuses it, the reproducer does not")
            continue
        assert isinstance(ours, np.ndarray) and ours.dtype == np.uint8, (case, ours)
        assert np.array_equal(ours, want), (case, int(np.abs(ours.astype(int) - want).max()))
        checked += 1
    assert checked > 40


def test_the_normalization_and_the_level_recovery_are_the_checkpoints() -> None:
    """`_normalize` is the checkpoint's table bit for bit (shipped and CLIP mean/std), and `_served_levels`
    recovers every level of it, and of values a few ulps away."""
    clip = replace(K3, image_mean=(0.48145466, 0.4578275, 0.40821073), image_std=(0.26862954, 0.26130258, 0.27577711))
    for cfg in (K3, clip):
        ns = helpers(replace(cfg, patch_size=16, merge_kernel_size=1))
        levels = np.tile(np.arange(256, dtype=np.uint8), (3, 1)).reshape(3, 16, 16)
        table = checkpoint.normalization_table(cfg).reshape(3, 16, 16)
        assert (ns["_normalize"](levels).view(np.int32) == table.view(np.int32)).all()
        patches = ns["_patches"](levels.transpose(1, 2, 0))
        assert patches.shape == (1, 3, 16, 16)
        for ulps in (-3, 0, 3):
            nudged = ns["_normalize"](patches)
            for _ in range(abs(ulps)):
                nudged = np.nextafter(nudged, np.float32(np.sign(ulps) * np.inf))
            assert (ns["_served_levels"](nudged) == patches).all()
