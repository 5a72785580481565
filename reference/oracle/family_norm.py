"""The trained side's normalization of each uint8 level, for the families a transformers processor serves
(semantics §18.1, claim C15).

Why a table: transformers' PIL backend rescales and normalizes elementwise, so each output value depends
only on the level and the channel; 256 x C values are the whole arithmetic, and a pixel array looked up in
this table is the processor's output bit for bit. The order (transformers 5.24.0, ``PilBackend.rescale``
then ``PilBackend.normalize``; the same in 5.19.0-5.25.0):

* rescale (``do_rescale``): ``f32(f64(u) * rescale_factor)``, the product in float64, one cast;
* normalize (``do_normalize``): ``(x - f32(mean)) / f32(std)``, both operations in float32 (an unrescaled
  uint8 input is cast to float32 first);
* neither: ``f32(u)`` (the layout step casts).

Gemma 4 (``do_normalize`` false) is the rescale alone. Only the trained side is stated here: the served
side's arithmetic (vLLM's device normalization, SGLang's processors) is the engine's own code, run for real
by the claim tests, never restated in the oracle.
"""

from __future__ import annotations

import numpy as np

from deferlab.reference.oracle.numerics import to_bf16
from deferlab.reference.system.family_configs import NormConfig

__all__ = ["LEVELS", "bf16", "checkpoint_levels"]

LEVELS = 256


def checkpoint_levels(cfg: NormConfig) -> np.ndarray:
    """(256, C) float32: row u is what the checkpoint's processor gives level u in each channel."""
    cfg = NormConfig.checked(cfg)
    levels = np.arange(LEVELS, dtype=np.uint8)
    if cfg.do_rescale:
        x = (levels.astype(np.float64) * cfg.rescale_factor).astype(np.float32)
    else:
        x = levels.astype(np.float32)
    column = np.repeat(x[:, None], cfg.channels, axis=1)
    if not cfg.do_normalize:
        return column
    mean = np.asarray(cfg.image_mean, dtype=np.float32)[None, :]
    std = np.asarray(cfg.image_std, dtype=np.float32)[None, :]
    return (column - mean) / std  # float32 - float32, then float32 / float32


def bf16(levels: np.ndarray) -> np.ndarray:
    """A float32 table cast to the tower's BF16 (round to nearest even), returned as float32 values."""
    return to_bf16(levels)
