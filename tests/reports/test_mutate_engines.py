"""``deferlab mutate --vllm`` and ``--anchor`` on fake trees: vLLM's served claims on a fake vLLM checkout, and a
fake SGLang checkout's own unit tests run on the same mutants beside the claims.

The fakes (``mutate_fake/fakes.py``): ``vllm_tree/`` with ``claims_vllm.py`` standing in for the served claims
(rows under the ``VLLM`` label, the system's), and the SGLang fake's checkout top with
``test/registered/unit/srt/test_gate.py`` and ``load_tree.py`` in place of deferlab's loader. The real runs are
the README's (``deferlab mutate --vllm 0.33.0``; ``--sglang CHECKOUT --anchor`` on a checkout the user supplies).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from deferlab.impl.vllm import hooks as vllm_hooks
from deferlab.reference.system.systems import System, engine
from deferlab.reports.core import runner
from deferlab.reports.mutate import anchor, select
from deferlab.reports.mutate import cli as mutate
from deferlab.reports.mutate import render as mutate_render
from deferlab.reports.mutate import runs as mutate_run
from tests.reports.mutate_fake.fakes import FAKE, VLLM_FAKE, FakeHarness, FakeVLLMHarness

pytestmark = pytest.mark.extra("mutate")  # selected by CI's `-m extra` phase, skipped (naming it) without

SERVED = "vllm/multimodal/served.py"
GATE = "sglang/srt/gate.py"
TOP = FAKE.parent  # the fake SGLang checkout's top (python/ and test/ inside)
UNIT = "test/registered/unit/srt/test_gate.py"
ONLY_ANCHOR = f"{GATE}:5:15:ReplaceComparisonOperator_LtE_Lt:0"  # the tie: C1 never asks it, the unit test does
ONLY_DEFERLAB = f"{GATE}:9:29:NumberReplacer:0"  # patches' -1 -> -2: 14x14 still one patch, 29x28 not six
BOTH = f"{GATE}:9:42:ReplaceBinaryOperator_Mul_Add:0"  # patches' * -> +
AT_LOAD = f"{GATE}:19:13:ReplaceComparisonOperator_Lt_Gt:0"  # the import-time check refuses: neither tree loads


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(mutate_render, "EQUIVALENT", tmp_path / "none.toml")


def _run(tmp: Path, engine: str, spec: Path, *argv: str, harness: Any) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["mutate", f"--{engine}", str(spec), "--out", str(tmp / "out"), "--timeout", "30", *argv])
    rc = mutate.run(args, log=open(os.devnull, "w"), harness=harness)
    doc = json.loads((tmp / "out" / "mutate.json").read_text()) if (tmp / "out" / "mutate.json").is_file() else {}
    return rc, doc


# --- vLLM --------------------------------------------------------------------------------------------------------
def test_a_vllm_campaign_mutates_what_the_served_claims_name(tmp_path: Path) -> None:
    """Default targets from the served claims' provenance, mutants selected by probes, kills by verdict and by
    failure signature, all through rows recorded under the VLLM label."""
    rc, doc = _run(tmp_path, "vllm", VLLM_FAKE, "--sample", "80", "--seed", "3", harness=FakeVLLMHarness())
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
        _run(tmp_path, "sglang", FAKE, "--sample", "40", "--seed", "3", "--resume", harness=FakeHarness())


def test_a_vllm_campaign_runs_the_served_claims_through_the_one_runner(tmp_path: Path) -> None:
    """The vLLM harness asks the runner for the served claims' nodes on ``System("vllm", TREE)`` (``--vllm TREE``,
    the campaign's plugin by name), and vLLM's facts come from the registry."""
    harness = mutate_run.Harness("vllm", "ci")
    assert (harness.package, harness.warm) == ("vllm", False)  # no warm forks on vLLM (see `runs._warm_default`)
    node = f"{runner.suite_path()}/claims/test_served.py::test_claim_c13_served_geometry_equals_checkpoint[VLLM]"
    suite = str(runner.suite_path() / engine("vllm").suite)  # the registry's: what a collection collects
    request = runner.Request(harness.system(tmp_path), "ci", nodes=(node,), plugins=(mutate_run.PROBES,))
    cmd = runner.command(request)
    assert cmd[cmd.index("--vllm") + 1] == str(tmp_path) and "--hypothesis-profile=ci" in cmd and node in cmd
    assert cmd[-2:] == ["-p", "deferlab.properties.probes"]
    collect = runner.command(request.with_(nodes=(), collect_only=True))
    assert collect[3] == suite and "--collect-only" in collect
    assert request.system == System("vllm", str(tmp_path)) and not request.system.answers("C3")
    assert "vllm.multimodal.parse" in harness.modules() and vllm_hooks.SERVED_PROCESSOR in harness.modules()


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
    rc, doc = _run(tmp_path, "sglang", FAKE, "--mutants", ",".join(ids), "--anchor", harness=FakeHarness())
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
        _run(tmp_path, "sglang", FAKE, "--mutants", ",".join(ids), "--resume", harness=FakeHarness())


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
    """The load check is the runner's (`check_loads`: the loader's one line)."""
    assert "is not a vLLM checkout" in (mutate_run.Harness("vllm").load_error(tmp_path, 120) or "")


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


def test_the_anchor_runs_a_checkouts_tests_through_the_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real harness: the unit tests in a child of ``python -m deferlab.impl.loader run`` (plugins not
    autoloaded), each outcome recorded by the campaign's plugin; a tree that does not load is a load error."""
    from tests.impl.sglang.support import fake_sglang_tree
    from tests.impl.sglang.test_sources import PROCESSOR_FILE, REQUIRED_FILES

    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    files = {**REQUIRED_FILES, PROCESSOR_FILE: "class KimiK3ImageProcessor:\n    pass\n", "srt/models/kimi_k3.py": "V = 1\n"}  # fmt: skip
    tree = fake_sglang_tree(tmp_path / "tree", "9.9.9", files)
    top = tmp_path / "top"
    (top / "test").mkdir(parents=True)
    (top / "test" / "test_k.py").write_text(
        "import sglang.srt.models.kimi_k3 as m\ndef test_v():\n    assert m.V == 1\ndef test_w():\n    assert m.V == 2\n"
    )
    harness = mutate_run.Harness("sglang")
    run = anchor.run_tests(harness, tree, [str(top / "test" / "test_k.py")], top, tmp_path / "s", 300)
    assert run.wrote and run.load_error is None and run.rc == 1, run
    assert run.tests["test/test_k.py::test_v"] == ("passed", "")
    assert (
        run.tests["test/test_k.py::test_w"][0] == "failed" and "assert 1 == 2" in run.tests["test/test_k.py::test_w"][1]
    )
    broken = anchor.run_tests(harness, tmp_path / "nowhere", [str(top / "test")], top, tmp_path / "s", 300)
    assert broken.load_error and not broken.wrote and anchor.judge(["x"], broken)["outcome"] == "killed at load"
