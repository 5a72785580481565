"""Every public entry point's bad inputs, in one table: the exception and the message each must give.

After Hypothesis's own ``tests/cover/test_direct_strategies.py``: instead of
a ``test_bad_inputs`` in every file, one list of rows, each naming the entry
point, the bad input, the exception class and a regex the message must
match. The regex carries what makes an error clear: the input's name, what
is wrong, and what is accepted. Every exception must belong to deferlab's
one family (`reference.errors.DeferlabInputError`, a `ValueError` or
`TypeError` subclass), so ``except ValueError`` keeps working and a caller
can tell "deferlab refused my input" from "the system under test failed".

Sections: the Python API (reference, impl, sim), config JSON files,
scenario TOML files, and the ``deferlab`` command line (exit status 2, the
message on stderr). A new public entry point adds its rows here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from reference.errors import (
    ConfigError,
    CorpusError,
    DeferlabInputError,
    InputTypeError,
    InputValueError,
    SourceError,
)

K3_DICT = {
    "patch_size": 14,
    "merge_kernel_size": 2,
    "in_patch_limit": 65536,
    "patch_limit_on_one_side": 512,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}


@dataclass(frozen=True)
class Bad:
    """One row: ``call(tmp)`` must raise ``error`` with a message matching ``match``."""

    id: str
    call: Callable[[Path], Any]
    error: type[Exception]
    match: str


def _cfg(**kw: Any) -> Any:
    from reference.config import PreprocessConfig

    return PreprocessConfig(**kw)


def _k3() -> Any:
    from reference.profiles import profile

    return profile("kimi-k3")


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
    from reference.config import PreprocessConfig

    return PreprocessConfig.from_media_proc_cfg(d)


def _profile(name: str) -> Any:
    from reference.profiles import profile

    return profile(name)


def _policy(name: str) -> Any:
    from reference.versions import get_policy

    return get_policy(name)


def _corpus_env(tmp: Path) -> Any:
    import os

    from reference import corpus

    old = os.environ.get(corpus.ENV_VAR)
    os.environ[corpus.ENV_VAR] = str(tmp)
    try:
        return corpus.folders()
    finally:
        if old is None:
            del os.environ[corpus.ENV_VAR]
        else:
            os.environ[corpus.ENV_VAR] = old


# --- config JSON files ------------------------------------------------------------------------------------------------
def _json_file(tmp: Path, text: str) -> Any:
    from reference.config import PreprocessConfig

    p = tmp / "preprocessor_config.json"
    p.write_text(text)
    return PreprocessConfig.from_json(p)


JSON_ROWS = [
    Bad("json missing file", lambda t: _missing_json(t), ConfigError, r"config file '.*nope.json' does not exist"),
    Bad("json is a directory", lambda t: _dir_json(t), ConfigError, r"is a directory, not a JSON file"),
    Bad("json invalid", lambda t: _json_file(t, "{not json"), ConfigError, r"is not valid JSON"),
    Bad("json array", lambda t: _json_file(t, "[1, 2]"), ConfigError, r"must hold a JSON object, got list"),
    Bad(
        "json wrong shape",
        lambda t: _json_file(t, json.dumps({"image_processor": {"patch_size": 16}})),
        ConfigError,
        r"neither a 'media_proc_cfg' object nor its keys",
    ),
    Bad(
        "json bad value",
        lambda t: _json_file(t, json.dumps({"media_proc_cfg": {**K3_DICT, "patch_size": -14}})),
        InputValueError,
        r"patch_size must be an int >= 1, got -14",
    ),
    Bad(
        "json typo key",
        lambda t: _json_file(t, json.dumps({**K3_DICT, "merge_kernal_size": 2})),
        ConfigError,
        r"unknown key\(s\) \['merge_kernal_size'\]",
    ),
]


def _missing_json(tmp: Path) -> Any:
    from reference.config import PreprocessConfig

    return PreprocessConfig.from_json(tmp / "nope.json")


def _dir_json(tmp: Path) -> Any:
    from reference.config import PreprocessConfig

    return PreprocessConfig.from_json(tmp)


# --- reference algorithms' front doors ----------------------------------------------------------------------------
def _navit(*a: Any) -> Any:
    from reference.navit import resize_config

    return resize_config(*a)


def _navit_arrays(*a: Any) -> Any:
    from reference.navit import resize_config_arrays

    return resize_config_arrays(*a)


def _gate(*a: Any, **kw: Any) -> Any:
    from reference.gate import should_defer

    return should_defer(*a, **kw)


def _decide(*a: Any) -> Any:
    from reference.gate import decide_arrays

    return decide_arrays(*a)


def _stage(x: Any, **kw: Any) -> Any:
    from reference.stage import to_chw_uint8

    return to_chw_uint8(x, **kw)


def _assign(*a: Any) -> Any:
    from reference.placement import assign

    return assign(*a)


def _ipc_total(*a: Any) -> Any:
    from reference.ipc_counts import released_total

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
    Bad("placement ranks float", lambda t: _assign([1, 2], 1.0), InputValueError, r"num_ranks must be an int >= 1"),
    Bad("placement ranks bool", lambda t: _assign([1, 2], True), InputValueError, r"num_ranks must be an int >= 1"),
    Bad("placement load < 0", lambda t: _assign([1, -2], 2), InputValueError, r"loads\[1\] must be a number >= 0"),
    Bad("ipc dp not divisor", lambda t: _ipc_total(4, 3), InputValueError, r"attn_dp_size 3 must divide tp_size 4"),
    Bad("ipc tp 0", lambda t: _ipc_total(0, 1), InputValueError, r"tp_size must be an int >= 1"),
]


# --- impl's front doors (the system under test's own input checks) -------------------------------------------------
def _processor(**kw: Any) -> Any:
    from impl.processor import Processor

    return Processor(**kw)


def _deliver(*a: Any) -> Any:
    from impl.transport import deliver

    return deliver(*a)


def _impl_assign(*a: Any) -> Any:
    from impl.placement import assign_owners

    return assign_owners(*a)


def _materialize(tmp: Path, config: Any, indices: list[int]) -> Any:
    from impl.model import materialize
    from impl.processor import Processor

    items = Processor(_k3(), cuda_available=True, device="cpu").process([torch.zeros((3, 8, 8), dtype=torch.uint8)])
    return materialize(items.items, indices, config, device="cpu")


def _impl_preprocess(images: Any, config: Any) -> Any:
    from impl.pipeline import preprocess

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
    Bad("deliver ranks 0", lambda t: _deliver([], "cpu", 0), InputValueError, r"num_ranks must be a positive int"),
    Bad("impl assign ranks 0", lambda t: _impl_assign([1], 0), InputValueError, r"num_ranks must be a positive int"),
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
        r"config must be a reference.config.PreprocessConfig",
    ),
]


def _sglang(spec: Any) -> Any:
    from impl.sglang.sources import load

    return load(spec)


SGLANG_ROWS = [
    Bad(
        "sglang no such path",
        lambda t: _sglang(str(t / "nowhere")),
        SourceError,
        r"no such path; accepted: 'installed'",
    ),
    Bad(
        "sglang not a checkout",
        lambda t: _sglang(str(t)),
        SourceError,
        r"is not an SGLang checkout .*; accepted: 'installed' .* or a release version such as '0.5.23'",
    ),
    Bad(
        "sglang not a version", lambda t: _sglang("latest"), SourceError, r"'latest': neither 'installed', an existing"
    ),
]

API_ROWS = CONFIG_ROWS + JSON_ROWS + REFERENCE_ROWS + IMPL_ROWS + SGLANG_ROWS


@pytest.mark.parametrize("row", API_ROWS, ids=[r.id for r in API_ROWS])
def test_python_entry_point_refuses_clearly(row: Bad, tmp_path: Path) -> None:
    """The row's call raises its exception, in deferlab's family, with a message naming input and what is accepted."""
    with pytest.raises(row.error, match=row.match) as info:
        row.call(tmp_path)
    assert isinstance(info.value, DeferlabInputError), f"{type(info.value).__mro__} is outside the error family"
    assert isinstance(info.value, ValueError | TypeError), "the family keeps ValueError / TypeError handlers working"
    assert "\n" not in str(info.value), f"a front-door message is one line: {info.value}"


def test_row_ids_are_unique() -> None:
    """Each row names one case (a duplicate id would hide a row in the report)."""
    ids = [r.id for r in API_ROWS + CLI_ROWS]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# --- the command line: exit status 2, the message on stderr -------------------------------------------------------
@dataclass(frozen=True)
class BadCli:
    id: str
    argv: Callable[[Path], list[str]]
    match: str


def _write(tmp: Path, name: str, text: str) -> str:
    p = tmp / name
    p.write_text(text)
    return str(p)


CLI_ROWS = [
    BadCli("report profile", lambda t: ["report", "--profile", "fast"], r"--profile must be one of 'dev', 'ci'"),
    BadCli("report preset", lambda t: ["report", "--preset", "kimi-k9"], r"--preset: unknown profile 'kimi-k9'"),
    BadCli("report config missing", lambda t: ["report", "--config", str(t / "m.json")], r"--config: .*does not exist"),
    BadCli(
        "report config json",
        lambda t: ["report", "--config", _write(t, "b.json", "{x")],
        r"--config: config file .* not valid JSON",
    ),
    BadCli(
        "report config value",
        lambda t: ["report", "--config", _write(t, "v.json", json.dumps({**K3_DICT, "patch_size": 0}))],
        r"--config: patch_size must be an int >= 1",
    ),
    BadCli(
        "report config and preset",
        lambda t: ["report", "--preset", "kimi-k3", "--config", _write(t, "c.json", json.dumps(K3_DICT))],
        r"not allowed with",
    ),
    BadCli("report skip", lambda t: ["report", "--skip", "everything"], r"--skip: unknown step\(s\) everything"),
    BadCli(
        "report from-results",
        lambda t: ["report", "--from-results", str(t / "nowhere")],
        r"--from-results: .*does not exist",
    ),
    BadCli("report baseline missing", lambda t: ["report", "--baseline", str(t / "nb.json")], r"--baseline"),
    BadCli(
        "report baseline schema",
        lambda t: ["report", "--baseline", _write(t, "bs.json", json.dumps({"schema_version": 99}))],
        r"--baseline: .*schema_version",
    ),
    BadCli("report max side", lambda t: ["report", "--sweep-max-side", "0"], r"--sweep-max-side must be an int in 2"),
    BadCli("report limits", lambda t: ["report", "--sweep-limits", "0"], r"--sweep-limits must be an int >= 1"),
    BadCli("report out file", lambda t: ["report", "--out", _write(t, "f", "")], r"--out: .* is not a directory"),
    BadCli("sweep max side", lambda t: ["sweep", "--max-side", "100000"], r"--max-side must be an int in 2\.\.8192"),
    BadCli("baseline from", lambda t: ["baseline", "--from", str(t / "nothing.json")], r"--from: cannot read report"),
    BadCli("claims from-results", lambda t: ["claims", "--from-results", str(t / "nowhere")], r"--from-results"),
    BadCli("unknown command", lambda t: ["frobnicate"], r"invalid choice: 'frobnicate'"),
    BadCli("report sglang and impl", lambda t: ["report", "--sglang", "0.5.23", "--impl", "x"], r"not allowed with"),
    BadCli("versions not a version", lambda t: ["versions", "latest"], r"VERSION must look like 0\.5\.23"),
    BadCli("versions newest and list", lambda t: ["versions", "--newest", "0.5.23"], r"--newest takes no VERSION"),
    BadCli("versions profile", lambda t: ["versions", "--profile", "fast"], r"--profile must be one of"),
    BadCli(
        "versions baseline",
        lambda t: ["versions", "0.5.23", "--baseline", _write(t, "vb.json", "{}")],
        r"--baseline: .* is not a versions baseline",
    ),
]


@pytest.mark.parametrize("row", CLI_ROWS, ids=[r.id for r in CLI_ROWS])
def test_cli_refuses_clearly(row: BadCli, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The argument exits 2 before any work, and stderr names the option, the value and what is accepted."""
    from reports.cli import main

    assert main(row.argv(tmp_path)) == 2
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if x.startswith("deferlab: error:")]
    assert line, f"no 'deferlab: error:' line on stderr: {err!r}"
    assert any(__import__("re").search(row.match, x) for x in line), (row.match, line)
    assert not (tmp_path / "latest").exists()
