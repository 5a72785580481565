"""C15's reproducer for the vLLM classes that build ``FusedMMInputNorm`` themselves (`reports.repro.vllm_norm_direct`,
semantics §18.9), written from the recorded rows of Nemotron VL and Nano Nemotron VL on vLLM 0.34.0
(reports/example/versions-newest/versions.json).

The fit is tried as vLLM's reproducer set would try it (`families.render` and `cli.write_reproducers` with the
fit in vLLM's C15 tuple, patched in here where `engine_sets` does not name it yet). Fast tests: what it fits and
refuses, and that the file states the trained side and nothing of the served one; a stand-in ``vllm`` package
(the two classes' calls, the norm's arithmetic switchable) shows the file passes where the served values are the
checkpoint's and fails where the arithmetic or the arguments are not. The slow one runs the files on the real
0.34.0 through deferlab's loader: each fails with the recorded count and first level, and passes with the
release's own arguments once ``forward_native`` computes in the checkpoint's order.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from deferlab.reference.system.family_configs import family_profile, norm_of, published_config
from deferlab.reports.repro import cli as repro
from deferlab.reports.repro import engine_sets, families
from deferlab.reports.repro import vllm_norm_direct as direct
from tests.reports.test_repro import outcomes
from tests.reports.test_repro_families import RECORDED, rows, write

CACHE = Path.home() / ".cache" / "deferlab" / "vllm"
COLUMNS = {"nemotron-vl": "nemotron-vl:vllm-0.34.0", "nano-nemotron-vl": "nano-nemotron-vl:vllm-0.34.0"}
MODULES = {"nemotron-vl": "nemotron_vl", "nano-nemotron-vl": "nano_nemotron_vl"}
CLASSES = {"nemotron-vl": "LlamaNemotronVLForEmbedding", "nano-nemotron-vl": "NemotronH_Nano_VL_V2"}
RECORDED_COUNT = re.compile(r"(\d+) of 768 values differ from the checkpoint in FP32, first level (\d+)")


@pytest.fixture
def fitted(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's reproducer set with this fit in its C15 tuple (as `engine_sets` will name it; unchanged if it does)."""
    vllm = engine_sets.VLLM
    fits = vllm.family_fits["C15"]
    if direct.vllm_c15_direct not in fits:
        vllm = replace(vllm, family_fits={**vllm.family_fits, "C15": (*fits, direct.vllm_c15_direct)})
    real = families.repro_of
    monkeypatch.setattr(families, "repro_of", lambda engine: vllm if engine == "vllm" else real(engine))


def _row(family: str) -> dict:
    (row,) = [r for r in rows(COLUMNS[family]) if r["id"] == "C15"]
    return row


def _fit(row: dict, failure: str | None = None) -> tuple[str, str, str] | None:
    failure = repro.failure_text(str(row["evidence"])) if failure is None else failure
    return direct.vllm_c15_direct(families.Column.of(row, "vllm"), row["counterexample"], failure, row)


def _constants(code: str) -> dict:
    tree = ast.parse(code)
    return {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id.isupper()
    }


def _imports(code: str) -> set[str]:
    tree = ast.parse(code)
    found = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return found | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_the_fit_reads_the_class_and_its_module_off_the_provenance() -> None:
    """The two Nemotron rows name the class whose own call serves them; a ``build_mm_input_norm`` row (Gemma 3,
    Nemotron Parse) names none, and `families.vllm_c15` keeps those."""
    for family in COLUMNS:
        assert direct.own_call(_row(family)) == (CLASSES[family], f"vllm.model_executor.models.{MODULES[family]}")
    for column in ("gemma3:vllm-0.34.0", "nemotron-parse:vllm-0.34.0"):
        (row,) = [r for r in rows(column) if r["id"] == "C15"]
        assert direct.own_call(row) is None and _fit(row) is None
        assert families.vllm_c15(families.Column.of(row, "vllm"), None, repro.failure_text(row["evidence"]), row)


def test_the_fit_refuses_what_it_does_not_reproduce() -> None:
    """Another served path, another failure, a row without the provenance, a family deferlab publishes no config
    for: no file (the caller says no template fits)."""
    row = _row("nemotron-vl")
    assert _fit(row) is not None
    assert _fit({**row, "policy": row["policy"] + " host-normalized"}) is None
    assert _fit(row, "AssertionError: 3 of 768 values differ after BF16") is None
    assert _fit({**row, "provenance": {}}) is None
    assert _fit({**row, "policy": row["policy"].replace("nemotron-vl", "kimi-k3")}) is None


@pytest.mark.parametrize("family", sorted(COLUMNS))
def test_the_file_states_the_trained_side_and_reads_the_served_one_from_the_release(fitted: None, family: str) -> None:
    """Through `families.render`: the checkpoint's published config and statistics are written in (from
    `family_configs`, not imported at run time); the served arguments are not: the file imports the class's
    module and vLLM's config, nothing of deferlab, and names none of vLLM's constants."""
    row = _row(family)
    made = families.render("C15", row["counterexample"], repro.failure_text(row["evidence"]), "vllm", row)
    assert made is not None
    code, what, column = made
    assert what == families._WHAT["C15"] and column.family == family and column.path is None
    consts, norm = _constants(code), norm_of(family_profile(family))
    assert consts["CONFIG"] == published_config(family) and consts["MODEL_CLASS"] == CLASSES[family]
    assert (consts["MEAN"], consts["STD"]) == (list(norm.image_mean), list(norm.image_std))
    assert consts["RESCALE"] == norm.rescale_factor and consts["DO_RESCALE"] and consts["DO_NORMALIZE"]
    imported = _imports(code)
    assert {"vllm.config", f"vllm.model_executor.models.{MODULES[family]}"} <= imported
    assert not any(m.startswith("deferlab") for m in imported), imported
    statements = ast.unparse(ast.parse(code))  # the code without its comments (one quotes the published source)
    assert "SIGLIP" not in statements and "norm_mean=" not in statements  # the served arguments: the release's
    tests = [n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert tests == ["test_c15_the_served_normalization_is_the_checkpoints_in_fp32"]


def test_the_cli_writes_both_files_headed_for_vllm(fitted: None, tmp_path: Path) -> None:
    """`cli.write_reproducers` on the recorded columns: C15-<family>-vllm-0.34.0.py beside C20's, headed with
    the family, the --vllm option and no companions (the class's module imports under the loader alone)."""
    for family, column in COLUMNS.items():
        written, missing = write(tmp_path / family, column)
        assert [p.name for p in written] == [f"C15-{family}-vllm-0.34.0.py", f"C20-{family}-vllm-0.34.0.py"]
        assert missing == []
        info = repro.read_header(written[0])
        assert (info["family"], info["engine"], info["spec"], info["companions"]) == (family, "vllm", "0.34.0", "")


# --- a stand-in vllm: the classes' own calls, FusedMMInputNorm's arithmetic switchable ------------------------------
_NORM = """
import torch

SIGLIP_MEAN = (0.5, 0.5, 0.5)
SIGLIP_STD = (0.5, 0.5, 0.5)


class FusedMMInputNorm:
    layout = "pcl"

    def __init__(self, image_mean, image_std, rescale_factor):
        self.mean = torch.tensor(image_mean, dtype=torch.float32).view(1, 3, 1)
        self.std = torch.tensor(image_std, dtype=torch.float32).view(1, 3, 1)
        self.rescale = rescale_factor

    def forward_native(self, x, dtype):
        x3 = x.reshape(x.shape[0], 3, -1)
        if ORDER == "checkpoint":  # f32(f64(u) * rescale), then (x - mean) / std in float32
            y = ((x3.double() * self.rescale).float() - self.mean) / self.std
        else:  # vLLM 0.34.0's x * (rescale / std) + (-mean / std)
            y = x3 * (self.rescale / self.std) + (-self.mean / self.std)
        return y.reshape(x.shape).to(dtype)
"""
_CLASS = """

class {cls}:
    def __init__(self, config):
        self.input_norm = FusedMMInputNorm({call})
"""
_CALLS = {
    "nemotron-vl": "image_mean=list(SIGLIP_MEAN), image_std=list(SIGLIP_STD), rescale_factor=1 / 255",
    "nano-nemotron-vl": "image_mean=config.norm_mean, image_std=config.norm_std, rescale_factor=1.0 / 255.0",
}
_CONFIG = (
    "import contextlib\n\n\nclass CompilationConfig:\n    pass\n\n\nset_current_vllm_config = contextlib.nullcontext\n"
)


def _stand_in(root: Path, made: dict[str, tuple[str, str | None]]) -> Path:
    """A ``vllm`` package under ``root``: its config's two names, and each family's model module, ``made[family]``
    = (its norm's order, its class's call; None: a class that builds no norm itself)."""
    models = root / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    for folder in (root / "vllm", root / "vllm" / "model_executor", models):
        (folder / "__init__.py").write_text("")
    (root / "vllm" / "config.py").write_text(_CONFIG)
    for family, (order, call) in made.items():
        body = f"ORDER = {order!r}\n" + _NORM
        body += _CLASS.format(cls=CLASSES[family], call=call) if call else f"\n\nclass {CLASSES[family]}:\n    pass\n"
        (models / f"{MODULES[family]}.py").write_text(body)
    return root


def _run(files: list[Path], vllm_root: Path, xml: Path) -> dict[str, str]:
    """file stem -> "passed" or the failure's message, the files run by pytest as `deferlab repro` runs them
    (`cli.pytest_args`), on the stand-in."""
    env = {**os.environ, "PYTHONPATH": str(vllm_root), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", *repro.pytest_args(files, xml)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode in (0, 1) and xml.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    got = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        assert case.find("error") is None, case.find("error").get("message")
        failure = case.find("failure")
        (stem,) = [p.stem for p in files if case.get("classname").endswith(p.stem)]
        got[stem] = "passed" if failure is None else failure.get("message", "")
    return got


@pytest.mark.slow
def test_the_file_passes_where_the_served_values_are_the_checkpoints(fitted: None, tmp_path: Path) -> None:
    """On a stand-in vLLM (three runs, both files each): a norm computing in the checkpoint's order passes, with
    the arguments each class's call passes (Nano's from the stated config.json); vLLM's ``x*w + b`` fails with
    the recorded count and first level; Nano's class passing the SigLIP constants instead of config.json's fails;
    a class that builds no norm itself is one line saying so."""
    files = {f: write(tmp_path / "files" / f, c)[0][0] for f, c in COLUMNS.items()}
    vl, nano = (files[f].stem for f in COLUMNS)

    def run(name: str, made: dict[str, tuple[str, str | None]]) -> dict[str, str]:
        return _run(list(files.values()), _stand_in(tmp_path / name, made), tmp_path / f"{name}.xml")

    def recorded(family: str) -> str:
        count, level = RECORDED_COUNT.search(RECORDED["evidence"][COLUMNS[family]]["C15"]).groups()
        return f"{count} of 768 values differ from the checkpoint in FP32 ({family}, default path; first level {level} "

    got = run("a", {"nemotron-vl": ("checkpoint", _CALLS["nemotron-vl"]), "nano-nemotron-vl": ("vllm", _CALLS["nano-nemotron-vl"])})  # fmt: skip
    assert got[vl] == "passed" and recorded("nano-nemotron-vl") in got[nano], got
    got = run("b", {"nemotron-vl": ("vllm", _CALLS["nemotron-vl"]), "nano-nemotron-vl": ("checkpoint", _CALLS["nano-nemotron-vl"])})  # fmt: skip
    assert got[nano] == "passed" and recorded("nemotron-vl") in got[vl], got
    got = run("c", {"nemotron-vl": ("checkpoint", None), "nano-nemotron-vl": ("checkpoint", _CALLS["nemotron-vl"])})
    assert got[vl].startswith("LookupError: LlamaNemotronVLForEmbedding (vllm.model_executor.models.nemotron_vl) "), got
    assert "of 768 values differ from the checkpoint in FP32 (nano-nemotron-vl, default path; " in got[nano], got


# --- the real release --------------------------------------------------------------------------------------------------
_FIXED = '''

_unfixed_test = test_c15_the_served_normalization_is_the_checkpoints_in_fp32
del test_c15_the_served_normalization_is_the_checkpoints_in_fp32


def test_c15_passes_once_forward_native_computes_in_the_checkpoints_order():
    """The release's own class, built with its own arguments, its forward_native replaced for this test only by
    the checkpoint's order: f32(f64(u) * rescale), then (x - f32(mean)) / f32(std)."""
    from unittest import mock

    norm_class, real_init = served_module.FusedMMInputNorm, served_module.FusedMMInputNorm.__init__

    def init(self, image_mean, image_std, rescale_factor, **kwargs):
        real_init(self, image_mean, image_std, rescale_factor, **kwargs)
        self.stats = (torch.tensor(image_mean).view(1, 3, 1), torch.tensor(image_std).view(1, 3, 1), rescale_factor)

    def forward_native(self, x, dtype):
        mean, std, rescale = self.stats
        y = ((x.reshape(x.shape[0], 3, -1).double() * rescale).float() - mean) / std
        return y.reshape(x.shape).to(dtype)

    with mock.patch.object(norm_class, "__init__", init), mock.patch.object(norm_class, "forward_native", forward_native):
        _unfixed_test()
'''


@pytest.mark.slow
@pytest.mark.extra("vllm")
def test_each_file_fails_on_0_34_0_as_recorded_and_passes_with_the_checkpoints_arithmetic(
    fitted: None, tmp_path: Path
) -> None:
    """vLLM 0.34.0 through deferlab's loader, one child: each file fails with the recorded count and first level
    (Nemotron VL 333 / 768 from level 48, Nano 490 / 768 from level 1); the same files pass with the release's own
    arguments once forward_native computes as the checkpoint does (the arguments are right; the arithmetic is
    the flaw)."""
    if not (CACHE / "0.34.0" / "vllm").is_dir():
        pytest.skip(f"vllm 0.34.0 not in {CACHE}")
    files = [write(tmp_path / f, c)[0][0] for f, c in COLUMNS.items()]
    fixed = []
    for path in files:
        fixed.append(path.with_name(path.stem + "-fixed.py"))  # no stem a suffix of another (`outcomes`)
        fixed[-1].write_text(path.read_text() + _FIXED)
    got = outcomes([*files, *fixed], "0.34.0", tmp_path, engine="vllm")
    for family, path in zip(COLUMNS, files, strict=True):
        count, level = RECORDED_COUNT.search(RECORDED["evidence"][COLUMNS[family]]["C15"]).groups()
        want = f"{count} of 768 values differ from the checkpoint in FP32 ({family}, default path; first level {level} "
        assert want in got[path.name], (family, got)
    assert all(got[p.name] == "passed" for p in fixed), got
