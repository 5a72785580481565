"""Each defect finding's picture (issue 32 item 5), drawn by `deferlab findings` from a constructed versions-like
document: the token map (C13's impact ``map``), the levels (C14's impact ``pixels``), the frame strips (a video
sequence finding's recorded figure), the decoded pair (C20's recorded figure); a finding with nothing to draw, a
crash and a record that cannot be drawn each say why. No engine runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deferlab.reference.system.errors import InputValueError
from deferlab.reports.cli import main
from deferlab.reports.findings import pictures, plots, render
from deferlab.reports.findings.group import group

PNG = b"\x89PNG\r\n\x1a\n"
SIZES = [112, 224, 336, 448, 560, 672]


def _column(engine: str, version: str, family: str) -> dict[str, Any]:
    return {"release": version, "engine": engine, "version": version, "family": family, "path": None}


def _doc(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """A versions-like document from cells: column, claim, failure, provenance step, impact, figure."""
    doc: dict[str, Any] = {"schema_version": 1, "columns": {}, "verdicts": {}, "failure_groups": [], "errors": {}}
    doc.update({k: {} for k in ("evidence", "provenance", "signatures", "counterexamples", "impact", "figures")})
    for c in cells:
        col, claim = c["column"], c["claim"]
        doc["columns"][col] = _column(c.get("engine", "sglang"), c.get("version", "0.5.23"), c["family"])
        doc["verdicts"].setdefault(claim, {})[col] = "fails"
        doc["failure_groups"].append({"claim": claim, "where": [col], "failure": c["failure"]})
        doc["evidence"].setdefault(col, {})[claim] = c.get("evidence", "")
        doc["provenance"].setdefault(col, {})[claim] = {f"x ({c['family']}, served): {c['step']}": c["function"]}
        for key, value in (("impact", c.get("impact")), ("figures", c.get("figure")), ("counterexamples", c.get("ce"))):
            if value is not None:
                doc[key].setdefault(col, {})[claim] = value
    return doc


def _token_map() -> dict[str, Any]:
    trained = [[256 * (1 + (w * h > 448 * 448)) for w in SIZES] for h in SIZES]
    served = [row[:] for row in trained]
    served[3][3] = 2560  # 448x448: ten tiles against one
    served[0][0] = plots.REFUSED  # refused by the engine only
    return {"kind": "token-map", "widths": SIZES, "heights": SIZES, "served": served, "trained": trained}


def _levels() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    trained = rng.integers(0, 256, (3, 300))
    served = trained.copy()
    served[:, 120:140] = 255  # alpha composited onto white in one band
    return {"compared": 900, "differ": 60, "max_levels": 255, "psnr_db": 14.3, "bf16_differ": 58,
            "max_bf16_ulps": 96.0, "input": "RGBA 20x15", "served_levels": served.tolist(),
            "trained_levels": trained.tolist()}  # fmt: skip


GEOMETRY = {
    "column": "internvl:0.5.23", "claim": "C13", "family": "internvl", "step": "tiling", "ce": [448, 448],
    "function": "real: sglang.srt.multimodal.processors.internvl.InternVLProcessor.dynamic_preprocess",
    "failure": "AssertionError: [448x448]: 1344x1344 grid (3, 3, 10) 2560 tokens != checkpoint's 448x448 grid "
               "(1, 1, 1) 256 tokens",
    "evidence": "exhaustive: 36 sizes; 1 sizes differ",
}  # fmt: skip
PIXELS = {
    "column": "qwen2.5-vl:0.5.23", "claim": "C14", "family": "qwen2.5-vl", "step": "serve",
    "function": "real: sglang.srt.multimodal.processors.qwen_vl.QwenVLImageProcessor.prepare_artifact_batch",
    "failure": "AssertionError: [RGBA 20x15] level 255 served, 0 trained; up to 255 levels off",
}  # fmt: skip
STRIPS = {
    "kind": "video-strips", "frames": 10, "fps": 5.0, "request": "defaults", "differs": True,
    "sides": [{"side": "sglang-0.5.23 (qwen3-vl, video)", "indices": [0, 3, 6, 9], "times": [0.3, 1.5]},
              {"side": "TRAINED", "indices": [0, 2, 5, 9], "times": [0.2, 1.4]}],
}  # fmt: skip
VIDEO = {
    "column": "qwen3-vl:0.5.23", "claim": "C16", "family": "qwen3-vl", "step": "sampling", "figure": STRIPS,
    "function": "real: sglang.srt.multimodal.processors.qwen_vl.smart_nframes",
    "failure": "AssertionError: [10@5.0 64x48] frames taken differ from the trained side's: [0, 3] != [0, 2]",
}  # fmt: skip
DECODE = {
    "column": "gemma3:vllm-0.34.0", "claim": "C20", "family": "gemma3", "step": "load", "engine": "vllm",
    "version": "0.34.0", "function": "real: vllm.multimodal.media.connector.MediaConnector.fetch_image",
    "failure": "AssertionError: [P PNG tRNS 17x11] 31 of 187 pixels differ from the trained side's",
    "figure": {"kind": "bytes-side-by-side", "class": "P PNG tRNS 17x11", "side": "VLLM",
               "trained": np.full((7, 12, 3), 40, np.uint8).tolist(),
               "served": np.pad(np.full((3, 4, 3), 255, np.uint8), ((2, 2), (4, 4), (0, 0)), constant_values=40).tolist()},
}  # fmt: skip
CRASH = {
    "column": "0.5.23", "claim": "C11", "family": "kimi-k3", "step": "materialize",
    "function": "real: KimiK3ForConditionalGeneration.get_image_feature",
    "failure": "IndexError: index 3 is out of bounds for dimension 0 with size 3",
}  # fmt: skip


def _draw(tmp_path: Path, *cells: dict[str, Any]) -> dict[str, Any]:
    doc = _doc(list(cells))
    result = render.document(group(doc), "constructed")
    pictures.draw(doc, result, tmp_path)
    return result


def _only(result: dict[str, Any]) -> dict[str, Any]:
    (found,) = result["findings"]
    return found


def _is_picture(path: Path) -> None:
    assert path.is_file(), path
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000, (path, len(data))


@pytest.mark.parametrize(
    ("cell", "impact"),
    [(GEOMETRY, {"map": _token_map()}), (PIXELS, {"pixels": _levels()}), (VIDEO, None), (DECODE, None)],
    ids=["token map", "levels", "frame strips", "decoded pair"],
)
def test_each_kind_of_defect_finding_gets_its_picture(tmp_path: Path, cell: dict, impact: dict | None) -> None:
    found = _only(_draw(tmp_path, {**cell, "impact": impact} if impact else cell))
    assert found["severity"] in ("sequence", "tower-input")
    assert found["picture"] == "F1.png" and found["no_picture"] is None
    _is_picture(tmp_path / "F1.png")
    assert render.picture_line(found) == "**Picture.** ![F1](F1.png)"


@pytest.mark.parametrize(
    ("cell", "why"),
    [
        (GEOMETRY, "no token map in C13's impact (`impact.map`) for internvl:0.5.23"),
        (PIXELS, "no pixel levels in C14's impact (`impact.pixels.served_levels`) for qwen2.5-vl:0.5.23"),
        (
            {
                **PIXELS,
                "impact": {
                    "pixels": {k: v for k, v in _levels().items() if k not in ("served_levels", "trained_levels")}
                },
            },
            "no pixel levels in C14's impact",
        ),
        (CRASH, "a crash: the exception is the evidence"),
        ({**VIDEO, "figure": None}, "no frame strips recorded"),
    ],
    ids=["C13 without a map", "C14 without pixels", "C14 pixels without levels", "crash", "video without strips"],
)
def test_a_finding_without_a_picture_says_why(tmp_path: Path, cell: dict, why: str) -> None:
    found = _only(_draw(tmp_path, cell))
    assert found["picture"] is None and found["no_picture"].startswith(why), found["no_picture"]
    assert not list(tmp_path.glob("*.png"))
    assert render.picture_line(found) == f"**Picture.** no picture: {found['no_picture']}"


def test_a_record_that_cannot_be_drawn_is_a_reason_not_a_failure(tmp_path: Path) -> None:
    broken = {"kind": "token-map", "widths": [1, 2], "heights": [1], "served": [[1]], "trained": [[1]]}
    found = _only(_draw(tmp_path, {**GEOMETRY, "impact": {"map": broken}}))
    assert found["picture"] is None
    assert found["no_picture"].startswith("the recorded figure cannot be drawn (InputValueError: token map served")


def test_findings_md_links_each_picture_and_says_why_for_the_others(tmp_path: Path) -> None:
    doc = _doc([{**GEOMETRY, "impact": {"map": _token_map()}}, CRASH, PIXELS])
    (tmp_path / "versions.json").write_text(json.dumps(doc))
    assert main(["findings", str(tmp_path / "versions.json"), "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "findings.json").read_text())
    md = (tmp_path / "out" / "findings.md").read_text()
    by_claim = {f["claims"][0]: f for f in result["findings"]}
    assert [f["severity"] for f in result["findings"]] == ["crash", "sequence", "tower-input"]
    geometry = by_claim["C13"]
    _is_picture(tmp_path / "out" / geometry["picture"])
    assert f"![{geometry['id']}]({geometry['picture']})" in md
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == [geometry["picture"]]
    for claim in ("C11", "C14"):
        entry = md.split(f"### [{by_claim[claim]['severity']}]", 1)[1].split("\n### ", 1)[0]
        assert f"**Picture.** no picture: {by_claim[claim]['no_picture']}" in entry
    assert md.count("**Picture.**") == 3
    lines = render.summary(result, linked=True).splitlines()  # what versions.md's findings section can link
    assert [x.endswith(f" ([picture]({geometry['picture']}))") for x in lines[1:]] == [False, True, False]
    assert "([picture]" not in render.summary(result)


def test_the_token_map_is_refused_in_one_line_when_its_shape_is_wrong(tmp_path: Path) -> None:
    bad = {**_token_map(), "served": [[1, 2]]}
    with pytest.raises(
        InputValueError, match=r"^token map served has shape \(1, 2\), not \(heights, widths\) \(6, 6\)"
    ):
        plots.token_map_png(bad, "t", tmp_path / "x.png")
    with pytest.raises(InputValueError, match="kind 'other'"):
        plots.token_map_png({"kind": "other"}, "t", tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_the_levels_picture_crops_to_the_differing_elements() -> None:
    differ = np.zeros((3, 1000), bool)
    differ[1, 500:520] = True
    assert plots._window(differ) == (500 - plots.MARGIN, 520 + plots.MARGIN)
    differ[2, 900] = True  # further than WINDOW from the first: the first ones are shown
    assert plots._window(differ) == (500 - plots.MARGIN, 500 - plots.MARGIN + plots.WINDOW)
    assert plots._window(np.zeros((3, 40), bool)) == (0, 40)  # none differs: the start, whole when short


def test_a_linear_size_grid_stays_linear_and_a_geometric_one_is_logarithmic() -> None:
    assert not plots._logarithmic(np.arange(112, 2241, 56, dtype=float))
    assert plots._logarithmic(np.array([16.0, 32, 64, 128, 256, 512, 1024, 2048]))
    assert not plots._logarithmic(np.array([100.0, 200, 400]))  # within a decade
