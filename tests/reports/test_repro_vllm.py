"""vLLM's reproducers (C13, C14, C15): written from vLLM rows, headed for ``--vllm``, and that they reproduce.

The rows are what ``deferlab versions --engine vllm`` recorded for 0.33.0 and
0.30.0 (evidence, minimal counterexample, provenance). Fast tests check the
files and the refusals of ``deferlab repro`` (an SGLang reproducer on vLLM and
the reverse, each one line, before anything loads). The slow ones run them in
one child per release: on 0.33.0 its C14 and C15 reproducers and 0.30.0's C14
one (vLLM serving the checkpoint's remote code: the parser is vLLM's part)
fail with the recorded failures and a C13 one passes (C13 holds on vLLM);
0.33.0's C14 reproducer (a keyed RGB image composited onto white) passes on
0.32.0, which serves that class as the checkpoint does, through ``deferlab
repro --vllm`` itself.
"""

from __future__ import annotations

import argparse
import ast
import io
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reports.compare import render as compare_render
from deferlab.reports.repro import cli as repro
from tests.reports.test_repro import outcomes, passes_there

CACHE = Path.home() / ".cache" / "deferlab" / "vllm"
FUSED = "vllm.transformers_utils.processors.kimi_k25_vision_fused.KimiK25FusedVisionProcessor"
OWN = {"vllm-0.33.0 (served): serve": f"real: vllm.transformers_utils.processors.kimi_k3.KimiK3Processor.__call__ -> "
       f"{FUSED}.preprocess"}  # fmt: skip
REMOTE = {"vllm-0.30.0 (served): serve": "modelled: the checkpoint's own remote-code processor (not in the wheel), by "
          "the checkpoint oracle"}  # fmt: skip
RGBA_1X9 = (
    "ServedCase.make('RGBA partly transparent', 1, 9, seed=0, few=False, geometry=None) = PIL.Image(mode='RGBA', "
    "size=(1, 9), info={}, data=bytes.fromhex('d9a382144e0a13042cd0a6e9809bf8baa18b8fef47d0ab0064db8d08c3bad82c16dc"
    "058a'))"
)
# (claim, version) -> (evidence as recorded, counterexample as recorded, provenance, what the reproducer must say)
RECORDED: dict[tuple[str, str], tuple[str, Any, dict[str, str], str]] = {
    ("C14", "0.33.0"): (
        "exemplars per class (...): vllm-0.33.0 (served): differs for RGBA partly transparent, RGB with a stray key. "
        "AssertionError: [RGB with a stray key] 1x1: vllm-0.33.0 (served): 3 of 2352 values unexplained (3 differ; "
        "up to 125 levels off and 0 ulps; first patch 0 channel 0 (0, 0): level 255 served, 217 trained) also "
        f"{RGBA_1X9}: AssertionError: [RGBA partly transparent] 1x9: ...",
        "ServedCase.make('RGB with a stray key', 1, 1, seed=0, few=False, geometry=None) = PIL.Image(mode='RGB', "
        "size=(1, 1), info={'transparency': (217, 163, 130)}, data=bytes.fromhex('d9a382'))",
        OWN,
        "AssertionError: 3 of 2352 values more than 1 level off the checkpoint's (up to 125 levels; first patch 0 "
        "channel 0 (0, 0): level 255 served, 217 trained)",
    ),
    ("C15", "0.33.0"): (
        "0.5/0.5: vllm-0.33.0 (served): bitwise in FP32 and after BF16; CLIP: vllm-0.33.0 (served): 231 of 256 levels "
        "differ from the checkpoint in FP32 (up to 169 ulps, first level 0), 0 of 256 after BF16. AssertionError: "
        "[mean (0.48145466, 0.4578275, 0.40821073) std (0.26862954, 0.26130258, 0.27577711)] 256 levels x 3 "
        "channels: vllm-0.33.0 (served): 231 of 256 levels differ from the checkpoint in FP32 (up to 169 ulps, first "
        "level 0), 0 of 256 after BF16",
        [[0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]],
        OWN,
        "AssertionError: 231 of 256 levels differ from the checkpoint in FP32 (mean (0.48145466, 0.4578275, "
        "0.40821073), std (0.26862954, 0.26130258, 0.27577711))",
    ),
    # C13 holds on every vLLM release: one of its pinned sizes, as a counterexample would be recorded
    ("C13", "0.33.0"): (
        "AssertionError: [7400x9 session]: vllm-0.33.0 (served): ...",
        [7400, 9, "session"],
        OWN,
        "passed",
    ),
    ("C14", "0.30.0"): (
        "exemplars per class (...): vllm-0.30.0 (served): differs for RGBA partly transparent. AssertionError: "
        "[RGBA partly transparent] 1x9: vllm-0.30.0 (served): 3 of 2352 values unexplained (9 differ; up to 35 "
        "levels off and 0 ulps; first patch 0 channel 0 (8, 0): level 129 served, 94 trained)",
        RGBA_1X9,
        REMOTE,
        "AssertionError: 3 of 2352 values more than 1 level off the checkpoint's (up to 35 levels; first patch 0 "
        "channel 0 (8, 0): level 129 served, 94 trained)",
    ),
}


def _row(cid: str, version: str) -> dict[str, Any]:
    evidence, ce, provenance, _ = RECORDED[cid, version]
    return {"id": cid, "statement": f"claim {cid}", "verdict": "fails", "evidence": evidence, "counterexample": ce,
            "provenance": provenance}  # fmt: skip


def _system(version: str) -> dict[str, Any]:
    return {"name": f"vllm-{version}", "kind": "wheel", "version": version, "commit": None, "engine": "vllm"}


def _write(tmp: Path, version: str, cids: list[str]) -> tuple[list[Path], list[str]]:
    rows = [_row(c, version) for c in cids]
    return repro.write_reproducers(rows, _system(version), version, tmp, source=f"a test of vllm {version}")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return found | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def test_a_vllm_reproducer_is_headed_for_vllm_and_imports_vllm_only(tmp_path: Path) -> None:
    """<claim>-vllm-<version>.py per failing claim; its Run line names --vllm, which `read_header` reads as the
    engine; it imports vLLM by path (the image processor its provenance names) and nothing of deferlab or SGLang."""
    written, missing = _write(tmp_path, "0.33.0", ["C13", "C14", "C15"])
    assert [p.name for p in written] == [f"{c}-vllm-0.33.0.py" for c in ("C13", "C14", "C15")] and missing == []
    for path in written:
        text = path.read_text()
        assert repro.read_header(path) == {
            "claim": path.name.split("-")[0], "system": "vllm-0.33.0", "spec": "0.33.0", "engine": "vllm",
            "family": "kimi-k3", "companions": "",
        }  # fmt: skip
        assert "deferlab repro THIS_FILE --vllm SPEC" in text and "no vLLM dependencies needed" in text
        imported = _imports(path)
        assert FUSED.rsplit(".", 1)[0] in imported, imported
        assert not any(m.startswith(("deferlab", "sglang")) for m in imported), imported
        tests = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
        assert len(tests) == 1


def test_where_vllm_serves_the_checkpoints_remote_code_only_its_parser_is_called(tmp_path: Path) -> None:
    """vLLM 0.27-0.31 serve the checkpoint's own processor: C14's reproducer calls vLLM's parser and the stated
    processor; with no provenance the processor is unknown, and no file is written (a line says so)."""
    (path,), _ = _write(tmp_path, "0.30.0", ["C14"])
    assert {m for m in _imports(path) if m.startswith("vllm")} == {"vllm.multimodal.parse"}
    bare = {**_row("C14", "0.33.0"), "provenance": {}}
    written, missing = repro.write_reproducers([bare], _system("0.33.0"), "0.33.0", tmp_path / "b", source="t")
    assert written == [] and missing[0].startswith("C14 on vllm-0.33.0: no reproducer template fits this failure")
    c15 = {**_row("C15", "0.33.0"), "provenance": REMOTE}  # C15 is not vLLM's where it serves remote code
    assert repro.write_reproducers([c15], _system("0.30.0"), "0.30.0", tmp_path / "c", source="t")[0] == []


def test_compare_writes_a_vllm_sides_reproducers_for_vllm(tmp_path: Path) -> None:
    """`compare --engine vllm`'s reproducers are vLLM's (the side's engine picks the templates)."""
    sides = {
        role.lower(): {
            "role": role,
            "spec": v,
            "run_spec": v,
            "kind": "release",
            "revision": None,
            "engine": "vllm",
            "name": f"vllm-{v}",
        }  # fmt: skip
        for role, v in (("BASE", "0.32.0"), ("HEAD", "0.33.0"))
    }
    doc = {**sides, "profile": "ci", "rows": {"BASE": [], "HEAD": [_row("C14", "0.33.0"), _row("C15", "0.33.0")]}}
    results = {role: {"system": {"engine": "vllm", "system": f"vllm-{v}"}} for role, v in (("BASE", "0.32.0"),
                                                                                          ("HEAD", "0.33.0"))}  # fmt: skip
    made = compare_render.reproducers(tmp_path, doc, results)
    assert made == {"written": ["repro/C14-vllm-0.33.0.py", "repro/C15-vllm-0.33.0.py"], "missing": []}
    assert repro.read_header(tmp_path / made["written"][0])["engine"] == "vllm"


def test_repro_refuses_the_other_engines_option_in_one_line(tmp_path: Path) -> None:
    """A vLLM reproducer with --sglang, an SGLang one with --vllm: one line naming the option it takes, before
    anything loads."""
    (vllm_file,), _ = _write(tmp_path / "v", "0.33.0", ["C15"])
    sglang_file = tmp_path / "C3-sglang-0.5.23.py"
    sglang_file.write_text("# deferlab reproducer (format 1): claim C3 on sglang-0.5.23\n# Spec: 0.5.23\n")
    cases = (
        (vllm_file, {"sglang": "0.5.23"}, r"^--sglang: '.*C15-vllm-0\.33\.0\.py' is a vLLM reproducer .*accepted for it: "
         r"--vllm SPEC"),
        (sglang_file, {"vllm": "0.33.0"}, r"^--vllm: '.*C3-sglang-0\.5\.23\.py' is an SGLang reproducer .*accepted for "
         r"it: --sglang SPEC"),
    )  # fmt: skip
    for path, given, match in cases:
        args = argparse.Namespace(file=path, sglang=given.get("sglang"), vllm=given.get("vllm"))
        with pytest.raises(UsageError, match=match) as info:
            repro.run(args, io.StringIO())
        assert "\n" not in str(info.value)


def _cached(*versions: str) -> None:
    missing = [v for v in versions if not (CACHE / v / "vllm").is_dir()]
    if missing:
        pytest.skip(f"vllm {', '.join(missing)} not in {CACHE}")


@pytest.mark.slow
@pytest.mark.extra("vllm")
def test_each_vllm_reproducer_fails_on_the_release_it_came_from(tmp_path: Path) -> None:
    """0.33.0's C14 and C15 fail there with the recorded failures, and so does 0.30.0's C14 (the parser's part:
    0.33.0 still composites that image onto white before its own processor); C13's passes; one child."""
    _cached("0.33.0")
    written, _ = _write(tmp_path, "0.33.0", ["C13", "C14", "C15"])
    (remote,), _ = _write(tmp_path / "old", "0.30.0", ["C14"])
    got = outcomes([*written, remote], "0.33.0", tmp_path, engine="vllm")
    for cid in ("C13", "C14", "C15"):
        assert RECORDED[cid, "0.33.0"][3] in got[f"{cid}-vllm-0.33.0.py"], (cid, got)
    assert RECORDED["C14", "0.30.0"][3] in got[remote.name], got


@pytest.mark.slow
@pytest.mark.extra("vllm")
def test_the_keyed_rgb_reproducer_of_0_33_0_passes_on_0_32_0(tmp_path: Path) -> None:
    """0.32.0 serves a keyed RGB image as the checkpoint does (0.33.0 composites it onto white): 0.33.0's C14
    reproducer passes there, through `deferlab repro --vllm` (exit 0)."""
    _cached("0.32.0")
    (path,), _ = _write(tmp_path, "0.33.0", ["C14"])
    passes_there(path, "vllm", "0.32.0")
