"""The front-door table, array half: bad inputs to the oracle's array functions (resize, composite, normalize, BF16).

Rows are `properties.front_door.api.Bad`; ``test_front_door.py`` runs them
with the rest of the table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deferlab.reference.system.errors import InputTypeError, InputValueError
from tests.front_door.api import Bad, _k3, _u8


# --- the oracle's array functions --------------------------------------------------------------------------------
def _ref(module: str, fn: str, *a: Any, **kw: Any) -> Any:
    import importlib

    return getattr(importlib.import_module(f"deferlab.reference.oracle.{module}"), fn)(*a, **kw)


_F = np.float32
ORACLE_ROWS = [
    Bad(
        "preprocess config dict",
        lambda t: _ref("pipeline", "preprocess", [_u8(3, 4, 4)], {"patch_size": 14}),
        InputTypeError,
        r"config must be a PreprocessConfig",
    ),
    Bad(
        "preprocess not a list",
        lambda t: _ref("pipeline", "preprocess", _u8(3, 4, 4), _k3()),
        InputTypeError,
        r"images must be a sequence",
    ),
    Bad(
        "preprocess arithmetic",
        lambda t: _ref("pipeline", "preprocess", [_u8(3, 4, 4)], _k3(), arithmetic="gpu"),
        InputValueError,
        r"arithmetic must be one of 'cpu', 'cuda'",
    ),
    Bad(
        "preprocess float image",
        lambda t: _ref("pipeline", "preprocess", [_u8(3, 4, 4), np.zeros((3, 4, 4))], _k3()),
        InputValueError,
        r"must be uint8",
    ),
    Bad("trace object", lambda t: _ref("pipeline", "trace", object(), _k3()), InputTypeError, r"PIL.Image.Image"),
    Bad(
        "scale_bias mean len",
        lambda t: _ref("normalize", "scale_bias", (0.5, 0.5), (0.5,) * 3),
        InputValueError,
        r"mean must have exactly 3",
    ),
    Bad(
        "scale_bias std 0",
        lambda t: _ref("normalize", "scale_bias", (0.5,) * 3, (0.5, 0.0, 0.5)),
        InputValueError,
        r"std\[1\] must be a number > 0",
    ),
    Bad(
        "scale_bias str",
        lambda t: _ref("normalize", "scale_bias", "abc", (0.5,) * 3),
        InputTypeError,
        r"mean must be a sequence of 3",
    ),
    Bad(
        "pad smaller",
        lambda t: _ref("normalize", "pad_bottom_right", np.zeros((3, 4, 4)), 2, 4),
        InputValueError,
        r"padded size \(2, 4\) is smaller",
    ),
    Bad(
        "patchify size",
        lambda t: _ref("normalize", "patchify", np.zeros((1, 3, 5, 4)), 2),
        InputValueError,
        r"must be a multiple of the patch size 2",
    ),
    Bad(
        "patchify p 0",
        lambda t: _ref("normalize", "patchify", np.zeros((1, 3, 4, 4)), 0),
        InputValueError,
        r"p must be an int >= 1",
    ),
    Bad(
        "normalize channels",
        lambda t: _ref("normalize", "normalize_scale_bias", np.zeros((4, 2, 2)), np.ones(3), np.zeros(3)),
        InputValueError,
        r"must have 3 channels",
    ),
    Bad(
        "normalize fused inexact",
        lambda t: _ref(
            "normalize",
            "normalize_scale_bias",
            np.full((3, 1, 1), 0.5, _F),
            *_ref("normalize", "scale_bias", (0.5,) * 3, (0.5,) * 3),
            fused=True,
        ),
        InputValueError,
        r"fused=True needs integer-valued x",
    ),
    Bad(
        "eager std < 0",
        lambda t: _ref("normalize", "normalize_eager", np.zeros((3, 2, 2)), (0.5,) * 3, (0.5, -1.0, 0.5)),
        InputValueError,
        r"std\[1\] must be a number > 0",
    ),
    Bad(
        "composite 2 channels",
        lambda t: _ref("background", "fill_transparent_bg", np.zeros((2, 3, 3), _F), None),
        InputValueError,
        r"must have 3 or 4 channels",
    ),
    Bad(
        "composite arithmetic",
        lambda t: _ref("background", "fill_transparent_bg", np.zeros((4, 3, 3), _F), None, arithmetic="gpu"),
        InputValueError,
        r"arithmetic must be one of",
    ),
    Bad(
        "composite bg str",
        lambda t: _ref("background", "fill_transparent_bg", np.zeros((4, 3, 3), _F), "white"),
        InputTypeError,
        r"bg must be a BackgroundConfig",
    ),
    Bad(
        "composite 2-D",
        lambda t: _ref("background", "fill_transparent_bg", np.zeros((3, 3), _F), None),
        InputValueError,
        r"\(C, H, W\) or \(B, C, H, W\)",
    ),
    Bad(
        "resize out_h 0",
        lambda t: _ref("resample", "resize_bicubic_aa", np.zeros((3, 4, 4)), 0, 2),
        InputValueError,
        r"out_h must be an int >= 1",
    ),
    Bad(
        "resize out_w -1",
        lambda t: _ref("resample", "resize_bicubic_aa", np.zeros((3, 4, 4)), 2, -1),
        InputValueError,
        r"out_w must be an int >= 1",
    ),
    Bad(
        "resize 2-D",
        lambda t: _ref("resample", "resize_bicubic_aa", np.zeros((4, 4)), 2, 2),
        InputValueError,
        r"\(C, H, W\) or \(B, C, H, W\)",
    ),
    Bad(
        "resize list",
        lambda t: _ref("resample", "resize_bicubic_aa", [[1.0]], 2, 2),
        InputTypeError,
        r"x must be a NumPy array or a tensor",
    ),
    Bad(
        "resize bool",
        lambda t: _ref("resample", "resize_bicubic_aa", np.zeros((3, 4, 4), bool), 2, 2),
        InputTypeError,
        r"must hold real numbers",
    ),
    Bad(
        "resize float size",
        lambda t: _ref("resample", "resize_bicubic_aa", np.zeros((3, 4, 4)), 2.5, 2),
        InputTypeError,
        r"out_h must be an int",
    ),
    Bad("bf16 float64", lambda t: _ref("numerics", "bf16_bits", np.zeros(3)), InputTypeError, r"x must be float32"),
    Bad("bf16 list", lambda t: _ref("numerics", "to_bf16", [1.0, 2.0]), InputTypeError, r"float32|NumPy array"),
]
