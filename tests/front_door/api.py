"""The front-door table, Python API half: bad inputs to deferlab's public functions and the errors they give.

Rows are `Bad` (the call, the exception class, a regex its one-line message
must match: the input's name, what is wrong, what is accepted); the tests
that run them are in ``test_front_door.py``. Files and the command line are
in `properties.front_door.files`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import torch
from PIL import Image

from deferlab.impl.sglang.sources import SGLangSourceError
from deferlab.reference.system.errors import ConfigError, CorpusError, InputTypeError, InputValueError
from deferlab.reference.system.profiles import profile_media_proc_cfg

# SGLang's gate-test config with the Kimi mean/std: the shipped profile, so the rows and the profile cannot drift.
K3_DICT = profile_media_proc_cfg("sglang-gate-test")


@dataclass(frozen=True)
class Bad:
    """One row: ``call(tmp)`` must raise ``error`` with a message matching ``match``."""

    id: str
    call: Callable[[Path], Any]
    error: type[Exception]
    match: str


def _cfg(**kw: Any) -> Any:
    from deferlab.reference.system.config import PreprocessConfig

    return PreprocessConfig(**kw)


def _k3() -> Any:
    return _profile("kimi-k3")


def _u8(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.uint8)


# --- reference: config, profiles, versions, corpus ------------------------------------------------------------------
CONFIG_ROWS = [
    Bad("config patch_size 0", lambda t: _cfg(patch_size=0), InputValueError, r"patch_size must be an int >= 1, got 0"),
    Bad("config patch_size float", lambda t: _cfg(patch_size=14.0), InputTypeError, r"patch_size must be an int"),
    Bad("config merge -1", lambda t: _cfg(merge_kernel_size=-1), InputValueError, r"merge_kernel_size .*>= 1"),
    Bad("config limit bool", lambda t: _cfg(in_patch_limit=True), InputTypeError, r"in_patch_limit must be an int"),
    Bad("config fixed tokens 0", lambda t: _cfg(fixed_output_tokens=0), InputValueError, r"fixed_output_tokens"),
    Bad("config mean len 2", lambda t: _cfg(image_mean=(0.5, 0.5)), InputValueError, r"image_mean must have exactly 3"),
    Bad("config mean nan", lambda t: _cfg(image_mean=(0.5, math.nan, 0.5)), InputValueError, r"image_mean\[1\]"),
    Bad("config std 0", lambda t: _cfg(image_std=(0.5, 0.0, 0.5)), InputValueError, r"image_std\[1\] .*> 0"),
    Bad("config std inf", lambda t: _cfg(image_std=(0.5, math.inf, 0.5)), InputValueError, r"image_std\[1\].*finite"),
    Bad("config std str", lambda t: _cfg(image_std="abc"), InputTypeError, r"image_std must be a sequence of 3"),
    Bad(
        "config bg pattern", lambda t: _cfg(background={"pattern": "plaid"}), InputValueError, r"pattern must be one of"
    ),
    Bad(
        "config bg gray 300",
        lambda t: _cfg(background={"pattern": "chessboard", "chessboard_gray_value": 300}),
        InputValueError,
        r"chessboard_gray_value must be an int in 0..255",
    ),
    Bad(
        "config bg square 0",
        lambda t: _cfg(background={"pattern": "chessboard", "chessboard_square_size": 0}),
        InputValueError,
        r"chessboard_square_size",
    ),
    Bad(
        "config bg top-left 1",
        lambda t: _cfg(background={"chessboard_square_on_top_left": 1}),
        InputTypeError,
        r"chessboard_square_on_top_left must be a bool",
    ),
    Bad("config bg int", lambda t: _cfg(background=3), InputTypeError, r"background must be a BackgroundConfig"),
    Bad("config max_pixels 0", lambda t: _cfg(max_pixels=0), InputValueError, r"max_pixels"),
    Bad(
        "media_proc_cfg missing keys",
        lambda t: _media({k: v for k, v in K3_DICT.items() if k not in ("in_patch_limit", "image_std")}),
        ConfigError,
        r"missing required keys \['in_patch_limit', 'image_std'\]",
    ),
    Bad(
        "media_proc_cfg unknown key",
        lambda t: _media({**K3_DICT, "in_patch_limt": 5}),
        ConfigError,
        r"unknown key\(s\) \['in_patch_limt'\]; accepted: .*strict=False",
    ),
    Bad("media_proc_cfg not a dict", lambda t: _media([1, 2]), InputTypeError, r"media_proc_cfg must be a table"),
    Bad("profile unknown", lambda t: _profile("kimi-k9"), InputValueError, r"unknown profile 'kimi-k9'.*kimi-k3"),
    Bad("policy unknown", lambda t: _policy("LATEST"), InputValueError, r"unknown policy 'LATEST'; known: PR_33921"),
    Bad("corpus env no manifest", lambda t: _corpus_env(t), CorpusError, r"DEFERLAB_CORPUS names .* no MANIFEST"),
]


def _media(d: Any) -> Any:
    from deferlab.reference.system.config import PreprocessConfig

    return PreprocessConfig.from_media_proc_cfg(d)


def _profile(name: str) -> Any:
    from deferlab.reference.system.profiles import profile

    return profile(name)


def _policy(name: str) -> Any:
    from deferlab.reference.system.policies import get_policy

    return get_policy(name)


def _corpus_env(tmp: Path) -> Any:
    from deferlab.reference.oracle import corpus

    with patch.dict(os.environ, {corpus.ENV_VAR: str(tmp)}):
        return corpus.folders()


# --- reference: NaViT, gate, staging, placement, IPC counts -----------------------------------------------------------
def _navit(*a: Any) -> Any:
    from deferlab.reference.oracle.navit import resize_config

    return resize_config(*a)


def _navit_arrays(*a: Any) -> Any:
    from deferlab.reference.oracle.navit import resize_config_arrays

    return resize_config_arrays(*a)


def _gate(*a: Any, **kw: Any) -> Any:
    from deferlab.reference.oracle.gate import should_defer

    return should_defer(*a, **kw)


def _decide(*a: Any) -> Any:
    from deferlab.reference.oracle.gate import decide_arrays

    return decide_arrays(*a)


def _stage(x: Any, **kw: Any) -> Any:
    from deferlab.reference.oracle.stage import to_chw_uint8

    return to_chw_uint8(x, **kw)


def _assign(*a: Any) -> Any:
    from deferlab.reference.oracle.placement import assign

    return assign(*a)


def _ipc_total(*a: Any) -> Any:
    from deferlab.reference.oracle.ipc_counts import released_total

    return released_total(*a)


REFERENCE_ROWS = [
    Bad("navit width 0", lambda t: _navit(0, 10, _k3()), InputValueError, r"width must be an int >= 1, got 0"),
    Bad("navit width float", lambda t: _navit(1.5, 10, _k3()), InputTypeError, r"width must be an int"),
    Bad("navit height bool", lambda t: _navit(10, True, _k3()), InputTypeError, r"height must be an int"),
    Bad("navit width str", lambda t: _navit("7", 10, _k3()), InputTypeError, r"width must be an int"),
    Bad(
        "navit arrays float",
        lambda t: _navit_arrays([3.7], [5], _k3()),
        InputTypeError,
        r"widths must be integer arrays",
    ),
    Bad(
        "navit arrays bool",
        lambda t: _navit_arrays(np.array([True]), [4], _k3()),
        InputTypeError,
        r"widths must be integer arrays",
    ),
    Bad("navit arrays 0", lambda t: _navit_arrays([0], [4], _k3()), InputValueError, r"widths and heights .*>= 1"),
    Bad("gate config dict", lambda t: _gate([_u8(3, 2, 2)], {"patch_size": 14}), InputTypeError, r"PreprocessConfig"),
    Bad("gate transport None", lambda t: _gate([_u8(3, 2, 2)], _k3(), transport=None), InputTypeError, r"transport"),
    Bad("gate not a sequence", lambda t: _gate(_u8(3, 2, 2), _k3()), InputTypeError, r"images must be a sequence"),
    Bad("gate channels 0", lambda t: _decide(np.array([4]), np.array([4]), 0, _k3()), InputValueError, r"channels"),
    Bad("stage float32", lambda t: _stage(np.zeros((3, 4, 4), np.float32)), InputValueError, r"must be uint8"),
    Bad("stage int16", lambda t: _stage(np.zeros((3, 4, 4), np.int16)), InputValueError, r"must be uint8"),
    Bad("stage 1-D", lambda t: _stage(_u8(5)), InputValueError, r"2-D \(H, W\) or 3-D \(C, H, W\)"),
    Bad("stage 4-D", lambda t: _stage(_u8(1, 3, 4, 4)), InputValueError, r"2-D \(H, W\) or 3-D \(C, H, W\)"),
    Bad("stage empty", lambda t: _stage(_u8(3, 0, 4)), InputValueError, r"at least one pixel"),
    Bad("stage 2 channels", lambda t: _stage(_u8(2, 4, 4)), InputValueError, r"1, 3 or 4 channels"),
    Bad("stage 5 channels", lambda t: _stage(_u8(5, 4, 4)), InputValueError, r"1, 3 or 4 channels"),
    Bad("stage list", lambda t: _stage([[1, 2], [3, 4]]), InputTypeError, r"PIL.Image.Image"),
    Bad("stage path str", lambda t: _stage("image.png"), InputTypeError, r"PIL.Image.Image"),
    Bad("stage None", lambda t: _stage(None), InputTypeError, r"PIL.Image.Image"),
    Bad("stage over max_pixels", lambda t: _stage(_u8(3, 10, 10), max_pixels=99), InputValueError, r"max_pixels=99"),
    Bad(
        "stage PIL over max_pixels",
        lambda t: _stage(Image.new("RGB", (10, 10)), max_pixels=99),
        InputValueError,
        r"max_pixels=99",
    ),
    Bad("stage max_pixels 0", lambda t: _stage(_u8(3, 2, 2), max_pixels=0), InputValueError, r"max_pixels"),
    Bad("placement ranks 0", lambda t: _assign([1, 2], 0), InputValueError, r"num_ranks must be an int >= 1"),
    Bad("placement ranks float", lambda t: _assign([1, 2], 1.0), InputTypeError, r"num_ranks must be an int >= 1"),
    Bad("placement ranks bool", lambda t: _assign([1, 2], True), InputTypeError, r"num_ranks must be an int >= 1"),
    Bad("placement load < 0", lambda t: _assign([1, -2], 2), InputValueError, r"loads\[1\] must be a number >= 0"),
    Bad("ipc dp not divisor", lambda t: _ipc_total(4, 3), InputValueError, r"attn_dp_size 3 must divide tp_size 4"),
    Bad("ipc tp 0", lambda t: _ipc_total(0, 1), InputValueError, r"tp_size must be an int >= 1"),
]


# --- impl's front doors (the system under test's own input checks) -------------------------------------------------
def _processor(**kw: Any) -> Any:
    from deferlab.impl.processor import Processor

    return Processor(**kw)


def _deliver(*a: Any) -> Any:
    from deferlab.impl.transport import deliver

    return deliver(*a)


def _impl_assign(*a: Any) -> Any:
    from deferlab.impl.placement import assign_owners

    return assign_owners(*a)


def _materialize(tmp: Path, config: Any, indices: list[int]) -> Any:
    from deferlab.impl.model import materialize
    from deferlab.impl.processor import Processor

    items = Processor(_k3(), cuda_available=True, device="cpu").process([torch.zeros((3, 8, 8), dtype=torch.uint8)])
    return materialize(items.items, indices, config, device="cpu")


def _impl_preprocess(images: Any, config: Any) -> Any:
    from deferlab.impl.pipeline import preprocess

    return preprocess(images, config, device="cpu")


IMPL_ROWS = [
    Bad("Processor config int", lambda t: _processor(config=3), InputTypeError, r"config must be a PreprocessConfig"),
    Bad("Processor transport", lambda t: _processor(config=_k3(), transport="nvlink"), InputValueError, r"transport"),
    Bad(
        "Processor cuda str",
        lambda t: _processor(config=_k3(), cuda_available="yes"),
        InputTypeError,
        r"cuda_available must be a bool",
    ),
    Bad("Processor epd int", lambda t: _processor(config=_k3(), epd=1), InputTypeError, r"epd must be a bool"),
    Bad("deliver transport", lambda t: _deliver([], "tcp", 2), InputValueError, r"transport must be one of"),
    Bad("deliver ranks 0", lambda t: _deliver([], "cpu", 0), InputValueError, r"num_ranks must be an int >= 1, got 0"),
    Bad(
        "impl assign ranks 0", lambda t: _impl_assign([1], 0), InputValueError, r"num_ranks must be an int >= 1, got 0"
    ),
    Bad("impl assign load < 0", lambda t: _impl_assign([-1], 1), InputValueError, r"loads\[0\]"),
    Bad("materialize index", lambda t: _materialize(t, _k3(), [7]), InputValueError, r"owner_indices\[0\]=7"),
    Bad(
        "materialize no config",
        lambda t: _materialize(t, 14, [0]),
        InputTypeError,
        r"config must be the checkpoint's .*PreprocessConfig \(the owner's patch size comes from it\)",
    ),
    Bad(
        "impl preprocess config",
        lambda t: _impl_preprocess([torch.zeros((3, 4, 4), dtype=torch.uint8)], {"patch_size": 14}),
        InputTypeError,
        r"config must be a reference.system.config.PreprocessConfig",
    ),
]


# --- impl.sglang: the SGLang source to load -------------------------------------------------------------------------
def _sglang(spec: Any) -> Any:
    from deferlab.impl.sglang.sources import load

    return load(spec)


SGLANG_ROWS = [
    Bad(
        "sglang no such path",
        lambda t: _sglang(str(t / "nowhere")),
        SGLangSourceError,
        r"no such path; accepted: 'installed'",
    ),
    Bad(
        "sglang not a checkout",
        lambda t: _sglang(str(t)),
        SGLangSourceError,
        r"is not an SGLang checkout .*; accepted: 'installed' .* or a release version such as '0.5.23'",
    ),
    Bad(
        "sglang not a version",
        lambda t: _sglang("latest"),
        SGLangSourceError,
        r"'latest': neither 'installed', an existing",
    ),
]


API_ROWS = CONFIG_ROWS + REFERENCE_ROWS + IMPL_ROWS + SGLANG_ROWS
