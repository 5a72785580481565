"""``reports.repro.cli``: reproducers written from recorded counterexamples, their header, and that they reproduce.

The rows are what ``deferlab versions 0.5.18 0.5.23`` recorded (evidence and
minimal counterexample, as in verdicts.json). Fast tests check the files
(standalone, compilable, headed); the slow ones run them through ``deferlab
repro``'s child on the cached releases, one child per release: each fails on
the release it came from with the recorded failure; 0.5.18's owner-grid
reproducer passes on 0.5.19 and 0.5.19's C9 reproducer on 0.5.22, the releases
that fixed them; a C13 reproducer passes on 0.5.23, where C13 holds. vLLM's
are in ``test_repro_vllm.py``.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core.runner import LoadError
from deferlab.reports.repro import cli as repro
from tests.impl.sglang.support import skip_if_unfetched

CACHE = Path.home() / ".cache" / "deferlab" / "sglang"
BG = "BackgroundConfig(pattern='white', square_size=16, white_value=255, gray_value=200, square_on_top_left=True)"
K3 = (
    "PreprocessConfig(patch_size=14, merge_kernel_size=2, in_patch_limit=65536, patch_limit_on_one_side=512, "
    "fixed_output_tokens=None, image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.5, 0.5), background=None, "
    "fill_stage='after_resize', max_pixels=178956970, name='kimi-k3')"
)
C4_CE = [
    "PreprocessConfig(patch_size=1, merge_kernel_size=1, in_patch_limit=1, patch_limit_on_one_side=2, "
    "fixed_output_tokens=None, image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.5, 0.5), background=None, "
    "fill_stage=None, max_pixels=178956970, name='drawn-pixel')",
    [
        "PIL.Image(mode='1', size=(1, 1), info={}, data=bytes.fromhex('00'))",
        "PIL.Image(mode='1', size=(1, 4), info={}, data=bytes.fromhex('00000000'))",
    ],
    [[1, 0]],
]
C9_CE = {
    "topology": {"tp_size": 2, "attn_dp_size": 1, "slots": 2, "K_p": 2},
    "sequence": [
        "topology tp_size=2 attn_dp_size=1 slots=2 K_p=2",
        "publish item 0 to group 0 (owner rank 0) -> slot 0",
        "owner rank 0 reads item 0, acks 2",
        "publish item 1 to group 0 (owner rank 1) -> slot 0",
        "owner rank 1 reads item 1, acks 2",
        "non-owner rank 1 releases item 0 (ack 1)",
        "non-owner rank 0 releases item 1 (ack 1)",
        "drain: all reads and releases done, recycler runs",
    ],
    "message": "slot(s) [0] never free after every consumer finished",
}
C9_EVIDENCE = (
    "fails for 2 of 6 (assumptions, property) cells, e.g. liveness under generation pool, K_p = the producer's own "
    "count (cuda_ipc pool), clamp K_c to K_p: as the code does, non-owners release: True, late acks: overwrite; "
    "safety under generation pool, K_p = the producer's own count (cuda_vmm pool), clamp K_c to K_p: as the code "
    "does, non-owners release: True, late acks: count"
)
# claim -> (evidence as recorded, counterexample as recorded, what the reproducer's failure must say)
RECORDED: dict[str, tuple[str, Any, str]] = {
    "C3": (
        "0.5/0.5: FP32 differs; after BF16 over drawn mean/std: differs for ((0.0, 0.0, 1.0), (1.0, 1.0, 1.0)): "
        "AssertionError: 1 of 256 levels differ after BF16. AssertionError: 205 of 256 levels differ in FP32 "
        "(mean (0.5, 0.5, 0.5), std (0.5, 0.5, 0.5))",
        [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]],
        "AssertionError: 205 of 256 levels differ in FP32 (mean (0.5, 0.5, 0.5), std (0.5, 0.5, 0.5))",
    ),
    "C10": (
        "AssertionError: at call site 'request': in the request [False, False], alone [False, True]",
        [K3, [[3, 8192, 8192], [3, 32, 32]]],
        "AssertionError: in the request [False, False], alone [False, True]",
    ),
    "C11": (
        "IndexError: tuple index out of range also ArrayImage(torch (9, 2, 3) torch.uint8, layout=HWC, w=2, h=9, "
        "c=3): AssertionError: materialized (4, 3, 2, 2), the true 2x9 image needs 12 patches",
        "ArrayImage(torch (4, 5) torch.uint8, layout=HW, w=5, h=4, c=1)",
        "IndexError: tuple index out of range",
    ),
    "C12": (
        "AssertionError: RGBa: a fully transparent pixel is not background also [...]",
        ["PIL.Image(mode='RGBa', size=(1, 1), info={}, data=bytes.fromhex('0a141e00'))", BG],
        "AssertionError: RGBa: transparent pixels became [[10.0, 20.0, 30.0]]",
    ),
    "C15": (
        "0.5/0.5: sglang-0.5.23 (eager): 205 of 256 levels differ from the checkpoint in FP32 (up to 126 ulps, "
        "first level 33), 0 of 256 after BF16. AssertionError: [mean (0.5, 0.5, 0.5) std (0.5, 0.5, 0.5)] 256 "
        "levels x 3 channels: sglang-0.5.23 (eager): 205 of 256 levels differ from the checkpoint in FP32 (up to "
        "126 ulps, first level 33), 0 of 256 after BF16",
        [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]],
        "AssertionError: 205 of 256 levels differ from the checkpoint in FP32 (mean (0.5, 0.5, 0.5), std (0.5, 0.5, "
        "0.5))",
    ),
    "C4": (
        "checked on cpu; ValueError: Kimi-K3 deferred GPU preprocessing produced wrong grids",
        C4_CE,
        "ValueError: Kimi-K3 deferred GPU preprocessing produced wrong grids",
    ),
    "C9": (C9_EVIDENCE, C9_CE, "AssertionError: slot(s) [0] never free after every consumer finished"),
    "C14": (
        "exemplars per class (...): sglang-0.5.23 (eager): differs for RGBA partly transparent, LA. AssertionError: "
        "[RGB] 6x2 geometry (2, 1, 1, 2): sglang-0.5.23 (eager): 1 of 24 values unexplained (9 differ; up to 4 "
        "levels off and 126 ulps; first patch 0 channel 1 (0, 1): level 194 served, 190 trained); sglang-0.5.23 "
        "(deferred): 1 of 24 values unexplained (9 differ; up to 4 levels off and 126 ulps; first patch  also "
        "ServedCase.make('uint8 array', 1, 1, seed=0, few=False, geometry=None) = numpy.ndarray(...)",
        "ServedCase.make('RGB', 6, 2, seed=60, few=False, geometry=(2, 1, 1, 2)) = PIL.Image(mode='RGB', "
        "size=(6, 2), info={}, data=bytes.fromhex('2c536406f80ef4fdf2ddf78c3af7e5fd0d648351f3ad93056b9171c7609a1992"
        "5486bc35'))",
        "AssertionError: 1 of 24 values more than 1 level off the checkpoint's (up to 4 levels; first patch 0 "
        "channel 1 (0, 1): level 194 served, 190 trained)",
    ),
    # C13 holds on every release: a size of its pinned worked examples, as a counterexample would be recorded
    "C13": (
        "AssertionError: [7400x9 session]: sglang-0.5.23 (eager): geometry (new_w, new_h, pad_w, pad_h) ...",
        [7400, 9, "session"],
        "passed",
    ),
}


def _row(cid: str) -> dict[str, Any]:
    evidence, ce, _ = RECORDED[cid]
    return {"id": cid, "statement": f"claim {cid}", "verdict": "fails", "evidence": evidence, "counterexample": ce}


def _write(tmp: Path, version: str, cids: list[str]) -> tuple[list[Path], list[str]]:
    system = {"name": f"sglang-{version}", "kind": "wheel", "version": version, "commit": None}
    return repro.write_reproducers([_row(c) for c in cids], system, version, tmp, source=f"a test of {version}")


def test_a_reproducer_is_a_headed_standalone_pytest_file(tmp_path: Path) -> None:
    """One file per failing claim with a template, named <claim>-<system>.py: the header names claim, system,
    counterexample source and deferlab's version; the code parses, imports SGLang by path and nothing of deferlab."""
    claims = ["C3", "C10", "C11", "C12", "C15", "C4", "C9", "C13", "C14"]
    written, missing = _write(tmp_path, "0.5.23", claims)
    assert [p.name for p in written] == [f"{c}-sglang-0.5.23.py" for c in claims]
    assert missing == []
    for path in written:
        text = path.read_text()
        info = repro.read_header(path)
        assert info == {
            "claim": path.name.split("-")[0],
            "system": "sglang-0.5.23",
            "spec": "0.5.23",
            "engine": "sglang",
            "family": "kimi-k3",
            "companions": "",
        }
        assert "# Model family:" not in text  # Kimi-K3's default column: the header as before --model existed
        assert "# Counterexample: deferlab's minimal counterexample, from a test of 0.5.23" in text
        assert "# Written by: deferlab " in text
        tree = ast.parse(text)
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert any(m.startswith("sglang.srt.") for m in imported) and not any("deferlab" in m for m in imported)
        tests = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
        assert len(tests) == 1 and tests[0].startswith(f"test_{info['claim'].lower()}_")


def test_c10_fits_a_counterexample_that_names_its_call_site(tmp_path: Path) -> None:
    """C10's counterexample may carry the call site it was found at (config, shapes, site): the request path's
    fits the template, the per-image path's does not (the template calls the gate once per request)."""
    evidence, (config, shapes), _ = RECORDED["C10"]
    for site, fits in (("request", True), ("per_image", False)):
        row = {**_row("C10"), "counterexample": [config, shapes, site]}
        written, _ = repro.write_reproducers([row], {"name": "sglang-0.5.23"}, "0.5.23", tmp_path / site, source="t")
        assert bool(written) is fits


def test_c9_fits_only_the_cuda_ipc_pools_run_with_attention_dp_off(tmp_path: Path) -> None:
    """C9's template replays the CUDA IPC pool's recorded run: a VMM cell's, an attention-DP topology's and a run
    with a refused acknowledgement get no file (the report keeps their counterexample)."""
    vmm = "fails for 1 of 6 (assumptions, property) cells, e.g. safety under generation pool, K_p = the " + (
        "producer's own count (cuda_vmm pool), clamp K_c to K_p: as the code does, non-owners release: True"
    )
    dp = {**C9_CE, "topology": {**C9_CE["topology"], "attn_dp_size": 2}}
    refused = {**C9_CE, "sequence": [*C9_CE["sequence"][:2], "owner rank 0 reads item 0, ack 3 rejected: no"]}
    for evidence, ce in ((vmm, C9_CE), (C9_EVIDENCE, dp), (C9_EVIDENCE, refused)):
        row = {**_row("C9"), "evidence": evidence, "counterexample": ce}
        assert repro.write_reproducers([row], {"name": "sglang-0.5.21"}, "0.5.21", tmp_path, source="t")[0] == []
    (path,), _ = _write(tmp_path, "0.5.21", ["C9"])
    steps = ast.literal_eval(path.read_text().split("STEPS = ", 1)[1].split("\n]\n", 1)[0] + "\n]")
    assert steps == [("publish", 0, 0), ("read", 0, 0), ("publish", 1, 1), ("read", 1, 1), ("release", 0, 1),
                     ("release", 1, 0), ("drain",)]  # fmt: skip


def test_a_failure_no_template_fits_gets_no_file_and_a_line_saying_so(tmp_path: Path) -> None:
    """A C9 counterexample that is no state-machine run, and a C12 failure other than the transparent-pixel one,
    fit no template."""
    rows = [
        {"id": "C9", "verdict": "fails", "evidence": "fails for 2 of 6 cells", "counterexample": {"topology": 1}},
        {**_row("C12"), "evidence": "AssertionError: unclear staging error for mode La: ValueError: no"},
        {**_row("C3"), "verdict": "holds"},
    ]
    written, missing = repro.write_reproducers(rows, {"name": "sglang-0.5.23"}, "0.5.23", tmp_path, source="t")
    assert written == [] and not (tmp_path / "repro").exists()
    long = {**_row("C3"), "id": "C13", "evidence": "AssertionError: " + "x" * 300}
    assert repro.write_reproducers([long], {}, "0.5.23", tmp_path, source="t")[1] == [
        f"C13 on 0.5.23: no reproducer template fits this failure (AssertionError: {'x' * 103}…)"
    ]  # cut, and marked as cut: the full failure is in the report beside this line
    assert missing == [
        "C9 on sglang-0.5.23: no reproducer template fits this failure (fails for 2 of 6 cells)",
        "C12 on sglang-0.5.23: no reproducer template fits this failure "
        "(AssertionError: unclear staging error for mode La: ValueError: no)",
    ]


def test_repro_refuses_a_file_that_is_not_a_reproducer(tmp_path: Path) -> None:
    """Any other Python file, a reproducer of another format, no file: one line, before anything loads."""
    other = tmp_path / "test_mine.py"
    other.write_text("# deferlab reproducer (format 2): claim C3 on sglang-0.5.23\n")
    for path, match in ((other, "is not a deferlab reproducer"), (tmp_path / "no.py", "does not exist")):
        with pytest.raises(UsageError, match=match) as info:
            repro.run(argparse.Namespace(file=path, sglang="0.5.23"), io.StringIO())
        assert "\n" not in str(info.value) and "accepted: a repro/" in str(info.value)


def _cached(*versions: str) -> None:
    missing = [v for v in versions if not (CACHE / v / "sglang").is_dir()]
    if missing:
        pytest.skip(f"sglang {', '.join(missing)} not in {CACHE}")


def run_cases(paths: list[Path], spec: str, xml: Path, engine: str = "sglang") -> tuple[list[ET.Element], str]:
    """The JUnit testcases of one `repro.run_files` child on ``spec`` (none errored: a script that errors is a bug
    of its text) and the child's stdout; skipped when the release is not fetched and cannot be."""
    try:
        rc, out, err = repro.run_files(paths, spec, engine=engine, junitxml=xml)
    except LoadError as e:
        skip_if_unfetched(spec, str(e))
        raise
    assert rc in (0, 1) and xml.is_file(), out[-3000:] + err[-3000:]
    cases = list(ET.parse(xml).getroot().iter("testcase"))
    for case in cases:
        assert case.find("error") is None, case.find("error").get("message")
    return cases, out


def outcomes(paths: list[Path], spec: str, tmp: Path, engine: str = "sglang") -> dict[str, str]:
    """file name -> "passed" or the failure's message, from one `repro.run_files` child on ``spec``."""
    cases, out = run_cases(paths, spec, tmp / f"{engine}-{spec}.xml", engine)
    got = {}
    for case in cases:
        failure = case.find("failure")
        (path,) = [p for p in paths if case.get("classname").endswith(p.stem)]
        got[path.name] = "passed" if failure is None else failure.get("message", "")
    assert sorted(got) == sorted(p.name for p in paths), (got, out[-3000:])
    return got


@pytest.mark.slow
def test_each_reproducer_fails_on_the_release_it_came_from(tmp_path: Path) -> None:
    """0.5.23's C3, C10, C11, C12, C14, C15 and 0.5.18's C4 fail there, each with the failure deferlab recorded;
    a C13 reproducer passes on 0.5.23, where C13 holds."""
    _cached("0.5.18", "0.5.23")
    claims = ["C3", "C10", "C11", "C12", "C13", "C14", "C15"]
    written, _ = _write(tmp_path, "0.5.23", claims)
    got = outcomes(written, "0.5.23", tmp_path)
    for cid in claims:
        assert RECORDED[cid][2] in got[f"{cid}-sglang-0.5.23.py"], (cid, got)
    old, _ = _write(tmp_path / "old", "0.5.18", ["C4"])
    assert RECORDED["C4"][2] in outcomes(old, "0.5.18", tmp_path)["C4-sglang-0.5.18.py"]


@pytest.mark.slow
def test_0_5_19_passes_0_5_18s_owner_grid_reproducer_and_fails_its_own_c9(tmp_path: Path) -> None:
    """0.5.19 fixed the owner's grid check (the reproducer written from 0.5.18's failure passes there) and
    brought C9's flaw (its own C9 reproducer fails with the recorded message); one child."""
    _cached("0.5.18", "0.5.19")
    (owner,), _ = _write(tmp_path / "old", "0.5.18", ["C4"])
    (ipc,), _ = _write(tmp_path, "0.5.19", ["C9"])
    got = outcomes([owner, ipc], "0.5.19", tmp_path)
    assert got[owner.name] == "passed", got
    assert RECORDED["C9"][2] in got[ipc.name], got


@pytest.mark.slow
def test_the_c9_reproducer_of_0_5_19_passes_on_0_5_22(tmp_path: Path) -> None:
    """0.5.22 made each rank acknowledge only its own word: 0.5.19's C9 reproducer passes there, through
    `deferlab repro` itself (exit 0)."""
    _cached("0.5.22")
    (path,), _ = _write(tmp_path, "0.5.19", ["C9"])
    passes_there(path, "sglang", "0.5.22")


def passes_there(path: Path, engine: str, spec: str) -> None:
    """``deferlab repro --ENGINE SPEC FILE`` runs the reproducer and exits 0, saying the claim holds there."""
    log = io.StringIO()
    t0 = time.perf_counter()
    try:
        rc = repro.run(argparse.Namespace(file=path, **{"sglang": None, "vllm": None, engine: spec}), log)
    except UsageError as e:
        skip_if_unfetched(spec, str(e))
        raise
    assert rc == 0, log.getvalue()[-3000:]
    assert f"on {engine} {spec}" in log.getvalue() and "passes: the claim holds there" in log.getvalue()
    print(f"deferlab repro --{engine} {spec}: {time.perf_counter() - t0:.1f} s")


@pytest.mark.slow
def test_deferlab_repro_runs_in_a_new_process_and_exits_as_the_reproducer_says(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``deferlab repro`` (through the CLI): the recorded C10 reproducer of 0.5.22 fails there (exit 1), in a new
    process each run (two runs, two child pids, none left: no daemon); ``--cold`` is accepted and changes
    nothing; a SPEC that is no accepted form exits 2 at once; a spec that does not load exits 2 with the
    loader's line; a reproducer whose pytest cannot run it exits 3."""
    from deferlab.reports.cli import main
    from deferlab.reports.core import process

    _cached("0.5.22")
    example = Path(repro.__file__).resolve().parents[1] / "example" / "compare-0.5.21-0.5.22" / "repro"
    path = example / "C10-sglang-0.5.22.py"
    started: list[int] = []
    spawn = process.spawn

    def counting(*a: Any, **kw: Any) -> Any:
        proc = spawn(*a, **kw)
        started.append(proc.pid)
        return proc

    mp = pytest.MonkeyPatch()
    mp.setattr(process, "spawn", counting)
    try:
        seconds = []
        for extra in ([], ["--cold"]):
            t0 = time.perf_counter()
            assert main(["repro", str(path), "--sglang", "0.5.22", *extra]) == 1
            seconds.append(round(time.perf_counter() - t0, 1))
            assert "fails: the flaw is there" in capsys.readouterr().err
        assert len(set(started)) == 2 and process.live() == []
        assert main(["repro", str(path), "--sglang", "/nonexistent/sglang"]) == 2 and len(started) == 2
        assert "--sglang: sglang source '/nonexistent/sglang': no such path" in capsys.readouterr().err
        assert main(["repro", str(path), "--sglang", str(tmp_path)]) == 2 and len(started) == 3
        assert re.search(r"--sglang: sglang source '.*': .* is not an SGLang checkout", capsys.readouterr().err)
        broken = tmp_path / path.name
        broken.write_text(path.read_text() + "\nimport sglang.srt.no_such_module_here\n")
        assert main(["repro", str(broken), "--sglang", "0.5.22"]) == 3  # a collection error: pytest exit 2
        assert "pytest exited 2" in capsys.readouterr().err
    finally:
        mp.undo()
    print(f"deferlab repro C10-sglang-0.5.22.py --sglang 0.5.22: {seconds} s (new process each)")
