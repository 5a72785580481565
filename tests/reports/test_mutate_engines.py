"""``deferlab mutate --vllm`` and ``--anchor`` on fake trees: vLLM's served claims on a fake vLLM checkout, and a
fake SGLang checkout's own unit tests run on the same mutants beside the claims.

The fakes (``mutate_fake/``): ``vllm_tree/`` with ``claims_vllm.py`` standing in
for the served claims (rows under the ``VLLM`` label, relabelled as the real
run's plugin does), and the SGLang fake's checkout top with
``test/registered/unit/srt/test_gate.py`` and ``load_tree.py`` in place of
deferlab's loader. The real runs are the README's (``deferlab mutate --vllm
0.33.0``; ``--sglang CHECKOUT --anchor`` on a checkout the user supplies).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from deferlab.reports.mutate import anchor, select
from deferlab.reports.mutate import cli as mutate
from deferlab.reports.mutate import render as mutate_render
from deferlab.reports.mutate import vllm as mutate_vllm
from deferlab.reports.mutate import vllm_plugin as mutate_vllm_plugin
from deferlab.reports.report import claims as claims_io
from deferlab.reports.versions.matrix import SGLangLoadError, last_line
from tests.front_door.mutate import FAKE, VLLM_FAKE
from tests.reports.test_mutate import FakeRunner

VLLM_SCRIPT = FAKE.parent / "claims_vllm.py"
SERVED = "vllm/multimodal/served.py"
GATE = "sglang/srt/gate.py"
TOP = FAKE.parent  # the fake SGLang checkout's top (python/ and test/ inside)
UNIT = "test/registered/unit/srt/test_gate.py"
ONLY_ANCHOR = f"{GATE}:5:15:ReplaceComparisonOperator_LtE_Lt:0"  # the tie: C1 never asks it, the unit test does
ONLY_DEFERLAB = f"{GATE}:9:29:NumberReplacer:0"  # patches' -1 -> -2: 14x14 still one patch, 29x28 not six
BOTH = f"{GATE}:9:42:ReplaceBinaryOperator_Mul_Add:0"  # patches' * -> +
AT_LOAD = f"{GATE}:19:13:ReplaceComparisonOperator_Lt_Gt:0"  # the import-time check refuses: neither tree loads


class FakeVLLMRunner(mutate_vllm.VLLMRunner):
    """The fake vLLM's script in place of ``pytest test_served.py --vllm TREE``; counts its runs."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[list[str]] = []

    def modules(self) -> list[str]:
        return ["vllm.multimodal.served"]

    def command(self, tree: Path, nodes: Any, *, plugin: bool = False) -> list[str]:
        if nodes is not None:
            self.runs.append(list(nodes))
        return [sys.executable, str(VLLM_SCRIPT), "--vllm", str(tree), *(["--collect-only"] if nodes is None else nodes)]  # fmt: skip

    def load_check(self, tree: Any, timeout: float) -> None:
        p = subprocess.run([sys.executable, str(VLLM_SCRIPT), "--load", str(tree)], capture_output=True, text=True)
        if p.returncode:
            raise SGLangLoadError(last_line(p.stderr))


class AnchoredRunner(FakeRunner):
    """The SGLang fake's runner, its unit tests loaded by the fake checkout's own loader."""

    anchor_loader = f"{TOP / 'load_tree.py'}:load"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(mutate_render, "EQUIVALENT", tmp_path / "none.toml")


def _run(tmp: Path, engine: str, spec: Path, *argv: str, runner: Any) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["mutate", f"--{engine}", str(spec), "--out", str(tmp / "out"), "--timeout", "4", *argv])
    rc = mutate.run(args, log=open(os.devnull, "w"), runner=runner)
    doc = json.loads((tmp / "out" / "mutate.json").read_text()) if (tmp / "out" / "mutate.json").is_file() else {}
    return rc, doc


# --- vLLM --------------------------------------------------------------------------------------------------------
def test_a_vllm_campaign_mutates_what_the_served_claims_name(tmp_path: Path) -> None:
    """Default targets from the served claims' provenance, mutants selected by probes, kills by verdict and by
    failure signature, all through rows recorded under the VLLM label."""
    runner = FakeVLLMRunner()
    rc, doc = _run(tmp_path, "vllm", VLLM_FAKE, "--sample", "40", "--seed", "3", runner=runner)
    assert rc == 0 and doc["engine"] == "vllm" and doc["system"]["name"] == "vllm-9.9.9"
    assert doc["reference"]["verdicts"] == {"C13": "holds", "C14": "fails", "C15": "holds"}
    assert sorted(t["target"] for t in doc["targets"]) == [f"{SERVED}:{f}" for f in ("normalize", "to_level", "tokens")]
    by_fn = {m["function"]: m["claims_run"] for m in doc["mutants"]}
    assert by_fn == {"tokens": ["C13"], "to_level": ["C14"], "normalize": ["C15"]}
    killed = {m["id"]: m for m in doc["mutants"] if m["outcome"] == "killed"}
    assert any(m["reasons"].get("C14", "").startswith("failure signature") for m in killed.values())
    assert any(m["reasons"].get("C13", "").startswith("verdict holds -> fails") for m in killed.values())
    assert 0 < doc["kill_rate"] <= 1 and (tmp_path / "out" / "mutate.md").read_text().startswith(
        "# Mutation campaign: vllm-9.9.9"
    )
    with pytest.raises(Exception, match="started with other engine"):  # a resume keeps its engine
        _run(tmp_path, "sglang", FAKE, "--sample", "40", "--seed", "3", "--resume", runner=FakeRunner())


def test_the_vllm_runner_runs_the_served_claims_with_the_relabelling_plugin(tmp_path: Path) -> None:
    runner = mutate_vllm.VLLMRunner(profile="ci")
    assert (runner.package, runner.engine) == ("vllm", "vllm")
    node = "properties/claims/test_served.py::test_claim_c13_served_geometry_equals_checkpoint[VLLM]"
    cmd = runner.command(tmp_path, [node], plugin=True)
    assert cmd[cmd.index("--vllm") + 1] == str(tmp_path) and "--hypothesis-profile=ci" in cmd
    assert str(claims_io.suite_path() / "claims" / node.split("claims/", 1)[1]) in cmd
    assert cmd[-4:] == ["-p", "deferlab.reports.mutate.vllm_plugin", "-p", "deferlab.reports.mutate.select"]
    collect = runner.command(tmp_path, None)
    assert collect[collect.index("--collect-only") - 1].endswith("claims/test_served.py")
    assert set(mutate_vllm.served_claims()) == {"C13", "C14", "C15"}
    assert "vllm.multimodal.parse" in runner.modules() and mutate_vllm.SERVED_PROCESSOR in runner.modules()


def test_the_plugin_relabels_after_the_suite_wrote_its_results(tmp_path: Path) -> None:
    """In a real pytest session: the suite's own sessionfinish writes verdicts.json, then the plugin's (trylast)
    relabels it; a session without --vllm is left alone."""
    (tmp_path / "conftest.py").write_text(
        "import json, os\n"
        "def pytest_sessionfinish(session):\n"
        "    row = {'id': 'C13', 'policy': 'VLLM', 'verdict': 'holds'}\n"
        "    with open(os.path.join(os.environ['DEFERLAB_RESULTS_DIR'], 'verdicts.json'), 'w') as fh:\n"
        "        json.dump({'claims': [row]}, fh)\n"
    )
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "r").mkdir()

    def session(*extra: str) -> dict:
        env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(tmp_path / "r")}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "deferlab.reports.mutate.vllm_plugin"]  # fmt: skip
        proc = subprocess.run([*cmd, *extra, "test_one.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads((tmp_path / "r" / "verdicts.json").read_text())["claims"][0]

    assert session("--vllm", "0.33.0") == {"id": "C13", "policy": "SGLANG", "engine_policy": "VLLM", "verdict": "holds"}
    assert session()["policy"] == "VLLM"
    assert mutate_vllm_plugin.relabel(tmp_path / "nowhere") is False


def test_probes_leave_jit_compiled_functions_alone() -> None:
    """A probe in a numba kernel would break the run it records: the kernel and what it nests get none."""
    source = (
        "import numba\n"
        "@numba.njit(parallel=True, cache=True)\n"
        "def kernel(x):\n    def inner(y):\n        return y\n    return inner(x)\n"
        "@njit\ndef bare(x):\n    return x\n"
        "def plain(x):\n    return x\n"
    )
    text, ids = select.instrument(source, "vllm/k.py", 0)
    assert sorted(ids.values()) == ["vllm/k.py:plain"] and text.count(select.PROBE) == 1


def test_the_index_resolves_a_vllm_trees_dotted_names() -> None:
    index = select.CodeIndex.build(VLLM_FAKE, [], "vllm")
    assert index.resolve("real: vllm.multimodal.served.tokens") == {f"{SERVED}:tokens"}
    assert select.CodeIndex.build(VLLM_FAKE, []).resolve("real: vllm.multimodal.served.tokens") == set()


# --- the anchor ----------------------------------------------------------------------------------------------------
def test_the_anchor_runs_the_checkouts_unit_tests_beside_the_claims(tmp_path: Path) -> None:
    """The same four mutants against deferlab's claims and the fake checkout's unit tests: one only the anchor
    kills, one only deferlab, one both, one neither tree loads; a unit test that fails unmutated cannot run here."""
    ids = [ONLY_ANCHOR, ONLY_DEFERLAB, BOTH, AT_LOAD]
    rc, doc = _run(tmp_path, "sglang", FAKE, "--mutants", ",".join(ids), "--anchor", runner=AnchoredRunner())
    assert rc == 0
    got = {m["id"]: (m["outcome"], m["anchor"]["outcome"]) for m in doc["mutants"]}
    assert got == {
        ONLY_ANCHOR: ("survived", "killed"),
        ONLY_DEFERLAB: ("killed", "survived"),
        BOTH: ("killed", "killed"),
        AT_LOAD: ("killed at load", "killed at load"),
    }
    by_id = {m["id"]: m for m in doc["mutants"]}
    tie = f"{UNIT}::TestGate::test_a_tie_defers"
    assert by_id[ONLY_ANCHOR]["anchor"]["killed_by"] == [tie]
    assert by_id[ONLY_ANCHOR]["anchor"]["reasons"][tie].startswith("failed: AssertionError: False is not true")
    assert by_id[BOTH]["anchor"]["tests_run"] == 2  # the two that pass unmutated; the GPU one is excluded
    side = doc["anchor_side_by_side"]
    assert (side["anchor_only"], side["deferlab_only"]) == ([ONLY_ANCHOR], [ONLY_DEFERLAB])
    assert side["deferlab_kill_rate"] == side["anchor_kill_rate"] == 0.75 and side["covered"] == 4
    assert doc["anchor"]["by_file"] == {GATE: [UNIT]}
    assert doc["anchor"]["tests"][UNIT]["cannot_run"] == {
        f"{UNIT}::test_needs_a_gpu": "failed: RuntimeError: needs a CUDA device"
    }
    md = (tmp_path / "out" / "mutate.md").read_text()
    assert "## Beside SGLang's own unit tests (the anchor)" in md
    assert f"**Killed by the anchor only** (1): `{ONLY_ANCHOR}`." in md
    assert f"| `{ONLY_DEFERLAB}` | killed | survived | – |" in md
    assert "`test_needs_a_gpu`" not in md.split("**Cannot run here**")[0]
    assert not list((TOP / "test").rglob("__pycache__"))  # the checkout's tests are read, never written into
    with pytest.raises(Exception, match="started with other anchor_asked"):
        _run(tmp_path, "sglang", FAKE, "--mutants", ",".join(ids), "--resume", runner=AnchoredRunner())


def test_anchor_tests_are_found_by_import_or_named(tmp_path: Path) -> None:
    found = anchor.front("sglang", str(FAKE), "checkout", FAKE, [])
    assert found.top == TOP and found.files == [UNIT] and not found.named
    assert found.for_file(GATE) == [UNIT] and found.for_file("sglang/srt/extra.py") == []
    named = anchor.front("sglang", str(FAKE), "checkout", FAKE, ["test/registered"])
    assert named.named and named.for_file("sglang/srt/extra.py") == [UNIT]  # named tests run for every mutant
    assert anchor.module_of("sglang/srt/__init__.py") == "sglang.srt"
    (tmp_path / "test_x.py").write_text("from sglang.srt import gate\nimport sglang.srt.gatekeeper\n")
    assert anchor.imports_module(tmp_path / "test_x.py", "sglang.srt.gate")
    assert not anchor.imports_module(tmp_path / "test_x.py", "sglang.srt.mm_utils")
    with pytest.raises(Exception, match="is not inside the checkout"):
        anchor.front("sglang", str(FAKE), "checkout", FAKE, [str(tmp_path / "test_x.py")])
    with pytest.raises(Exception, match="is a release wheel, which carries no unit tests"):
        anchor.front("sglang", "0.5.23", "wheel", FAKE, [])


def test_anchor_judge() -> None:
    nodes = ["t.py::a", "t.py::b"]
    ok = anchor.TestRun(tests={"t.py::a": ("passed", ""), "t.py::b": ("passed", "")}, wrote=True)
    assert anchor.judge(nodes, ok)["outcome"] == "survived"
    broke = anchor.TestRun(tests={"t.py::a": ("passed", ""), "t.py::b": ("error", "E: x")}, wrote=True)
    assert anchor.judge(nodes, broke) == {"outcome": "killed", "killed_by": ["t.py::b"], "reasons": {"t.py::b": "error: E: x"}}  # fmt: skip
    skipped = anchor.TestRun(tests={"t.py::a": ("passed", ""), "t.py::b": ("skipped", "no GPU")}, wrote=True)
    assert anchor.judge(nodes, skipped)["outcome"] == "survived"
    gone = anchor.TestRun(errors={"t.py": "ImportError: y"}, wrote=True)  # the file no longer collects
    assert anchor.judge(nodes, gone)["reasons"]["t.py::a"] == "not run: ImportError: y"
    assert anchor.judge(nodes, anchor.TestRun(load_error="boom"))["outcome"] == "killed at load"
    assert anchor.judge(nodes, anchor.TestRun(timed_out=True))["outcome"] == "timeout"
    assert anchor.judge(nodes, anchor.TestRun(rc=-9))["reasons"]["(run)"].startswith("the unit-test process died")


def test_a_vllm_tree_that_cannot_be_driven_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(SGLangLoadError, match="is not a vLLM checkout"):
        mutate_vllm.VLLMRunner().load_check(tmp_path, 120)


def test_side_by_side_counts_both_nets_on_the_same_sample() -> None:
    def m(i: str, mine: str, theirs: str | None, equivalent: bool = False) -> dict:
        rec = {"id": i, "outcome": mine, "equivalent": "a person's reason" if equivalent else None}
        return {**rec, "anchor": None if theirs is None else {"outcome": theirs, "seconds": 2.0}}

    shown = lambda r: "equivalent" if r.get("equivalent") else r["outcome"]  # noqa: E731
    rows = [
        m("a", "killed", "survived"),
        m("b", "survived", "killed"),
        m("c", "killed at load", "killed at load"),
        m("d", "survived", anchor.NO_TEST),
        m("e", "survived", "killed", equivalent=True),  # the anchor proves the equivalence entry wrong
        m("f", "error", None),  # a harness error of ours: judged by neither
    ]
    s = anchor.side_by_side(rows, shown)
    assert (s["judged"], s["covered"]) == (4, 3)
    assert (s["deferlab_kill_rate"], s["anchor_kill_rate"]) == (0.5, 0.5)
    assert (s["deferlab_kill_rate_covered"], s["anchor_kill_rate_covered"]) == (0.6667, 0.6667)
    assert (s["anchor_only"], s["deferlab_only"], s["both"], s["neither"]) == (["b"], ["a"], ["c"], ["d"])
    assert s["equivalent_but_killed"] == ["e"] and s["counts"][anchor.NO_TEST] == 1 and s["seconds"] == 10.0
