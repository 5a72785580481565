"""The trained side of every model family as one processor (`reference.system.served.FamilyPath`): the
checkpoint's processor as deferlab restates it (semantics §18), for the claims and the report alike.

Why here, in the oracle: the claim tests (`properties.families`) and the report's served step read every served
path against the same trained side, and neither may import the other's room; the restatements themselves are
`reference.oracle.qwen`, `reference.oracle.internvl` and `reference.oracle.family_norm`, each checked bitwise
against the class the checkpoint names, run for real (the ``transformers`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from deferlab.reference.oracle import ernie45_vl, family_norm, glm4v, internvl, minicpm_v, paddleocr, qwen
from deferlab.reference.system import families
from deferlab.reference.system.family_configs import InternVLConfig, NormConfig, QwenVLConfig, family_profile
from deferlab.reference.system.served import Geometry

# InternVL's image tokens per 448 px tile: (448 / 14)**2 patches, 2x2 merged by its pixel shuffle (downsample
# ratio 0.5): the checkpoint's config.json (semantics §18.4).
INTERNVL_TOKENS_PER_TILE = 256


@cache
def config(family: str) -> QwenVLConfig | InternVLConfig | NormConfig:
    """The family's published config (`reference.system.family_configs.PROFILES`)."""
    return family_profile(families.family(family).profile)


class Trained:
    """The checkpoint's processor of a family, as deferlab restates it (`reference.oracle.qwen`,
    `reference.oracle.internvl`, `reference.oracle.family_norm`): what every served path is read against."""

    label, path, dtype, real_code = "TRAINED", "trained", "float32", False

    def __init__(self, family: str) -> None:
        self.family = family
        self.scope = families.family(family).scope
        self.system = f"{family}-checkpoint"
        self.name = f"{self.system} (trained)"

    def geometry(self, width: int, height: int, cfg: Any) -> Geometry:
        side = _GEOMETRY.get(getattr(cfg, "kind", None))
        if side is None:
            raise TypeError(f"{self.family}: judged on normalization only; it has no geometry here")
        return side(width, height, cfg)

    def serve(self, images: Sequence[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        values, grids = [], []
        for image in images:
            side = _SERVE.get(getattr(cfg, "kind", None))
            if side is None:
                raise TypeError(f"{self.family}: judged on normalization only; it serves no pixels here")
            v, g = side(image, cfg)
            values.append(v)
            grids.append(g)
        return np.concatenate(values), np.stack(grids).astype(np.int64)

    def levels(self, cfg: Any) -> np.ndarray:
        table = _LEVELS.get(getattr(cfg, "kind", None), family_norm.checkpoint_levels)(cfg)
        return np.ascontiguousarray(table.T, dtype=np.float32)

    def provenance(self) -> dict[str, str]:
        return {"trained": f"deferlab.reference.oracle ({self.family}'s checkpoint processor, restated; semantics §18)"}


# --- each family kind's restatement, chosen by the config's declared ``kind`` (`reference.system.family_configs`) ---
def _qwen_geometry(width: int, height: int, cfg: QwenVLConfig) -> Geometry:
    new_h, new_w = qwen.resize_target(height, width, cfg)
    return Geometry(new_w, new_h, tuple(qwen.grid(height, width, cfg)), qwen.num_tokens(height, width, cfg))


def _internvl_geometry(width: int, height: int, cfg: InternVLConfig) -> Geometry:
    cols, rows, n = internvl.tiles(width, height, cfg)
    s = cfg.image_size
    return Geometry(cols * s, rows * s, (rows, cols, n), n * INTERNVL_TOKENS_PER_TILE)


def _qwen_serve(image: Any, cfg: QwenVLConfig) -> tuple[np.ndarray, np.ndarray]:
    pv, grid = qwen.preprocess(image, cfg)
    return pv.reshape(pv.shape[0], 3, -1), grid[0]


def _internvl_serve(image: Any, cfg: InternVLConfig) -> tuple[np.ndarray, np.ndarray]:
    tiles = internvl.preprocess(image, cfg)
    cols, rows, n = internvl.tiles(image.size[0], image.size[1], cfg)
    return tiles.reshape(n, 3, -1), np.array([rows, cols, n], dtype=np.int64)


def _paddleocr_geometry(width: int, height: int, cfg: Any) -> Geometry:
    new_h, new_w = paddleocr.resize_target(height, width, cfg)
    return Geometry(new_w, new_h, paddleocr.grid(height, width, cfg), paddleocr.num_tokens(height, width, cfg))


def _paddleocr_serve(image: Any, cfg: Any) -> tuple[np.ndarray, np.ndarray]:
    pv, grid = paddleocr.preprocess(image, cfg)
    return pv.reshape(pv.shape[0], 3, -1), grid[0]


def _ernie_geometry(width: int, height: int, cfg: Any) -> Geometry:
    new_h, new_w = ernie45_vl.resize_target(height, width, cfg)
    return Geometry(new_w, new_h, ernie45_vl.grid(height, width, cfg), ernie45_vl.num_tokens(height, width, cfg))


def _mimo_geometry(width: int, height: int, cfg: Any) -> Geometry:
    return _qwen_geometry(width, height, cfg.qwen)  # a Qwen2VLImageProcessor config (semantics §18.9)


def _glm4v_geometry(width: int, height: int, cfg: Any) -> Geometry:
    new_h, new_w = glm4v.resize_target(height, width, cfg)
    return Geometry(new_w, new_h, glm4v.grid(height, width, cfg), glm4v.num_tokens(height, width, cfg))


def _minicpmv_geometry(width: int, height: int, cfg: Any) -> Geometry:
    (src_h, src_w), (rows, cols, piece_h, piece_w), tokens = minicpm_v.geometry(height, width, cfg)
    return Geometry(src_w, src_h, (rows, cols, piece_w, piece_h), tokens)  # grid: the slices and one slice's size


def _ernie_serve(image: Any, cfg: Any) -> tuple[np.ndarray, np.ndarray]:
    pv, grid = ernie45_vl.preprocess(image, cfg)
    return pv.reshape(pv.shape[0], 3, -1), grid[0]


def _mimo_serve(image: Any, cfg: Any) -> tuple[np.ndarray, np.ndarray]:
    pv, grid = ernie45_vl.mimo_preprocess(image, cfg)  # its Qwen2VLImageProcessor (semantics §18.9)
    return pv.reshape(pv.shape[0], 3, -1), grid[0]


def _glm4v_serve(image: Any, cfg: Any) -> tuple[np.ndarray, np.ndarray]:
    pv, grid = glm4v.preprocess(image, cfg)  # its Glm4vImageProcessorPil (semantics §18.9)
    return pv.reshape(pv.shape[0], 3, -1), grid[0]


_GEOMETRY = {
    "qwen": _qwen_geometry,
    "internvl": _internvl_geometry,
    "paddleocr": _paddleocr_geometry,
    "ernie": _ernie_geometry,
    "mimo": _mimo_geometry,
    "glm4v": _glm4v_geometry,  # C13 (semantics §18.9)
    "minicpmv": _minicpmv_geometry,  # C13: source size, slice grid and size, tokens (semantics §18.9)
}
_SERVE = {
    "qwen": _qwen_serve,
    "internvl": _internvl_serve,
    "paddleocr": _paddleocr_serve,
    "ernie": _ernie_serve,  # C14 (semantics §18.9)
    "mimo": _mimo_serve,
    "glm4v": _glm4v_serve,  # C14 (semantics §18.9)
}
_LEVELS = {  # else the normalization's own
    "qwen": qwen.normalize_levels,
    "internvl": internvl.normalize_levels,
    "paddleocr": paddleocr.normalize_levels,
}
