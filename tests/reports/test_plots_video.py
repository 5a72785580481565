"""The video claims' strip figure (reports.report.plots.video) and versions' section of them (semantics §20)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from deferlab.reference.system.errors import InputValueError
from deferlab.reports.report.plots import video
from deferlab.reports.versions import pictures


def _record(differs: bool = True) -> dict:
    sides = [
        {"side": "vllm-0.34.0 (qwen3-vl, video)", "indices": [0, 39, 79, 119], "times": [0.6, 3.3], "cut": False,
         "note": ""},
        {"side": "TRAINED", "indices": [0, 40, 79, 119], "times": [0.65, 3.3], "cut": False, "note": ""},
        {"side": "CARD", "indices": None, "times": None, "cut": False, "note": "ValueError: nframes too small"},
    ]  # fmt: skip
    return {"kind": "video-strips", "frames": 120, "fps": 30.0, "request": "defaults", "differs": differs,
            "sides": sides}  # fmt: skip


def test_a_strip_is_a_png_with_a_row_per_side(tmp_path: Path) -> None:
    out = video.strips_png(_record(), "C16", tmp_path / "s.png")
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size[0] > 600 and im.size[1] > 200


@pytest.mark.parametrize(
    "bad", [None, {"kind": "tokens"}, {"kind": "video-strips", "frames": 1}, {**_record(), "sides": []}]
)
def test_a_record_that_is_not_a_strip_is_refused_in_one_line(bad, tmp_path: Path) -> None:
    with pytest.raises(InputValueError, match="video-strips|sides"):
        video.strips_png(bad, "x", tmp_path / "s.png")


def test_draw_skips_other_records_and_names_files_by_column(tmp_path: Path) -> None:
    drawn = video.draw([("qwen3-vl:vllm-0.34.0", "fails", _record()), ("qwen3-vl:0.5.23", "holds", None),
                        ("internvl:0.5.23", "fails", {"kind": "tokens"})], tmp_path)  # fmt: skip
    assert drawn == [("qwen3-vl:vllm-0.34.0", "video/qwen3-vl-vllm-0.34.0.png")]
    assert (tmp_path / "video" / "qwen3-vl-vllm-0.34.0.png").is_file()


def test_versions_draws_the_c16_records_and_shows_them(tmp_path: Path) -> None:
    doc = {"verdicts": {"C16": {"qwen3-vl:vllm-0.34.0": "fails"}},
           "figures": {"qwen3-vl:vllm-0.34.0": {"C16": _record()}, "kimi-k3:0.5.23": {}}}  # fmt: skip
    drawn = pictures.video_strips(doc, tmp_path)
    text = "\n".join(pictures.markdown(drawn))
    assert "![qwen3-vl:vllm-0.34.0 frames taken](video/qwen3-vl-vllm-0.34.0.png)" in text
    assert pictures.markdown([]) == []


def test_the_report_lists_a_figure_per_strip(tmp_path: Path) -> None:
    rows = [{"id": "C16", "policy": "qwen3-vl:VLLM", "verdict": "fails", "figure": _record()},
            {"id": "C17", "policy": "qwen3-vl:VLLM", "verdict": "fails", "figure": _record()}]  # fmt: skip
    found = video.report_figures(rows, tmp_path)
    assert [f["file"] for f in found] == ["video/qwen3-vl-VLLM.png"]


def test_a_c20_record_is_drawn_side_by_side(tmp_path: Path) -> None:
    import numpy as np

    trained = np.zeros((11, 17, 3), np.uint8)
    served = trained.copy()
    served[3:5, 4:9] = 255  # a white band where the trained decode kept the colour
    record = {"kind": "bytes-side-by-side", "class": "RGBA PNG 17x11", "side": "VLLM", "trained": trained.tolist(),
              "served": served.tolist()}  # fmt: skip
    drawn = video.draw([("qwen3-vl:vllm-0.34.0", "fails", record)], tmp_path)
    assert drawn == [("qwen3-vl:vllm-0.34.0", "bytes/qwen3-vl-vllm-0.34.0.png")]
    with Image.open(tmp_path / "bytes" / "qwen3-vl-vllm-0.34.0.png") as im:
        assert im.size == (900, 360)
    rows = [{"id": "C20", "policy": "qwen3-vl:VLLM", "verdict": "fails", "figure": record}]
    assert [f["file"] for f in video.report_figures(rows, tmp_path)] == ["bytes/qwen3-vl-VLLM.png"]
