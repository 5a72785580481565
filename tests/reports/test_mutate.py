"""``deferlab mutate`` on a fake engine tree: cosmic-ray's own mutations, the tree copy, outcomes, selection,
and the front door (the store, resume, the baseline and the equivalents file: `test_mutate_resume`).

The fake (``mutate_fake/``) is a checkout-shaped ``sglang`` tree of five tiny
functions and a script standing in for the claim tests, so a whole campaign
runs in seconds; the real suite on SGLang is ``scripts/mutate.sh``'s job.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import System
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.core.runner import TestResult as Result
from deferlab.reports.mutate import cli as mutate
from deferlab.reports.mutate import engine, plan, select
from deferlab.reports.mutate import render as mutate_render
from deferlab.reports.mutate import runs as mutate_run
from tests.front_door.mutate import MUTATE_ROWS
from tests.reports.mutate_fake.fakes import FAKE, FakeHarness
from tests.reports.mutate_support import GATE, campaign, isolate

pytestmark = pytest.mark.extra("mutate")  # selected by CI's `-m extra` phase, skipped (naming it) without


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(tmp_path, monkeypatch)  # the reference cache, per test


# --- mutants -------------------------------------------------------------------------------------------------------
def test_mutants_are_cosmic_rays_own() -> None:
    """Every mutant of the file is one cosmic-ray's ``mutate_code`` makes, and none of those is missed."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    source = (FAKE / GATE).read_text()
    target = engine.parse_target(FAKE, GATE)
    mine = {}
    sources = engine.Sources(FAKE)
    for m in engine.population(FAKE, [target]):
        code = sources.mutated(m)
        if code is not None:
            mine.setdefault(m.operator, set()).add(code)
    for name, codes in mine.items():
        theirs, k = set(), 0
        while (code := mutate_code(source, get_operator(name)(), k)) is not None:
            theirs.add(code)
            k += 1
        assert codes == {c for c in theirs if _compiles(c)}, name
    assert len(mine) > 10


def _compiles(code: str) -> bool:
    try:
        compile(code, "x", "exec")
    except SyntaxError:
        return False
    return True


def test_sample_is_fixed_by_its_seed() -> None:
    pool = engine.population(FAKE, [engine.parse_target(FAKE, GATE)])
    s = engine.Sources(FAKE)
    a, b, c = (engine.sample(pool, 10, seed, s)[0] for seed in (3, 3, 4))
    assert [m.id for m in a] == [m.id for m in b] != [m.id for m in c]
    assert len(engine.sample(pool, 10**6, 3, s)[0]) == len(pool)


def test_targets_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match=r"no such Python file"):
        engine.parse_target(FAKE, "sglang/srt/nope.py")
    with pytest.raises(UsageError, match=r"defines no function 'nope' \(it defines .*should_defer"):
        engine.parse_target(FAKE, f"{GATE}:nope")
    assert engine.parse_target(FAKE, "sglang.srt.gate:patches").function == "patches"
    assert engine.parse_target(FAKE, f"python/{GATE}").function is None


def test_work_tree_never_writes_the_tree_it_copies(tmp_path: Path) -> None:
    """A mutant replaces the worker's link by rename: the source file keeps its bytes and inode."""
    src = tmp_path / "src"
    shutil.copytree(FAKE, src)
    before = (src / GATE).read_bytes(), (src / GATE).stat().st_ino
    tree = engine.WorkTree.make(src, tmp_path)
    tree.apply(GATE, "BROKEN = 1\n")
    assert (tree.path / GATE).read_text() == "BROKEN = 1\n"
    assert ((src / GATE).read_bytes(), (src / GATE).stat().st_ino) == before
    tree.restore(GATE)
    assert (tree.path / GATE).read_bytes() == before[0]
    tree.remove()
    assert (src / GATE).read_bytes() == before[0] and not tree.path.exists()
    with pytest.raises(ValueError, match="must not lie inside"):
        engine.WorkTree.make(src, src)


# --- selection and outcomes ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fake_campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, FakeHarness, Path]:
    """One campaign on the fake shared by the tests that read it: 24 mutants of its three named functions
    (seed 16 draws the tie survivor and five hanging countdowns)."""
    tmp = tmp_path_factory.mktemp("fake")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEFERLAB_CACHE", str(tmp / "cache"))
        mp.setattr(mutate_render, "EQUIVALENT", tmp / "none.toml")
        rc, doc, harness = campaign(tmp, "--sample", "24", "--seed", "16", "--timeout", "2")
    return rc, doc, harness, tmp / "out"


def test_provenance_names_the_functions_and_the_probes_select(fake_campaign: tuple) -> None:
    rc, doc, harness, out = fake_campaign
    assert rc == 0
    assert sorted(t["target"] for t in doc["targets"]) == [
        f"{GATE}:{f}" for f in ("countdown", "patches", "should_defer")
    ]
    by_fn = {m["function"]: m["claims_run"] for m in doc["mutants"]}
    assert by_fn == {"should_defer": ["C1"], "patches": ["C2", "C3"], "countdown": ["C4"]}  # no property enters them
    control = max(harness.runs, key=len)  # the unmutated tree run as a mutant is, with every unit
    assert [r for r in harness.runs if len(r) > 2] == [control]  # no mutant ran every claim
    assert doc["control"]["outcome"] == "survived" and doc["control"]["seen_by"] == []
    assert "Control: the unmutated tree, run as each mutant is (cold), survived" in (out / "mutate.md").read_text()
    assert doc["reference"]["called"]["C1"] == [f"{GATE}:_self_check", f"{GATE}:should_defer"]
    assert doc["runs"] == {"enabled": False, "warm": 0, "cold": {"cold: warm forks off": len(harness.runs)}}


def test_outcomes_survived_timeout_killed_and_signature(fake_campaign: tuple) -> None:
    rc, doc, _, out_dir = fake_campaign
    out = {m["id"].split(":", 1)[1]: m for m in doc["mutants"]}
    assert out["5:15:ReplaceComparisonOperator_LtE_Lt:0"]["outcome"] == "survived"  # C1 never asks the tie
    assert out["14:14:ReplaceBinaryOperator_Sub_Add:0"]["outcome"] == "timeout"
    c2 = [m for m in doc["mutants"] if "C2" in m["killed_by"]]
    assert c2 and all(m["reasons"]["C2"].startswith(("failure signature", "verdict", "its test")) for m in c2)
    assert any(m["reasons"]["C2"].startswith("failure signature") for m in c2)  # fails -> fails, another way
    md = (out_dir / "mutate.md").read_text()
    assert "-    return raw <= processed\n+    return raw < processed" in md
    assert doc["counts"]["survived"] == len(doc["survivors"]) >= 1
    assert 0 < doc["kill_rate"] < 1
    assert (out_dir / "mutate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out_dir.iterdir()) == ["campaign.sqlite", "mutate.json", "mutate.md", "mutate.png"]


def test_killed_at_load_and_a_target_no_claim_calls(tmp_path: Path) -> None:
    rc, doc, _ = campaign(tmp_path, "--target", f"{GATE}:_self_check", "--sample", "50")
    assert rc == 0 and doc["counts"]["killed at load"] >= 1
    at_load = [m for m in doc["mutants"] if m["outcome"] == "killed at load"]
    assert all("importing gate failed inside SGLang" in m["reasons"]["(load)"] for m in at_load)
    with pytest.raises(UsageError, match="no claim test entered it in the reference run; nothing would be measured"):
        campaign(tmp_path / "b", "--target", f"{GATE}:never_called")


SYSTEM = System("sglang", "tree")


def _row(cid: str, verdict: str, *sigs: str) -> dict[str, Any]:
    return {"id": cid, "policy": "SGLANG", "verdict": verdict, "evidence": "", "signatures": [{"signature": s} for s in sigs]}  # fmt: skip


def _record(rows: list[dict[str, Any]] = (), tests: dict[str, str] | None = None, **kw: Any) -> RunRecord:  # type: ignore[assignment]
    """A run's record: claim rows, test outcomes (a failed one's line is ``E``), and the rest of `RunRecord`."""
    done = {n: Result(o, 0.1, "" if o == "passed" else "E") for n, o in (tests or {}).items()}
    return RunRecord(SYSTEM, "ci", rows=list(rows), tests=done, **{"wrote": True, **kw})


def test_judge_compares_verdicts_signatures_and_tests() -> None:
    ref = {"claims": {"C2": {"verdict": "fails", "signature": "A: x"}}, "tests": {"n::test_claim_c2_x": "passed"}}
    nodes, ok = {"C2": ["n::test_claim_c2_x"]}, {"n::test_claim_c2_x": "passed"}

    def judge(record: RunRecord, load: str | None = None) -> mutate_run.Verdict:
        return mutate_run.judge(ref, record, ["C2"], nodes, lambda: load)

    assert judge(_record([_row("C2", "fails", "A: x")], ok)).outcome == "survived"
    assert judge(_record([_row("C2", "fails", "B: y")], ok)).killed_by == ["C2"]
    broke = judge(_record([_row("C2", "fails", "A: x")], {"n::test_claim_c2_x": "failed"}))
    assert broke.reasons["C2"] == "its test failed: E"  # the failure line the recorder wrote
    nothing = _record(rc=1)  # wrote a file, but no claim recorded a verdict
    assert judge(nothing, "import failed").outcome == "killed at load"
    assert judge(nothing).reasons["C2"].startswith("its test did not finish")
    stopped = _record([_row("C1", "holds")], {"n::test_claim_c1_y": "failed"})  # --first-kill stopped first
    assert judge(stopped).outcome == "survived"
    assert list(judge(_record(rc=-9, wrote=False)).reasons) == ["(run)"]
    assert judge(_record(timed_out=True)).outcome == "timeout"


@pytest.mark.parametrize("rc", [-15, -2, -1])
def test_a_run_stopped_from_outside_is_no_verdict(rc: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claims process ended by SIGTERM / SIGINT / SIGHUP (someone stopped the run, not the mutant), or any run
    while the campaign stops, is a harness error that --resume runs again: never "killed" with nobody killing it
    (it was recorded as killed with an empty killed_by, "the claims process died (exit -15)")."""
    ref = {"claims": {"C2": {"verdict": "fails", "signature": "A: x"}}, "tests": {"n::test_claim_c2_x": "passed"}}
    judged = mutate_run.judge(ref, _record(rc=rc, wrote=False), ["C2"], {"C2": ["n::test_claim_c2_x"]}, lambda: None)
    assert judged.outcome == "error" and judged.killed_by == [] and f"signal {-rc}" in judged.reasons["(harness)"]
    crashed = mutate_run.judge(ref, _record(rc=-11, wrote=False), ["C2"], {}, lambda: None)
    assert crashed.outcome == "killed"  # a segfault the mutant caused is still the mutant's
    monkeypatch.setattr(mutate_run, "STOP", type("Set", (), {"is_set": staticmethod(lambda: True)})())
    assert mutate_run.judge(ref, _record(rc=-9, wrote=False), ["C2"], {}, lambda: None).outcome == "error"


def test_a_property_is_a_unit_selected_by_its_probes_and_its_failure_kills(tmp_path: Path) -> None:
    """A function only a property (no claim, no verdict) enters is a valid target; its mutants run that property
    unit alone, and a test of it that passed on the unmutated code failing kills them, counted per unit."""
    rc, doc, harness = campaign(tmp_path, "--target", f"{GATE}:scale", "--sample", "50")
    assert rc == 0 and doc["mutants"]
    assert {tuple(m["claims_run"]) for m in doc["mutants"]} == {("P:test_scale_is_affine",)}
    # every run that is not the reference's or the campaign's own is a mutant's; each ran the unit alone (cpu + cuda),
    # whatever order the pool launched them in (a positional slice of the runs met a reordered launch under load)
    alone = [r for r in harness.runs if len(r) == 2 and all("test_scale_is_affine" in n for n in r)]
    ran = [m for m in doc["mutants"] if m["outcome"] != "killed at load"]
    assert len(alone) >= len(ran) + 1, harness.runs  # the reference's run of the unit, and one per mutant that ran
    killed = [m for m in doc["mutants"] if m["outcome"] == "killed"]
    assert killed and all(m["killed_by"] == ["P:test_scale_is_affine"] for m in killed)
    assert killed[0]["reasons"]["P:test_scale_is_affine"].startswith("its test failed: AssertionError: scale(2, 3)")
    assert doc["per_unit"]["P:test_scale_is_affine"] == len(killed) and doc["per_claim"] == {}
    # the property that fails on the unmutated code can see nothing: the reference drops it
    assert doc["reference"]["properties"] == {"P:test_scale_is_affine": "passed"}
    assert any("P:test_patches_never_hold" in e for e in doc["reference"]["errors"])
    md = (tmp_path / "out" / "mutate.md").read_text()
    assert "## Kills per unit (claims and properties)" in md
    with pytest.raises(
        UsageError, match=r"--claims: no property P:test_nope runs on real code \(the suite's: P:test_scale"
    ):
        campaign(tmp_path / "b", "--target", f"{GATE}:scale", "--claims", "C1,P:test_nope")
    assert f"| P:test_scale_is_affine | property passed | {len(doc['mutants'])} | {len(killed)} |" in md
    # a campaign of that property alone (no claim in --claims) is one, with the same kills
    rc, alone, _ = campaign(tmp_path / "c", "--target", f"{GATE}:scale", "--sample", "50", "--claims", "P:test_scale_is_affine")  # fmt: skip
    assert rc == 0 and not alone["reference"].get("claims") and alone["per_claim"] == {}
    assert {m["id"]: m["outcome"] for m in alone["mutants"]} == {m["id"]: m["outcome"] for m in doc["mutants"]}


def test_mutants_runs_exactly_the_ids_asked(tmp_path: Path) -> None:
    """``--mutants`` (ids or @FILE) runs those mutants and no sample; their functions are the targets; a resume
    with other ids is refused."""
    ids = [f"{GATE}:5:15:ReplaceComparisonOperator_LtE_Lt:0", f"{GATE}:28:13:ReplaceBinaryOperator_Mul_Add:0"]
    listed = tmp_path / "ids.txt"
    listed.write_text(f"# two survivors\n{ids[0]}\n{ids[1]}  # the scale\n")
    rc, doc, harness = campaign(tmp_path, "--mutants", f"@{listed}")
    assert rc == 0 and sorted(m["id"] for m in doc["mutants"]) == sorted(ids) and doc["mutants_asked"] == ids
    assert len(harness.runs) == 6 + 1 + 2  # the reference's five units and the failing property, the control, the two
    out = {m["id"]: m for m in doc["mutants"]}
    assert out[ids[0]]["outcome"] == "survived" and out[ids[0]]["claims_run"] == ["C1"]
    assert out[ids[1]]["killed_by"] == ["P:test_scale_is_affine"]
    assert sorted(t["target"] for t in doc["targets"]) == [f"{GATE}:scale", f"{GATE}:should_defer"]
    with pytest.raises(UsageError, match="started with other mutants_asked"):
        campaign(tmp_path, "--mutants", ids[0], "--resume")


def test_signature_of_reads_a_rows_signature_set_or_its_evidence() -> None:
    from deferlab.properties import probes

    ev = "AssertionError: 3 bytes at (1, 2)"
    plain = {"verdict": "fails", "evidence": ev}
    assert select.signature_of(plain) == select.signature_of({**plain, "signatures": []})
    assert select.signature_of({"verdict": "holds", "evidence": ev}) == ""
    assert select.signature_of({"verdict": "holds-with-caveat", "evidence": ev}) == select.signature_of(plain) != ""
    a = {"verdict": "fails", "evidence": ev, "signatures": [{"signature": "B: x"}, {"signature": "A: y"}]}
    b = {**a, "evidence": "AssertionError: something else", "signatures": list(reversed(a["signatures"]))}
    assert select.signature_of(a) == select.signature_of(b) == "A: y | B: x"  # a set: order and evidence aside
    assert select.signature_of({**a, "signatures": [{"signature": "A: y"}]}) != select.signature_of(a)
    for row in (plain, a, b, {"verdict": "holds-with-caveat", "evidence": ev}):  # --first-kill sees it the same way
        assert probes.signature_of(row) == select.signature_of(row)


def test_judge_kills_on_a_property_that_broke_and_on_a_changed_signature_set() -> None:
    ref = {
        "claims": {"C2": {"verdict": "fails", "signature": "A: y | B: x"}},
        "tests": {"n::test_claim_c2_x": "passed", "n::test_p[cpu]": "passed", "n::test_p[cuda]": "skipped"},
    }
    nodes = {"C2": ["n::test_claim_c2_x"], "P:test_p": ["n::test_p[cpu]", "n::test_p[cuda]"]}
    units = ["C2", "P:test_p"]

    def judge(sigs: tuple[str, ...], cpu: str, cuda: str = "skipped") -> mutate_run.Verdict:
        tests = {"n::test_claim_c2_x": "passed", "n::test_p[cpu]": cpu, "n::test_p[cuda]": cuda}
        return mutate_run.judge(ref, _record([_row("C2", "fails", *sigs)], tests), units, nodes, lambda: None)

    assert judge(("A: y", "B: x"), "passed", "failed").outcome == "survived"  # the reference skipped it
    broke = judge(("A: y", "B: x"), "failed")
    assert broke.killed_by == ["P:test_p"] and broke.reasons["P:test_p"] == "its test failed: E"
    sig = judge(("A: y",), "passed")
    assert sig.killed_by == ["C2"] and sig.reasons["C2"].startswith("failure signature")
    only_p = _record([], {"n::test_p[cpu]": "passed"})
    assert mutate_run.judge(ref, only_p, ["P:test_p"], nodes, lambda: None).outcome == "survived"


def test_a_worker_that_dies_is_an_outcome_not_a_lost_campaign(tmp_path: Path) -> None:
    harness = FakeHarness(die=True)
    rc, doc, _ = campaign(tmp_path, "--target", f"{GATE}:should_defer", "--sample", "3", harness=harness)
    assert rc == 0 and len(doc["mutants"]) == 3
    assert all(m["outcome"] == "killed" and "(run)" in m["reasons"] for m in doc["mutants"])


def _session(tmp_path: Path, test_file: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A real pytest session with the campaign's plugin (``-p deferlab.properties.probes``) and ``env``."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", mutate_run.PROBES, str(test_file)]
    env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(tmp_path / "r"), **env}
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)


def test_first_kill_stops_the_session_at_the_first_claim_that_differs(tmp_path: Path) -> None:
    """The plugin reads the suite's recorder after each test and stops once a verdict differs from the reference."""
    (tmp_path / "test_two.py").write_text(
        "from deferlab.properties import verdicts\n"
        "def test_claim_c1_a():\n    verdicts.record_claim('C1', 'SGLANG', 'fails', 'AssertionError: 3 bytes')\n"
        "def test_claim_c3_b():\n    verdicts.record_claim('C3', 'SGLANG', 'holds', 'fine')\n"
    )
    ref = {"claims": {"C1": {"verdict": "holds", "signature": ""}, "C3": {"verdict": "holds", "signature": ""}}}
    (tmp_path / "stop.json").write_text(json.dumps({**ref, "tests": {}}))
    assert "2 passed" in _session(tmp_path, tmp_path / "test_two.py", {}).stdout
    out = _session(tmp_path, tmp_path / "test_two.py", {mutate_run.STOP_ENV: str(tmp_path / "stop.json")}).stdout
    assert "1 passed" in out and "C1 saw the mutant" in out


def test_the_plugin_collects_probes_and_records_outcomes_in_a_real_session(tmp_path: Path) -> None:
    """Collection: the node ids after deselection and the rootdir; the probes' builtin and hits; each test's
    outcome and failure line, and a file that does not collect."""
    from deferlab.properties import probes

    assert (probes.PROBES_ENV, probes.STOP_ENV, probes.COLLECT_ENV, probes.OUTCOMES_ENV) == (
        mutate_run.PROBES_ENV, mutate_run.STOP_ENV, mutate_run.COLLECT_ENV, mutate_run.OUTCOMES_ENV,
    )  # fmt: skip
    assert probes.PROBE == select.PROBE
    test = tmp_path / "test_p.py"
    test.write_text(
        f"def f():\n    {select.PROBE}(7)\n\ndef test_a():\n    f()\n\n"
        "def test_b():\n    assert 1 == 2, 'one is not two'\n"
    )
    env = {mutate_run.COLLECT_ENV: str(tmp_path / "c.json")}
    assert _session(tmp_path, test, {**env, "PYTEST_ADDOPTS": "--collect-only"}).returncode == 0
    got = json.loads((tmp_path / "c.json").read_text())
    assert got["nodes"] == ["test_p.py::test_a", "test_p.py::test_b"] and Path(got["rootdir"]) == tmp_path
    env = {mutate_run.PROBES_ENV: str(tmp_path / "h.json"), mutate_run.OUTCOMES_ENV: str(tmp_path / "o.json")}
    assert _session(tmp_path, test, env).returncode == 1
    assert json.loads((tmp_path / "h.json").read_text()) == [7]
    outcomes = json.loads((tmp_path / "o.json").read_text())["tests"]
    assert outcomes["test_p.py::test_a"] == ["passed", ""]
    assert outcomes["test_p.py::test_b"][0] == "failed" and "one is not two" in outcomes["test_p.py::test_b"][1]
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    _session(tmp_path, tmp_path / "test_broken.py", env)
    assert "no_such_module_here" in json.loads((tmp_path / "o.json").read_text())["errors"]["test_broken.py"]


def test_provenance_text_names_functions() -> None:
    index = select.CodeIndex.build(FAKE, [])
    assert index.resolve("real: sglang.srt.gate.patches; modelled: the rest") == {f"{GATE}:patches"}
    assert index.resolve("the gate countdown and should_defer") == {f"{GATE}:should_defer"}  # no bare English words
    assert index.resolve("run_dp (never_called patched)") == set()


def test_no_program_in_a_string_in_reports_mutate() -> None:
    """Every child of a campaign is a module (the runner's pytest, the loader, the fork server): no ``python -c``."""
    here = Path(mutate.__file__).parent
    for path in here.glob("*.py"):
        assert not re.search(r"executable,\s*['\"]-c['\"]", path.read_text()), path.name
    assert plan.RESUME_KEYS[0] == "engine"


# --- the front door ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", MUTATE_ROWS, ids=[r.id for r in MUTATE_ROWS])
def test_front_door_rows_refuse_before_any_work(row: Any, tmp_path: Path) -> None:
    harness = FakeHarness()
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    with pytest.raises(UsageError, match=row.match):
        mutate.run(parser.parse_args(row.argv(tmp_path)), log=open(os.devnull, "w"), harness=harness)
    assert harness.runs == [] and not (tmp_path / "out").exists()
