"""``deferlab mutate`` on a fake engine tree: cosmic-ray's own mutations, the tree copy, outcomes, selection,
resume, the baseline and the equivalents file, and the front door.

The fake (``mutate_fake/``) is a checkout-shaped ``sglang`` tree of five tiny
functions and a script standing in for the claim tests, so a whole campaign
runs in seconds; the real suite on SGLang is ``scripts/mutate.sh``'s job.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from deferlab.reference.system.errors import UsageError
from deferlab.reports.mutate import cli as mutate
from deferlab.reports.mutate import engine, select
from deferlab.reports.mutate import render as mutate_render
from deferlab.reports.mutate import runs as mutate_run
from deferlab.reports.versions.matrix import SGLangLoadError, last_line
from tests.front_door.mutate import FAKE, MUTATE_ROWS

SCRIPT = FAKE.parent / "claims.py"
GATE = "sglang/srt/gate.py"


class FakeRunner(mutate_run.Runner):
    """The fake engine's script in place of ``pytest <claim tests> --sglang TREE``; counts its runs."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[list[str]] = []

    def modules(self) -> list[str]:
        return ["sglang.srt.gate"]

    def command(self, tree: Path, nodes: Any, *, plugin: bool = False) -> list[str]:
        cmd = [sys.executable, str(SCRIPT), "--sglang", str(tree)]
        cmd += ["--collect-only"] if nodes is None else list(nodes)
        if nodes is not None:
            self.runs.append(list(nodes))
        return cmd

    def load_check(self, tree: Any, timeout: float) -> None:
        p = subprocess.run([sys.executable, str(SCRIPT), "--load", str(tree)], capture_output=True, text=True)
        if p.returncode:
            raise SGLangLoadError(last_line(p.stderr))


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    return parser.parse_args(["mutate", "--sglang", str(FAKE), *argv])


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))  # the reference cache, per test
    monkeypatch.setattr(mutate_render, "EQUIVALENT", tmp_path / "none.toml")


def _campaign(tmp_path: Path, *argv: str, runner: FakeRunner | None = None) -> tuple[int, dict, FakeRunner]:
    runner = runner or FakeRunner()
    out = tmp_path / "out"
    rc = mutate.run(_args("--out", str(out), "--timeout", "4", *argv), log=open(os.devnull, "w"), runner=runner)
    doc = json.loads((out / "mutate.json").read_text()) if (out / "mutate.json").is_file() else {}
    return rc, doc, runner


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
def fake_campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, FakeRunner, Path]:
    """One campaign on the fake shared by the tests that read it: 24 mutants of its three named functions
    (seed 16 draws the tie survivor and five hanging countdowns)."""
    tmp = tmp_path_factory.mktemp("fake")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEFERLAB_CACHE", str(tmp / "cache"))
        mp.setattr(mutate_render, "EQUIVALENT", tmp / "none.toml")
        rc, doc, runner = _campaign(tmp, "--sample", "24", "--seed", "16", "--timeout", "2")
    return rc, doc, runner, tmp / "out"


def test_provenance_names_the_functions_and_the_probes_select(fake_campaign: tuple) -> None:
    rc, doc, runner, out = fake_campaign
    assert rc == 0
    assert sorted(t["target"] for t in doc["targets"]) == [
        f"{GATE}:{f}" for f in ("countdown", "patches", "should_defer")
    ]
    by_fn = {m["function"]: m["claims_run"] for m in doc["mutants"]}
    assert by_fn == {"should_defer": ["C1"], "patches": ["C2", "C3"], "countdown": ["C4"]}  # no property enters them
    control = max(runner.runs, key=len)  # the unmutated tree run as a mutant is, with every unit
    assert [r for r in runner.runs if len(r) > 2] == [control]  # no mutant ran every claim
    assert doc["control"]["outcome"] == "survived" and doc["control"]["seen_by"] == []
    assert "Control: the unmutated tree, run as each mutant is (cold), survived" in (out / "mutate.md").read_text()
    assert doc["reference"]["called"]["C1"] == [f"{GATE}:_self_check", f"{GATE}:should_defer"]


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


def test_killed_at_load_and_a_target_no_claim_calls(tmp_path: Path) -> None:
    rc, doc, _ = _campaign(tmp_path, "--target", f"{GATE}:_self_check", "--sample", "50")
    assert rc == 0 and doc["counts"]["killed at load"] >= 1
    with pytest.raises(UsageError, match="no claim test entered it in the reference run; nothing would be measured"):
        _campaign(tmp_path / "b", "--target", f"{GATE}:never_called")


def test_judge_compares_verdicts_signatures_and_tests() -> None:
    ref = {
        "claims": {"C2": {"verdict": "fails", "signature": "AssertionError: # patch"}},
        "tests": {"n::test_claim_c2_x": "passed"},
    }
    same = mutate_run.Run(
        claims={"C2": dict(ref["claims"]["C2"])}, tests={"n::test_claim_c2_x": "passed"}, recorded=True, wrote=True
    )
    nodes = {"C2": ["n::test_claim_c2_x"]}
    assert mutate_run.judge(ref, same, ["C2"], nodes, lambda: None).outcome == "survived"
    other = mutate_run.Run(
        claims={"C2": {"verdict": "fails", "signature": "ValueError: #"}}, tests=same.tests, recorded=True, wrote=True
    )
    assert mutate_run.judge(ref, other, ["C2"], nodes, lambda: None).killed_by == ["C2"]
    broke = mutate_run.Run(
        claims={"C2": ref["claims"]["C2"]}, tests={"n::test_claim_c2_x": "failed"}, recorded=True, wrote=True
    )
    assert "its test failed" in mutate_run.judge(ref, broke, ["C2"], nodes, lambda: None).reasons["C2"]
    nothing = mutate_run.Run(rc=1, wrote=True)  # wrote a file, but no claim recorded a verdict
    assert mutate_run.judge(ref, nothing, ["C2"], nodes, lambda: "import failed").outcome == "killed at load"
    assert mutate_run.judge(ref, nothing, ["C2"], nodes, lambda: None).reasons["C2"].startswith("its test did not")
    stopped = mutate_run.Run(tests={"n::test_claim_c1_y": "failed"}, recorded=True, wrote=True)  # -x stopped first
    assert mutate_run.judge(ref, stopped, ["C2"], nodes, lambda: None).outcome == "survived"
    died = mutate_run.Run(rc=-9)
    assert list(mutate_run.judge(ref, died, ["C2"], nodes, lambda: None).reasons) == ["(run)"]
    assert mutate_run.judge(ref, mutate_run.Run(timed_out=True), ["C2"], nodes, lambda: None).outcome == "timeout"


def test_a_property_is_a_unit_selected_by_its_probes_and_its_failure_kills(tmp_path: Path) -> None:
    """A function only a property (no claim, no verdict) enters is a valid target; its mutants run that property
    unit alone, and a test of it that passed on the unmutated code failing kills them, counted per unit."""
    rc, doc, runner = _campaign(tmp_path, "--target", f"{GATE}:scale", "--sample", "50")
    assert rc == 0 and doc["mutants"]
    assert {tuple(m["claims_run"]) for m in doc["mutants"]} == {("P:test_scale_is_affine",)}
    mutant_runs = runner.runs[-len(doc["mutants"]) :]  # after the reference's (one per unit)
    assert all(len(r) == 2 and all("test_scale_is_affine" in n for n in r) for r in mutant_runs)  # cpu + cuda
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
        _campaign(tmp_path / "b", "--target", f"{GATE}:scale", "--claims", "C1,P:test_nope")
    assert f"| P:test_scale_is_affine | property passed | {len(doc['mutants'])} | {len(killed)} |" in md


def test_mutants_runs_exactly_the_ids_asked(tmp_path: Path) -> None:
    """``--mutants`` (ids or @FILE) runs those mutants and no sample; their functions are the targets; a resume
    with other ids is refused."""
    ids = [f"{GATE}:5:15:ReplaceComparisonOperator_LtE_Lt:0", f"{GATE}:28:13:ReplaceBinaryOperator_Mul_Add:0"]
    listed = tmp_path / "ids.txt"
    listed.write_text(f"# two survivors\n{ids[0]}\n{ids[1]}  # the scale\n")
    rc, doc, runner = _campaign(tmp_path, "--mutants", f"@{listed}")
    assert rc == 0 and sorted(m["id"] for m in doc["mutants"]) == sorted(ids) and doc["mutants_asked"] == ids
    assert len(runner.runs) == 6 + 1 + 2  # the reference's five units and the failing property, the control, the two
    out = {m["id"]: m for m in doc["mutants"]}
    assert out[ids[0]]["outcome"] == "survived" and out[ids[0]]["claims_run"] == ["C1"]
    assert out[ids[1]]["killed_by"] == ["P:test_scale_is_affine"]
    assert sorted(t["target"] for t in doc["targets"]) == [f"{GATE}:scale", f"{GATE}:should_defer"]
    with pytest.raises(UsageError, match="started with other mutants_asked"):
        _campaign(tmp_path, "--mutants", ids[0], "--resume")


def test_signature_of_reads_a_rows_signature_set_or_its_evidence() -> None:
    ev = "AssertionError: 3 bytes at (1, 2)"
    plain = {"verdict": "fails", "evidence": ev}
    assert select.signature_of(plain) == select.signature_of({**plain, "signatures": []})
    assert select.signature_of({"verdict": "holds", "evidence": ev}) == ""
    a = {"verdict": "fails", "evidence": ev, "signatures": [{"signature": "B: x"}, {"signature": "A: y"}]}
    b = {**a, "evidence": "AssertionError: something else", "signatures": list(reversed(a["signatures"]))}
    assert select.signature_of(a) == select.signature_of(b) == "A: y | B: x"  # a set: order and evidence aside
    assert select.signature_of({**a, "signatures": [{"signature": "A: y"}]}) != select.signature_of(a)


def test_judge_kills_on_a_property_that_broke_and_on_a_changed_signature_set() -> None:
    ref = {
        "claims": {"C2": {"verdict": "fails", "signature": "A: y | B: x"}},
        "tests": {"n::test_claim_c2_x": "passed", "n::test_p[cpu]": "passed", "n::test_p[cuda]": "skipped"},
    }
    nodes = {"C2": ["n::test_claim_c2_x"], "P:test_p": ["n::test_p[cpu]", "n::test_p[cuda]"]}
    units = ["C2", "P:test_p"]

    def run(sig: str, cpu: str, cuda: str = "skipped") -> mutate_run.Run:
        tests = {"n::test_claim_c2_x": "passed", "n::test_p[cpu]": cpu, "n::test_p[cuda]": cuda}
        claims = {"C2": {"verdict": "fails", "signature": sig}}
        msg = {"../../x/n::test_p[cpu]": "E"}  # pytest prints node ids relative to the process's folder
        return mutate_run.Run(claims=claims, tests=tests, recorded=True, wrote=True, messages=msg)

    assert mutate_run.judge(ref, run("A: y | B: x", "passed", "failed"), units, nodes, lambda: None).outcome == "survived"  # fmt: skip
    broke = mutate_run.judge(ref, run("A: y | B: x", "failed"), units, nodes, lambda: None)
    assert broke.killed_by == ["P:test_p"] and broke.reasons["P:test_p"] == "its test failed: E"
    sig = mutate_run.judge(ref, run("A: y", "passed"), units, nodes, lambda: None)
    assert sig.killed_by == ["C2"] and sig.reasons["C2"].startswith("failure signature")
    only_p = mutate_run.Run(tests={"n::test_p[cpu]": "passed"}, wrote=True, recorded=True)
    assert mutate_run.judge(ref, only_p, ["P:test_p"], nodes, lambda: None).outcome == "survived"


class DyingRunner(FakeRunner):
    """A claims process killed by a signal on every mutant run (the reference runs normally)."""

    def command(self, tree: Path, nodes: Any, *, plugin: bool = False) -> list[str]:
        if nodes is None or plugin:
            return super().command(tree, nodes, plugin=plugin)
        return [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]


def test_a_worker_that_dies_is_an_outcome_not_a_lost_campaign(tmp_path: Path) -> None:
    rc, doc, _ = _campaign(tmp_path, "--target", f"{GATE}:should_defer", "--sample", "3", runner=DyingRunner())
    assert rc == 0 and len(doc["mutants"]) == 3
    assert all(m["outcome"] == "killed" and "(run)" in m["reasons"] for m in doc["mutants"])


def test_first_kill_stops_the_session_at_the_first_claim_that_differs(tmp_path: Path) -> None:
    """The plugin reads the suite's recorder after each test and stops once a verdict differs from the reference."""
    (tmp_path / "test_two.py").write_text(
        "from deferlab.properties import verdicts\n"
        "def test_claim_c1_a():\n    verdicts.record_claim('C1', 'SGLANG', 'fails', 'AssertionError: 3 bytes')\n"
        "def test_claim_c3_b():\n    verdicts.record_claim('C3', 'SGLANG', 'holds', 'fine')\n"
    )
    ref = {"claims": {"C1": {"verdict": "holds", "signature": ""}, "C3": {"verdict": "holds", "signature": ""}}}
    (tmp_path / "stop.json").write_text(json.dumps({**ref, "tests": {}}))

    def run(stop: bool) -> str:
        env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(tmp_path / "r")}
        if stop:
            env[select.STOP_ENV] = str(tmp_path / "stop.json")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "deferlab.reports.mutate.select"]
        return subprocess.run(
            [*cmd, str(tmp_path / "test_two.py")], cwd=tmp_path, env=env, capture_output=True, text=True
        ).stdout

    assert "2 passed" in run(stop=False)
    out = run(stop=True)
    assert "1 passed" in out and "C1 saw the mutant" in out


# --- resume, baseline, equivalents ---------------------------------------------------------------------------------
def test_an_interrupted_campaign_resumes_where_it_stopped(tmp_path: Path) -> None:
    rc, doc, first = _campaign(tmp_path, "--target", f"{GATE}:patches", "--sample", "8")
    results = tmp_path / "out" / "mutants.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])  # three whole records and a torn one
    runner = FakeRunner()
    rc2, doc2, runner = _campaign(tmp_path, "--target", f"{GATE}:patches", "--sample", "8", "--resume", runner=runner)
    assert rc2 == 0 and len(runner.runs) == 5  # only the five not recorded ran again
    assert doc2["runs"]["cold"] == {"cold: not a pytest command": len(first.runs) + 5}  # both sessions' runs
    assert [(m["id"], m["outcome"]) for m in doc2["mutants"]] == [(m["id"], m["outcome"]) for m in doc["mutants"]]
    with pytest.raises(UsageError, match="started with other seed"):
        _campaign(tmp_path, "--target", f"{GATE}:patches", "--sample", "8", "--seed", "9", "--resume")


class _CtrlC:
    """A log that raises KeyboardInterrupt (as Ctrl-C does) once the second mutant has finished."""

    def write(self, text: str) -> None:
        if text.startswith("[deferlab] mutate: 2/"):
            raise KeyboardInterrupt

    def flush(self) -> None:
        pass


def test_ctrl_c_keeps_what_finished_and_resume_finishes(tmp_path: Path) -> None:
    argv = ("--out", str(tmp_path / "out"), "--timeout", "4", "--target", f"{GATE}:patches", "--sample", "8")
    assert mutate.run(_args(*argv, "--jobs", "1"), log=_CtrlC(), runner=FakeRunner()) == 130
    kept = mutate_run.ResultsFile(tmp_path / "out" / "mutants.jsonl").read()
    assert 2 <= len(kept) < 8 and not (tmp_path / "out" / "mutate.json").exists()
    runner = FakeRunner()
    assert mutate.run(_args(*argv, "--resume"), log=open(os.devnull, "w"), runner=runner) == 0
    assert len(runner.runs) == 8 - len(kept)
    doc = json.loads((tmp_path / "out" / "mutate.json").read_text())
    assert len(doc["mutants"]) == 8 and doc["timing"]["wall_seconds"] > 0  # both sessions' time


def test_a_newly_surviving_mutant_is_a_regression(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    argv = ("--target", f"{GATE}:should_defer", "--sample", "7")
    rc, doc, _ = _campaign(tmp_path / "a", *argv, "--baseline", str(base), "--update-baseline")
    assert rc == 0 and mutate_render.load_baseline(base)["outcomes"]
    survivor = doc["survivors"][0]
    saved = json.loads(base.read_text())
    saved["outcomes"][survivor] = "killed"
    base.write_text(json.dumps(saved))
    rc, doc, _ = _campaign(tmp_path / "b", *argv, "--baseline", str(base))
    assert rc == 1 and [r["id"] for r in doc["regressions"]] == [survivor]
    saved["outcomes"] = {"elsewhere:1:1:X:0": "killed"}
    base.write_text(json.dumps(saved))
    with pytest.raises(UsageError, match="shares no mutant"):
        _campaign(tmp_path / "c", *argv, "--baseline", str(base))


def test_equivalent_survivors_come_from_a_person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, doc, _ = _campaign(tmp_path / "a", "--target", f"{GATE}:should_defer", "--sample", "7")
    survivor = doc["survivors"][0]
    eq = tmp_path / "eq.toml"
    eq.write_text(f'[[equivalent]]\nid = "{survivor}"\nreason = "a tie never reaches the gate"\n')
    monkeypatch.setattr(mutate_render, "EQUIVALENT", eq)
    rc, doc, _ = _campaign(tmp_path / "b", "--target", f"{GATE}:should_defer", "--sample", "7")
    assert survivor not in doc["survivors"] and doc["counts"]["equivalent"] == 1
    eq.write_text('[[equivalent]]\nid = "x"\n')
    with pytest.raises(ValueError, match="needs a non-empty 'id' and 'reason'"):
        mutate_render.load_equivalent(eq)


def test_committed_files_load() -> None:
    """The equivalents file parses (it may be empty) and the CI baseline is a mutate baseline."""
    assert isinstance(mutate_render.load_equivalent(mutate_render.HERE / "mutate_equivalent.toml"), dict)
    doc = mutate_render.load_baseline(mutate_render.BASELINE)
    assert doc["spec"] == "0.5.23" and len(doc["outcomes"]) >= 8


def test_results_file_skips_a_torn_line(tmp_path: Path) -> None:
    f = mutate_run.ResultsFile(tmp_path / "r.jsonl")
    f.append({"id": "a", "outcome": "killed"})
    with open(f.path, "a") as fh:
        fh.write('{"id": "b", "outc')
    f.append({"id": "c", "outcome": "error"})
    assert sorted(f.read()) == ["a", "c"]
    assert mutate_run.pending(["a", "b", "c"], f.read()) == ["b", "c"]  # an error is retried


def test_provenance_text_names_functions() -> None:
    index = select.CodeIndex.build(FAKE, [])
    assert index.resolve("real: sglang.srt.gate.patches; modelled: the rest") == {f"{GATE}:patches"}
    assert index.resolve("the gate countdown and should_defer") == {f"{GATE}:should_defer"}  # no bare English words
    assert index.resolve("run_dp (never_called patched)") == set()


# --- the front door ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row", MUTATE_ROWS, ids=[r.id for r in MUTATE_ROWS])
def test_front_door_rows_refuse_before_any_work(row: Any, tmp_path: Path) -> None:
    runner = FakeRunner()
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    with pytest.raises(UsageError, match=row.match):
        mutate.run(parser.parse_args(row.argv(tmp_path)), log=open(os.devnull, "w"), runner=runner)
    assert runner.runs == [] and not (tmp_path / "out").exists()
