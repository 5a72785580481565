"""The served step per model family (semantics §18) and the worst-image crop: fast tests on fake family paths
that serve through the trained side itself, and one end-to-end run of ``report --vllm 0.34.0 --model qwen3-vl``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from deferlab.reference.oracle import skew as oracle_skew
from deferlab.reference.oracle.trained import Trained, config
from deferlab.reference.system.profiles import profile
from deferlab.reports.report.plots import served as plots_served
from deferlab.reports.report.served import family, images, report, skew
from deferlab.reports.report.served.paths import RunPaths
from deferlab.reports.report.served.render import served_section

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
QWEN = config("qwen3-vl")
KIMI = profile("kimi-k3")  # the run's config (Kimi-K3's); each family's table runs under its own
CLASSES = ("RGB", "RGBA partly transparent", images.ARRAY_CLASS)


def _worst(diff: np.ndarray) -> skew.Worst:
    """A worst image of ``diff``'s shape (H, W): grey levels on the trained side, ``+ diff`` served."""
    table = np.tile(np.arange(256, dtype=np.float32) / 255.0, (3, 1))
    trained = np.full((3, *diff.shape), 100, np.int64)
    served = trained + diff[None]
    values = (table[0][trained], table[0][served])
    return skew.Worst("strip", values[0], values[1], table, table, np.repeat(diff[None], 3, 0), int(diff.max()))


def test_crop_of_a_long_strip_is_the_region_that_differs() -> None:
    """A 9 x 7400 image differing at one end is cut to a few dozen pixels there, not drawn as the whole strip;
    the caption names the region and the full size; cropping twice is cropping once."""
    diff = np.zeros((7400, 9), np.int64)
    diff[7395:7398, 2:4] = 7
    x0, y0, x1, y1 = skew.crop_box(diff.astype(np.uint8))
    assert 0 <= x0 < 2 and 4 < x1 <= 9 and y0 <= 7395 and y1 >= 7398 and (y1 - y0) * (x1 - x0) < 20 * 9
    cut = _worst(diff).cropped()
    assert cut.trained.shape == cut.served.shape == (y1 - y0, x1 - x0, 3) and cut.diff.max() == 7
    assert cut.crop_text() == f"x {x0}-{x1}, y {y0}-{y1} of 9x7400" and cut.cropped() is cut


def test_crop_is_capped_and_its_aspect_bounded_and_no_difference_is_the_whole_image() -> None:
    """A strip differing all along is cut to a window around its largest difference (at most `CROP_LIMIT`, sides
    within `CROP_RATIO`:1 where the image allows); an image without a difference is kept whole."""
    diff = np.ones((7400, 9), np.uint8)
    diff[5000, 4] = 9
    x0, y0, x1, y1 = skew.crop_box(diff)
    assert (x0, x1) == (0, 9) and y1 - y0 <= skew.CROP_RATIO * 9 and y0 <= 5000 < y1
    wide = np.ones((300, 500), np.uint8)
    x0, y0, x1, y1 = skew.crop_box(wide)
    assert x1 - x0 == y1 - y0 == skew.CROP_LIMIT
    assert skew.crop_box(np.zeros((7400, 9), np.uint8)) == (0, 0, 9, 7400)


def test_worst_figure_of_a_strip_is_cropped_and_legible(tmp_path: Path) -> None:
    """Kimi-K3's figures crop too: the PNG of a 9 x 7400 worst image is drawn from its cropped region."""
    diff = np.zeros((7400, 9), np.int64)
    diff[10:14, 3:6] = 40
    col = skew.Column("fake (served)", "FAKE", "served", "fake", "float32", False)
    col.cells["RGB"] = skew.Cell(images=1, served=1, max_levels=40, worst=_worst(diff))
    out = plots_served.worst_cases(col, tmp_path / "w.png")
    assert out is not None and out.read_bytes().startswith(PNG_MAGIC)


class FakeFamilyPath:
    """A Qwen3-VL path over the trained side itself: ``shift`` levels added where the level is even."""

    family, dtype, real_code, path = "qwen3-vl", "float32", False, "served"

    def __init__(self, name: str, shift: int = 0) -> None:
        self.name = self.label = self.system = name
        self.shift, self.trained = shift, Trained("qwen3-vl")

    def levels(self, cfg: Any) -> np.ndarray:
        return self.trained.levels(cfg)

    def serve(self, imgs: list[Any], cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        imgs = [Image.fromarray(i) if isinstance(i, np.ndarray) else i for i in imgs]
        values, grids = self.trained.serve(imgs, cfg)
        if not self.shift:
            return values, grids
        table = self.levels(cfg)
        lv = oracle_skew.recover_levels(values.transpose(1, 0, 2), table)  # (C, N, L)
        moved = np.where(lv % 2 == 0, np.clip(lv.astype(int) + self.shift, 0, 255), lv)
        return np.stack([table[c][moved[c]] for c in range(3)], axis=1).astype(np.float32), grids


def _samples() -> dict[str, list[images.Sample]]:
    return {c: images.generated(c, 1)[:1] for c in CLASSES}


def test_family_table_cells_and_layout() -> None:
    """An exact family path is bitwise; a shifted one shows its shift; the worst image is the picture the patches
    cover (the resized image, first frame), cut to where it differs."""
    cols = family.family_table([FakeFamilyPath("exact"), FakeFamilyPath("shift2", 2)], "qwen3-vl", QWEN,
                               _samples(), lambda _m: None)  # fmt: skip
    exact, shifted = (c.to_dict() for c in cols)
    for cls in CLASSES:
        assert exact["cells"][cls]["bitwise_share"] == 1.0 and exact["cells"][cls]["max_levels"] == 0, cls
        assert shifted["cells"][cls]["max_levels"] == 2 and shifted["cells"][cls]["grid_agreement"] == 1.0
    sample = _samples()["RGB"][0]
    values, grid = Trained("qwen3-vl").serve([sample.image], QWEN)
    picture = family.layout(values, grid[0], QWEN)
    assert picture.shape == (3, grid[0][1] * QWEN.patch_size, grid[0][2] * QWEN.patch_size)
    assert cols[0].family == "qwen3-vl" and cols[1].cells["RGB"].worst.crop is not None


def test_served_step_per_family_with_n_a_lines_figures_and_markdown(tmp_path: Path, monkeypatch: Any) -> None:
    """``--model qwen3-vl,gemma3 --sglang 0.5.23``: one table per (family, engine) from the engine's child, an
    n/a line for the family it does not serve (the registry's reason), no Kimi-K3 table when it is not asked;
    the figures per family; report.md's sections."""
    calls = []

    def fake_child(engine: str, spec: str, names: list[str], work: Path, say: Any) -> tuple[dict[str, Any], None]:
        calls.append((engine, spec, names))
        cols = family.family_table([FakeFamilyPath("sglang-fake (qwen3-vl)", 3)], "qwen3-vl", QWEN, _samples(), say)
        return {"qwen3-vl": {"columns": cols, "classes": skew.table_dict([], _samples())["classes"]}}, None

    monkeypatch.setattr(report, "_run_child", fake_child)
    paths = RunPaths(sglang="0.5.23", _paths=[])
    doc, cols = report.served_step(KIMI, paths, lambda _m: None, ("qwen3-vl", "gemma3"), tmp_path)
    assert calls == [("sglang", "0.5.23", ["qwen3-vl"])] and doc["columns"] == []
    qwen, gemma = doc["families"]
    assert (qwen["family"], qwen["engine"], qwen["columns"][0]["cells"]["RGB"]["max_levels"]) == (
        "qwen3-vl",
        "sglang",
        3,
    )
    assert gemma["na"].startswith("n/a: no SGLang path for Gemma 3")
    md = "\n".join(served_section(doc))
    assert "Kimi-K3 not asked" in md and "#### Qwen3-VL on sglang 0.5.23" in md and "| RGB | 1 | 3 lv," in md
    assert gemma["na"] in md
    figs = plots_served.served_figures(doc, cols, tmp_path)
    assert [f["name"] for f in figs] == ["served_skew_qwen3-vl_sglang", "served_worst_qwen3-vl_sglang-fake-qwen3-vl"]
    assert all((tmp_path / f["file"]).read_bytes().startswith(PNG_MAGIC) for f in figs)


def test_a_child_that_fails_fails_the_step_in_one_line(tmp_path: Path, monkeypatch: Any) -> None:
    """An engine whose child fails: the step fails with its one line, the entry says why it has no table."""
    monkeypatch.setattr(report, "_run_child", lambda *_a: ({}, "vllm '0.34.0' family tables: the child exited 99"))
    with pytest.raises(report.StepFailed, match="exited 99") as e:
        report.served_step(KIMI, RunPaths(vllm="0.34.0", _paths=[]), lambda _m: None, ("internvl",), tmp_path)
    doc, _ = e.value.value
    assert doc["families"][0]["error"].endswith("exited 99") and "No table: vllm" in "\n".join(served_section(doc))


@pytest.mark.slow
@pytest.mark.extra("vllm")
@pytest.mark.extra("transformers")
def test_report_model_qwen3_vl_on_vllm_has_its_skew_table(tmp_path: Path) -> None:
    """Qwen3-VL on vLLM 0.34.0 (semantics §18.6, §18.7): C14 fails: torch's antialiased uint8 bicubic is not
    Pillow's, so every class differs by a few levels (at most §18.7's ~22 on noise; never bitwise) with the grids
    agreeing (C13 holds); transparency is composited onto white on both sides (vLLM's parser, transformers
    5.24.0), so those classes differ by the resize alone; the 9 x 7400 strips are refused by the trained side
    (side ratio over 200); vLLM refuses no class; both paths (device- and host-normalized) have a column."""
    from deferlab.impl.vllm import sources
    from deferlab.reports.cli import main

    out, spec = tmp_path / "r", "0.34.0"
    try:
        sources.load(spec)
    except sources.VLLMFetchError as e:
        pytest.skip(f"vLLM {spec} is neither cached nor fetchable: {e}")
    skip = ["--skip", "properties", "sweeps", "ipc", "sim"]  # the served step is what this test reads
    assert main(["report", "--vllm", spec, "--model", "qwen3-vl", "--out", str(out), "--baseline", "none", *skip]) == 0
    doc = json.loads((out / "report.json").read_text())
    (entry,) = doc["served"]["families"]
    assert entry["family"] == "qwen3-vl" and doc["served"]["columns"] == []
    cols = {c["path"]: c["cells"] for c in entry["columns"]}
    assert set(cols) == {"device-normalized", "host-normalized"}
    for cells in cols.values():
        for cls in ("RGB", "L", "RGBA opaque", "RGBA partly transparent", "P"):
            cell = cells[cls]
            assert cell["status"] == "ok" and cell["grid_agreement"] == 1.0, (cls, cell)
            assert 0 < cell["max_levels"] <= 22 and cell["bitwise_share"] < 1.0, (cls, cell)
        assert cells["RGB"]["checkpoint_refused"] == len(images.RESIZED)
        assert not [c for c in cells.values() if c["refused"]]
    names = {f["name"] for f in doc["figures"]}
    assert "served_skew_qwen3-vl_vllm" in names and any(n.startswith("served_worst_qwen3-vl_") for n in names)
    assert "#### Qwen3-VL on vllm 0.34.0" in (out / "report.md").read_text()


def test_a_familys_skew_row_says_which_claims_judge_it_when_its_pixels_are_not_compared() -> None:
    """The skew table's n/a line names the family's scope: normalization only (Step3-VL), geometry and
    normalization (MiniCPM-V 4.6 since its C13); a full family is compared (ERNIE-4.5-VL and MiMo-V2.5 since their
    pixels are restated, C14)."""
    from deferlab.reports.report.served import family

    asked = ["qwen3-vl", "minicpm-v-4.6", "step3-vl", "ernie-4.5-vl", "mimo-v2.5"]
    wanted, na = family.pixel_families("sglang", "0.5.23", asked)
    assert wanted == ["qwen3-vl", "ernie-4.5-vl", "mimo-v2.5"]
    assert na == {"minicpm-v-4.6": family.GEOMETRY_ONLY, "step3-vl": family.NORMALIZATION_ONLY}
