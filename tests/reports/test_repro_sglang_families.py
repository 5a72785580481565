"""Reproducers of the families SGLang serves with its own code (`reports.repro.sglang_families`, semantics §18.9),
from the recorded newest-release matrix (reports/example/versions-newest/versions.json): ERNIE-4.5-VL's geometry
(C13) and pixels (C14), MiMo-V2.5's geometry and pixels, PaddleOCR-VL's and GLM-4.1V's pixels, MiniCPM-V 4.6's
normalization (C15).
Each failing cell becomes a standalone file headed with its family and companions; its trained side is the oracle's;
run on SGLang 0.5.23 it fails with the difference deferlab recorded, and it passes where the served step is replaced
by the trained rule (so it can pass)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from deferlab.properties.strategies.served import make_image
from deferlab.reference.oracle import ernie45_vl, family_norm, glm4v, paddleocr, qwen
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.family_configs import family_profile, norm_of
from deferlab.reference.system.systems import path_label
from deferlab.reports.findings import render
from deferlab.reports.findings import repro as findings_repro
from deferlab.reports.findings.group import group
from deferlab.reports.repro import cli as repro
from deferlab.reports.repro import family_texts, qwen_pixels, sglang_families
from deferlab.reports.repro import qwen_pixels_texts as pixels
from deferlab.reports.repro import sglang_families_texts as texts
from deferlab.reports.repro.families import Column
from deferlab.reports.versions import columns as cols
from tests.reports.test_repro import outcomes

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example" / "versions-newest" / "versions.json"
RECORDED = json.loads(EXAMPLE.read_text())
CELLS = [
    ("ernie-4.5-vl:0.5.23", "C13"),
    ("mimo-v2.5:0.5.23", "C13"),
    ("ernie-4.5-vl:0.5.23", "C14"),
    ("mimo-v2.5:0.5.23", "C14"),
    ("paddleocr-vl:0.5.23", "C14"),
    ("minicpm-v-4.6:0.5.23", "C15"),
    ("glm-4.1v:0.5.23", "C14"),
]


def row(column: str, cid: str) -> dict:
    """The recorded ``cid`` row of ``column`` as a run records it."""
    c = cols.parse(column)
    return {"id": cid, "policy": path_label(c.engine, c.path, c.family), "verdict": "fails",
            "evidence": RECORDED["evidence"][column][cid], "counterexample": RECORDED["counterexamples"][column][cid],
            "provenance": RECORDED["provenance"][column][cid]}  # fmt: skip


def write(tmp: Path, cells: list[tuple[str, str]]) -> list[Path]:
    out = []
    for column, cid in cells:
        c = cols.parse(column)
        system = {"name": f"{c.engine}-{c.version}", "engine": c.engine, "kind": "wheel", "version": c.version}
        written, missing = repro.write_reproducers(
            [row(column, cid)], system, c.version, tmp, source="the recorded run", engine=c.engine
        )
        assert not missing and len(written) == 1, (column, cid, missing)
        out += written
    return out


def test_each_cell_becomes_a_headed_standalone_file(tmp_path: Path) -> None:
    assert all(RECORDED["verdicts"][cid][column] == "fails" for column, cid in CELLS)
    paths = write(tmp_path, CELLS)
    assert [p.name for p in paths] == [f"{cid}-{column.split(':')[0]}-sglang-0.5.23.py" for column, cid in CELLS]
    for path, (column, cid) in zip(paths, CELLS, strict=True):
        info, text = repro.read_header(path), path.read_text()
        assert (info["claim"], info["family"], info["engine"], info["spec"]) == (
            cid,
            column.split(":")[0],
            "sglang",
            "0.5.23",
        )
        assert info["companions"] == "transformers,torchvision"  # each module imports both (impl.sglang.families.PATHS)
        tree = ast.parse(text)
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(m.split(".")[0] == "deferlab" for m in imported), imported
        assert any(m.startswith("sglang.srt.multimodal.processors") for m in imported), imported
        assert f"def test_{cid.lower()}_the_served_" in text


def test_the_five_findings_get_their_scripts(tmp_path: Path) -> None:
    """The defect findings no template fitted (findings.md: ERNIE-4.5-VL's smart_resize and _load_single_item,
    MiMo-V2.5's smart_resize, MiniCPM-V 4.6's _preprocess_images, PaddleOCR-VL's prepare_artifact_batch) now each
    have a standalone script: no SGLang defect finding of the newest release is without one."""
    doc = json.loads(EXAMPLE.read_text())
    result = render.document(group(doc), "versions.json")
    findings_repro.write(doc, result, tmp_path, "versions.json")
    defects = [d for d in result["findings"] if d["severity"] not in ("float32-only", "cost")]
    ours = {
        d["function"].rsplit(".", 2)[-2]: d
        for d in defects
        if d["engine"] == "sglang" and any(f in d["families"] for f in ("ernie-4.5-vl", "mimo-v2.5", "minicpm-v-4.6", "paddleocr-vl"))
        and "C20" not in d["claims"]
    }  # fmt: skip
    assert sorted(ours) == ["Ernie4_5_VLImageProcessor", "MiMoProcessor", "MiniCPMV4_6MultimodalProcessor",
                            "PaddleOCRVLImageProcessor", "ernie45_vl"], sorted(ours)  # fmt: skip
    assert all(d["reproducer"] == f"{d['id']}-repro.py" for d in ours.values()), ours
    assert not [d["id"] for d in defects if d["engine"] == "sglang" and not d["reproducer"]]


@pytest.mark.parametrize(
    ("cid", "family", "ce", "change"),
    [
        ("C13", "internvl", [98, 1], {}),  # another family: its own fit
        ("C13", "ernie-4.5-vl", "AssertionError: something else", {}),  # no size recorded
        ("C14", "ernie-4.5-vl", ["uint8 array", 12, 10, 0], {}),  # not a class C14's family cases draw
        ("C14", "mimo-v2.5", ["RGB", 41, 10, 0], {}),  # larger than C14 draws
        ("C14", "paddleocr-vl", ["RGB", 12, 10, 0], {"provenance": {}}),  # the load step unrecorded
        ("C14", "qwen2.5-vl", ["RGB", 12, 10, 0], {}),  # the Qwen fit's
        ("C15", "minicpm-v-4.6", "minicpm-v-4.6", {"failure": "AssertionError: 3 of 768 values differ after BF16"}),
        ("C15", "ernie-4.5-vl", "ernie-4.5-vl", {}),  # its own normalization: not this fit
    ],
)
def test_a_row_the_templates_do_not_fit_gets_none(cid: str, family: str, ce: object, change: dict) -> None:
    column = {"C13": "ernie-4.5-vl:0.5.23", "C14": "paddleocr-vl:0.5.23", "C15": "minicpm-v-4.6:0.5.23"}[cid]
    r = {**row(column, cid), **{k: v for k, v in change.items() if k != "failure"}}
    failure = change.get("failure", r["evidence"])
    fit = {"C13": sglang_families.own_c13, "C14": sglang_families.own_c14, "C15": sglang_families.minicpm_c15}[cid]
    assert fit(Column("sglang", family, None), ce, failure, r) is None
    assert fit(Column("sglang", family, "other-path"), ce, failure, r) is None


def _c13_namespace(family: str) -> dict:
    """The C13 file's trained rule and description (its constants, `texts.C13_TEST`), run here."""
    _, consts, _ = sglang_families.own_c13(Column("sglang", family, None), [1, 1], "", {})
    ns: dict = {}
    exec("import math\n" + consts + texts.C13_TEST.replace("${cid}", "c13"), ns)  # noqa: S102 - deferlab's own text
    return ns


@pytest.mark.parametrize(("family", "oracle"), [("ernie-4.5-vl", ernie45_vl), ("mimo-v2.5", qwen)])
def test_the_files_trained_resize_is_the_oracles(family: str, oracle: object) -> None:
    """The file's stated checkpoint rule gives deferlab's oracle's target (refusals included) on every size to 60 per
    side, thin sizes to 4096 and large ones; for MiMo-V2.5 the oracle is Qwen's rule on its `QwenVLConfig`."""
    cfg = family_profile(family)
    cfg = ernie45_vl.qwen_config(cfg, 2) if oracle is qwen else cfg
    card = _c13_namespace(family)["_card_target"]
    sizes = [(h, w) for h in range(1, 61) for w in range(1, 61)] + [(1, n) for n in range(1, 4097, 7)]
    sizes += [(n, 1) for n in range(150, 260)] + [(3000, 4000), (4096, 4096), (1080, 1920), (2048, 17), (4095, 3)]
    for h, w in sizes:
        try:
            want: object = oracle.resize_target(h, w, cfg)
        except InputValueError:
            want = "refused"
        try:
            got: object = card(h, w)
        except ValueError:
            got = "refused"
        assert got == want, (family, w, h)


def test_the_files_description_is_deferlabs() -> None:
    """The recorded minimal sizes read as deferlab's failure reads them (width x height, grid, tokens)."""
    ns = _c13_namespace("ernie-4.5-vl")
    assert ns["_described"](ns["_card_target"], 98, 1) == "560x28 grid (1, 2, 40) 20 tokens"
    assert ns["_described"](ns["_card_target"], 201, 1) == "refused"


def test_the_minicpm_files_trained_levels_are_the_checkpoints() -> None:
    _, consts, _ = sglang_families.minicpm_c15(Column("sglang", "minicpm-v-4.6", None), "", "differ from the checkpoint in FP32", {})  # fmt: skip
    ns: dict = {}
    exec("import numpy as np\n" + consts + family_texts.TRAINED_LEVELS, ns)  # noqa: S102 - deferlab's own text
    want = family_norm.checkpoint_levels(norm_of(family_profile("minicpm-v-4.6"))).T
    assert ns["_trained_levels"]().view(np.int32).tolist() == want.view(np.int32).tolist()


@pytest.mark.extra("transformers")  # the file's trained side is transformers' PIL backend (here 5.24.0)
@pytest.mark.parametrize(
    "column", ["ernie-4.5-vl:0.5.23", "mimo-v2.5:0.5.23", "paddleocr-vl:0.5.23", "glm-4.1v:0.5.23"]
)
@pytest.mark.parametrize("cls", ["RGBA partly transparent", "RGB", "P with tRNS"])
def test_the_files_trained_pixels_are_the_oracles(column: str, cls: str) -> None:
    """The file's CFG through transformers' PIL backend, on the checkpoint's RGB image, gives the grid and the levels
    whose normalization is deferlab's oracle's values for the family, bit for bit."""
    family = column.split(":")[0]
    _, consts, _ = sglang_families.own_c14(Column("sglang", family, None), [cls, 12, 10, 0], "", row(column, "C14"))
    ns: dict = {}
    exec(pixels.COMMON_IMPORTS + consts + qwen_pixels.image_code(cls, 12, 10, 0) + pixels.COMMON, ns)  # noqa: S102
    image = ns["_image"]()
    assert image.tobytes() == make_image(cls, 12, 10, 0).tobytes()
    levels, grid = ns["_trained_levels"](image)
    cfg = family_profile(family)
    oracle = {
        "ernie-4.5-vl": ernie45_vl.preprocess,
        "mimo-v2.5": ernie45_vl.mimo_preprocess,
        "glm-4.1v": glm4v.preprocess,
    }.get(  # fmt: skip
        family, paddleocr.preprocess
    )
    values, want_grid = oracle(image, cfg)
    table = family_norm.checkpoint_levels(norm_of(cfg))
    got = np.stack([table[levels[:, c], c] for c in range(3)], axis=1)
    assert (
        grid == want_grid[0].tolist() and got.tobytes() == np.asarray(values, np.float32).reshape(got.shape).tobytes()
    )


# --- run on the release --------------------------------------------------------------------------------------------
# A file with the served step replaced by the trained rule (appended: an autouse fixture of that file alone patches
# SGLang's function, or the file's own, for its test): SGLang's code around it runs as in the reproducer.
FIXED = {
    ("ernie-4.5-vl:0.5.23", "C13"): """
@pytest.fixture(autouse=True)
def _fixed(monkeypatch):  # the module's smart_resize is the checkpoint's rule
    monkeypatch.setattr(ernie45_vl, "smart_resize", lambda height, width, **_: _card_target(height, width))
""",
    ("mimo-v2.5:0.5.23", "C13"): """
@pytest.fixture(autouse=True)
def _fixed(monkeypatch):  # MiMoProcessor.smart_resize is the checkpoint's rule (its bounds too)
    monkeypatch.setattr(mimo_v2.MiMoProcessor, "smart_resize", staticmethod(lambda h, w, *_: _card_target(h, w)))
""",
    ("ernie-4.5-vl:0.5.23", "C14"): """
@pytest.fixture(autouse=True)
def _fixed(monkeypatch):  # the loader composites as the checkpoint does
    rgb = classmethod(lambda cls, data, modality, **_: _checkpoint_rgb(data))
    monkeypatch.setattr(ernie45_vl.Ernie4_5_VLImageProcessor, "_load_single_item", rgb)
""",
    ("mimo-v2.5:0.5.23", "C14"): """
@pytest.fixture(autouse=True)
def _fixed(monkeypatch):  # get_visual_transform resizes with Pillow's bicubic, as the checkpoint does
    def transform(cls, img, factor, min_pixels, max_pixels, device=None):
        h, w = cls.smart_resize(img.height, img.width, factor, min_pixels, max_pixels)
        resized = torch.from_numpy(np.asarray(img.convert("RGB").resize((w, h), Image.BICUBIC)).copy())
        return cls.standardize_batch(resized.permute(2, 0, 1).float()[None])[0], w, h

    monkeypatch.setattr(mimo_v2.MiMoProcessor, "get_visual_transform", classmethod(transform))
""",
    ("paddleocr-vl:0.5.23", "C14"): """
@pytest.fixture(autouse=True)
def _fixed(monkeypatch):  # SGLang's processor gets transformers' PIL backend (Pillow's resize)
    pil = AutoImageProcessor.from_pretrained
    monkeypatch.setitem(globals(), "AutoImageProcessor", types.SimpleNamespace(
        from_pretrained=lambda folder, **kw: pil(folder, **{"backend": "pil", **kw})))
""",
    ("glm-4.1v:0.5.23", "C14"): """
@pytest.fixture(autouse=True)
def _fixed(monkeypatch):  # the loader composites as the checkpoint does; the processor gets transformers' PIL backend
    rgb = classmethod(lambda cls, data, modality, **_: _checkpoint_rgb(data))
    monkeypatch.setattr(glm4v.Glm4vImageProcessor, "_load_single_item", rgb)
    pil = AutoImageProcessor.from_pretrained
    monkeypatch.setitem(globals(), "AutoImageProcessor", types.SimpleNamespace(
        from_pretrained=lambda folder, **kw: pil(folder, **{"backend": "pil", **kw})))
""",
    ("minicpm-v-4.6:0.5.23", "C15"): """
@pytest.fixture(autouse=True)
def _fixed(monkeypatch):  # _normalize rescales in float64 as the checkpoint does, then normalizes in float32
    def normalize(self, t):
        x = (t.double() * self.rescale_factor).float()
        return (x - self.image_mean) / self.image_std

    monkeypatch.setattr(minicpmv4_6.MiniCPMV4_6ImageProcessor, "_normalize", normalize)
""",
}
FIXED_IMPORTS = {
    "C13": "import pytest\n",
    "C14": "import pytest\nimport torch\n",
    "C15": "import pytest\nfrom sglang.srt.multimodal.processors import minicpmv4_6\n",
}
_C13 = re.compile(r"\[(\d+x\d+)\]: [^:]*: (.*) != checkpoint's (.*)$")
_C14 = re.compile(r"(\d+) of (\d+) values unexplained \(\d+ differ, up to (\d+) levels off; (first .*?)\)")
_C15 = re.compile(r"(\d+ of \d+ values differ from the checkpoint in FP32), (first level \d+)")


def _fixed(path: Path, cell: tuple[str, str]) -> Path:
    """A copy of ``path`` whose served step is the trained rule (`FIXED`), beside it."""
    fixed = path.with_name(path.stem + "-fixed.py")
    fixed.write_text(path.read_text() + "\n" + FIXED_IMPORTS[cell[1]] + FIXED[cell])
    return fixed


def _said(column: str, cid: str) -> list[str]:
    """What the file's failure must say, read off the recorded one."""
    evidence = RECORDED["evidence"][column][cid]
    if cid == "C13":
        size, served, want = _C13.search(evidence).groups()
        return [f"{size}: served {served} != checkpoint's {want}"]
    if cid == "C15":
        count, first = _C15.search(evidence).groups()
        return [f"{count} ({column.split(':')[0]}, default path; {first} "]
    count, total, most, first = _C14.search(evidence).groups()
    if column.startswith("mimo"):  # its count is of values off a level (deferlab's counts C15's float32 ulps too)
        return [f"of {total} values not a level within 1", f"up to {most} levels off; {first}; read back as"]
    return [f"{count} of {total} values more than 1 level off", f"up to {most} levels off; {first})"]


@pytest.mark.slow
@pytest.mark.extra("transformers")  # the files run SGLang's processors, which import transformers and torchvision
def test_the_files_fail_on_0_5_23_as_recorded_and_pass_fixed(tmp_path: Path) -> None:
    """One child on SGLang 0.5.23 (its transformers 5.19.0 and torchvision beside it): each of the six files fails
    with the recorded size, count and first element (ERNIE-4.5-VL 98x1 and its alpha dropped, MiMo-V2.5 6x1 and its
    float bilinear resize, PaddleOCR-VL torchvision's resize, MiniCPM-V 4.6's float32 rescale); each with the served
    step replaced by the trained rule passes."""
    paths = write(tmp_path, CELLS)
    fixed = [_fixed(p, cell) for p, cell in zip(paths, CELLS, strict=True)]
    got = outcomes(paths + fixed, "0.5.23", tmp_path)
    for path, (column, cid) in zip(paths, CELLS, strict=True):
        for said in _said(column, cid):
            assert said in got[path.name], (column, cid, said, got[path.name])
    assert all(got[p.name] == "passed" for p in fixed), {p.name: got[p.name] for p in fixed}
