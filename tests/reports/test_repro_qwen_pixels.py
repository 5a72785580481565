"""The Qwen columns' C14 reproducers (`reports.repro.qwen_pixels`, semantics §16.2, §18.2), from the recorded
newest-release matrix: each failing Qwen cell of SGLang and vLLM gets a standalone file that rebuilds deferlab's
image byte for byte, states the checkpoint's RGB step as deferlab's oracle runs it, and, run on the release it came
from, fails with the count and first element deferlab recorded."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from deferlab.properties.strategies.served import make_image
from deferlab.reference.oracle import qwen
from deferlab.reference.system.family_configs import family_profile, published_config
from deferlab.reference.system.served import IMAGE_CLASSES
from deferlab.reference.system.systems import path_label
from deferlab.reports.repro import cli as repro
from deferlab.reports.repro import qwen_pixels
from deferlab.reports.repro import qwen_pixels_texts as texts
from deferlab.reports.repro.families import Column
from deferlab.reports.versions import columns as cols
from tests.reports.test_repro import outcomes

RECORDED = json.loads(
    (Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json").read_text()
)
SGLANG_COLUMNS = ["qwen2.5-vl:0.5.23", "qwen3-vl:0.5.23"]
VLLM_COLUMNS = [f"{f}:vllm-0.34.0{p}" for f in ("qwen2.5-vl", "qwen3-vl") for p in ("", " host-normalized")]


def row(column: str) -> dict:
    """The recorded C14 row of ``column`` as a run records it."""
    c = cols.parse(column)
    return {"id": "C14", "policy": path_label(c.engine, c.path, c.family), "verdict": "fails",
            "evidence": RECORDED["evidence"][column]["C14"],
            "counterexample": RECORDED["counterexamples"][column]["C14"],
            "provenance": RECORDED["provenance"][column]["C14"]}  # fmt: skip


def write(tmp: Path, columns: list[str]) -> list[Path]:
    out = []
    for column in columns:
        c = cols.parse(column)
        system = {"name": f"{c.engine}-{c.version}", "engine": c.engine, "kind": "wheel", "version": c.version}
        written, missing = repro.write_reproducers(
            [row(column)], system, c.version, tmp, source="the recorded run", engine=c.engine
        )
        assert not missing and len(written) == 1, (column, missing)
        out += written
    return out


def _namespace(code: str) -> dict:
    """The script's image, RGB step and trained side, run here (no engine import): ``code`` and `COMMON`."""
    ns: dict = {}
    exec(texts.COMMON_IMPORTS + code + texts.COMMON, ns)  # noqa: S102 - deferlab's own template text
    return ns


def test_every_failing_qwen_c14_cell_gets_a_standalone_file(tmp_path: Path) -> None:
    assert all(RECORDED["verdicts"]["C14"][c] == "fails" for c in SGLANG_COLUMNS + VLLM_COLUMNS)
    for path in write(tmp_path, SGLANG_COLUMNS + VLLM_COLUMNS):
        info, text = repro.read_header(path), path.read_text()
        tree = ast.parse(text)
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(m.split(".")[0] == "deferlab" for m in imported), imported
        assert (
            info["engine"] in {m.split(".")[0] for m in imported} and info["companions"] == "transformers,torchvision"
        )
        assert "def test_c14_the_served_pixels_are_the_checkpoints" in text
    names = sorted(p.name for p in tmp_path.joinpath("repro").iterdir())
    assert "C14-qwen2.5-vl-sglang-0.5.23.py" in names and "C14-qwen3-vl-vllm-0.34.0-host-normalized.py" in names


def test_the_served_side_follows_the_recorded_path() -> None:
    """SGLang's Qwen2.5-VL default loads through _load_single_item first, Qwen3-VL's artifact path does not; vLLM's
    default path merges rescale and normalize off, its host path does not; a row that does not say gets no file."""
    assert qwen_pixels.sglang_served(row("qwen2.5-vl:0.5.23"))[1].startswith("LOAD_FIRST = True  #")
    assert qwen_pixels.sglang_served(row("qwen3-vl:0.5.23"))[1].startswith("LOAD_FIRST = False  #")
    device = qwen_pixels.vllm_served(row("qwen2.5-vl:vllm-0.34.0"))[1]
    assert "OVERRIDES = {'do_rescale': False, 'do_normalize': False}" in device
    assert qwen_pixels.vllm_served(row("qwen3-vl:vllm-0.34.0 host-normalized"))[1].startswith("OVERRIDES = {}  #")
    bare = {**row("qwen2.5-vl:0.5.23"), "provenance": {}}
    assert qwen_pixels.sglang_served(bare) is None and qwen_pixels.vllm_served(bare) is None


@pytest.mark.parametrize(
    ("family", "ce"),
    [
        ("internvl", ["RGBA partly transparent", 12, 10, 0]),  # another family: its own fit
        ("qwen2.5-vl", ["uint8 array", 12, 10, 0]),  # not a class C14's family cases draw
        ("qwen2.5-vl", ["RGB", 41, 10, 0]),  # larger than C14 draws
        ("qwen2.5-vl", ["RGB", 12, 10]),  # not a case
        ("qwen2.5-vl", "AssertionError: something else"),
    ],
)
def test_a_row_the_template_does_not_fit_gets_none(family: str, ce: object) -> None:
    r = row("qwen2.5-vl:0.5.23")
    assert qwen_pixels.qwen_c14(Column("sglang", family, None), ce, "", r) is None


@pytest.mark.extra("transformers")  # the file imports transformers at its top, as a reproducer runs beside it
@pytest.mark.parametrize("cls", IMAGE_CLASSES)
def test_the_file_draws_deferlabs_image_and_its_rgb_step_is_the_oracles(cls: str) -> None:
    """Every class, at sizes and seeds C14 draws: the file's image is deferlab's (mode, size, bytes, palette, key);
    its RGB step is deferlab's oracle of transformers 5.24.0's convert_to_rgb (itself checked against transformers)."""
    for width, height, seed in ((12, 10, 0), (1, 1, 7), (40, 3, 2**16), (17, 29, 123)):
        image = make_image(cls, width, height, seed)
        ns = _namespace(qwen_pixels.image_code(cls, width, height, seed))
        drawn = ns["_image"]()
        assert (drawn.mode, drawn.size, drawn.tobytes()) == (image.mode, image.size, image.tobytes()), (width, seed)
        assert drawn.getpalette() == image.getpalette() and drawn.info == image.info, (width, seed)
        assert ns["_checkpoint_rgb"](drawn).tobytes() == qwen.convert_rgb(image).tobytes(), (width, seed)


@pytest.mark.extra("transformers")
@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_the_files_trained_side_is_the_oracles_levels(family: str) -> None:
    """The file's trained side (transformers' PIL backend, here 5.24.0) gives the levels deferlab's oracle resizes
    to, in its patch layout, and the grid; checked on a transparent class, where the RGB step matters."""
    cfg = family_profile(family)
    consts = f"CFG = {published_config(family)!r}\n"
    ns = _namespace(consts + qwen_pixels.image_code("RGBA partly transparent", 12, 10, 0))
    image = ns["_image"]()
    got, grid = ns["_trained_levels"](image)
    new_h, new_w = qwen.resize_target(10, 12, cfg)
    levels = np.asarray(qwen.convert_rgb(image).resize((new_w, new_h), resample=cfg.resample))
    want = qwen.patchify(levels.transpose(2, 0, 1), cfg).astype(np.int16).reshape(len(got), 3, -1)
    assert grid == list(qwen.grid(10, 12, cfg)) and np.array_equal(got, want)


_RECORDED = re.compile(r"(\d+) of (\d+) values unexplained \(\d+ differ, up to (\d+) levels off; (first .*?)\)")


def _recorded(column: str) -> str:
    """'N of M values more than 1 level off ... up to K levels off; first patch ...' as the script says it, from
    the recorded failure of the counterexample."""
    m = _RECORDED.search(RECORDED["evidence"][column]["C14"])
    assert m is not None, column
    return m


@pytest.mark.slow
@pytest.mark.extra("transformers")  # the scripts run SGLang's processor path, which calls transformers
def test_the_sglang_files_fail_on_0_5_23_as_recorded(tmp_path: Path) -> None:
    """Qwen2.5-VL: the alpha of the partly transparent image dropped (27598 of 28224 values, up to 255 levels);
    Qwen3-VL: torch's resize against Pillow's (up to 2 levels): each the count and first element recorded."""
    paths = write(tmp_path, SGLANG_COLUMNS)
    got = outcomes(paths, "0.5.23", tmp_path)
    for column, path in zip(SGLANG_COLUMNS, paths, strict=True):
        m = _recorded(column)
        assert f"{m[1]} of {m[2]} values more than 1 level off" in got[path.name], (column, got[path.name])
        assert f"up to {m[3]} levels off; {m[4]})" in got[path.name], (column, got[path.name])


@pytest.mark.slow
@pytest.mark.extra("vllm")
def test_the_vllm_files_fail_on_0_34_0_as_recorded(tmp_path: Path) -> None:
    """Both paths of both families: the parser's composite and torch's resize against the checkpoint's, up to 2
    levels, the count and first element recorded (the host path's levels are the device path's); the file of a
    class vLLM serves within a level for Qwen2.5-VL (RGB 12x10, which the claim passed) passes there."""
    paths = write(tmp_path, VLLM_COLUMNS)
    agreeing = {**row(VLLM_COLUMNS[0]), "counterexample": ["RGB", 12, 10, 0]}
    system = {"name": "vllm-0.34.0", "engine": "vllm", "kind": "wheel", "version": "0.34.0"}
    (rgb,), _ = repro.write_reproducers([agreeing], system, "0.34.0", tmp_path / "rgb", source="t", engine="vllm")
    rgb = rgb.rename(tmp_path / "repro" / "C14-qwen2.5-vl-vllm-0.34.0-rgb.py")
    got = outcomes([*paths, rgb], "0.34.0", tmp_path, engine="vllm")
    assert got[rgb.name] == "passed", got[rgb.name]
    for column, path in zip(VLLM_COLUMNS, paths, strict=True):
        m = _recorded(column)
        assert f"{m[1]} of {m[2]} values more than 1 level off" in got[path.name], (column, got[path.name])
        assert f"up to {m[3]} levels off; {m[4]})" in got[path.name], (column, got[path.name])
