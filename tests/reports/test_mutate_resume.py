"""``deferlab mutate``'s campaign store on the fake engine tree: an interrupted campaign resumes (Ctrl-C, SIGTERM,
pending rows), a re-render reads the store alone, the baseline gates a newly surviving mutant, and equivalent
survivors come from a person's file.

Split from `test_mutate` (the mutants, selection and outcomes) by what is checked: what a campaign keeps across
sessions; the fake campaign both run is `mutate_support`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from deferlab.reference.system.errors import UsageError
from deferlab.reports.mutate import cli as mutate
from deferlab.reports.mutate import render as mutate_render
from deferlab.reports.mutate import runs as mutate_run
from deferlab.reports.mutate.store import Store
from tests.reports.mutate_fake.fakes import FAKE, FakeHarness, descendants, still_running
from tests.reports.mutate_support import GATE, campaign, control_done, isolate, mutate_args

pytestmark = pytest.mark.extra("mutate")  # selected by CI's `-m extra` phase, skipped (naming it) without


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(tmp_path, monkeypatch)  # the reference cache, per test


# --- resume, baseline, equivalents ---------------------------------------------------------------------------------
def test_an_interrupted_campaign_resumes_its_pending_rows_from_the_store(tmp_path: Path) -> None:
    argv = ("--target", f"{GATE}:patches", "--sample", "8")
    rc, doc, first = campaign(tmp_path, *argv)
    store = Store(tmp_path / "out")
    done = store.records()
    rows = sorted(m["id"] for m in done)
    store.db.execute("UPDATE mutant SET outcome = NULL, record = NULL WHERE id IN (?, ?, ?)", rows[:3])
    store.db.execute("UPDATE mutant SET outcome = 'error' WHERE id = ?", (rows[3],))  # a harness error: retried
    assert store.pending() == rows[:4]
    store.close()
    harness = FakeHarness()
    rc2, doc2, harness = campaign(tmp_path, *argv, "--resume", harness=harness)
    assert rc2 == 0 and len(harness.runs) == 4  # only the pending ones ran: no reference, no control
    assert doc2["runs"]["cold"] == {"cold: warm forks off": len(first.runs) + 4}  # both sessions' runs
    assert [(m["id"], m["outcome"]) for m in doc2["mutants"]] == [(m["id"], m["outcome"]) for m in doc["mutants"]]
    with pytest.raises(UsageError, match="started with other seed"):
        campaign(tmp_path, *argv, "--seed", "9", "--resume")


def test_a_rerender_reads_only_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing pending, ``--resume`` renders mutate.json/md/png from the store alone: nothing runs and
    nothing loads (the engine's broken tree would not)."""
    tree = tmp_path / "tree"
    shutil.copytree(FAKE, tree)
    argv = ("--sglang", str(tree), "--target", f"{GATE}:should_defer", "--sample", "4")
    rc, doc, _ = campaign(tmp_path, *argv)
    for name in ("mutate.json", "mutate.md", "mutate.png"):
        (tmp_path / "out" / name).unlink()
    (tree / GATE).write_text((tree / GATE).read_text().replace("if not 1 < 2", "if 1 < 2"))  # no longer loads
    monkeypatch.setattr(mutate_run.Harness, "load_error", lambda *a, **k: pytest.fail("a re-render loaded the tree"))
    monkeypatch.setattr(mutate_run.Pool, "map", lambda *a, **k: pytest.fail("a re-render ran something"))
    harness = FakeHarness()
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    args = parser.parse_args(["mutate", *argv, "--out", str(tmp_path / "out"), "--timeout", "4", "--resume"])
    assert mutate.run(args, log=open(os.devnull, "w"), harness=harness) == 0 and harness.runs == []
    again = json.loads((tmp_path / "out" / "mutate.json").read_text())
    same = ("mutants", "counts", "kill_rate", "control", "reference", "targets", "runs")
    assert {k: again[k] for k in same} == {k: doc[k] for k in same}
    assert (tmp_path / "out" / "mutate.png").is_file() and (tmp_path / "out" / "mutate.md").is_file()


class _CtrlC:
    """A log that raises KeyboardInterrupt (as Ctrl-C does) once the second mutant has finished."""

    def write(self, text: str) -> None:
        if text.startswith("[deferlab] mutate: 2/"):
            raise KeyboardInterrupt

    def flush(self) -> None:
        pass


def test_ctrl_c_keeps_what_finished_and_resume_finishes(tmp_path: Path) -> None:
    argv = ("--out", str(tmp_path / "out"), "--timeout", "4", "--target", f"{GATE}:patches", "--sample", "8")
    assert mutate.run(mutate_args(*argv, "--jobs", "1"), log=_CtrlC(), harness=FakeHarness()) == 130
    store = Store(tmp_path / "out")
    kept = store.records()
    assert 2 <= len(kept) < 8 and len(store.pending()) == 8 - len(kept)
    assert not (tmp_path / "out" / "mutate.json").exists()
    store.close()
    harness = FakeHarness()
    assert mutate.run(mutate_args(*argv, "--resume"), log=open(os.devnull, "w"), harness=harness) == 0
    assert len(harness.runs) == 8 - len(kept)
    doc = json.loads((tmp_path / "out" / "mutate.json").read_text())
    assert len(doc["mutants"]) == 8 and doc["timing"]["wall_seconds"] > 0  # both sessions' time


def test_sigterm_mid_campaign_leaves_no_process_and_exits_143(tmp_path: Path) -> None:
    """``deferlab mutate`` (the CLI's main, the fake's harness) stopped with SIGTERM while it runs a hanging mutant:
    exit 143, no process of its left, and the campaign resumable from its store."""
    import signal
    import time

    out = tmp_path / "out"
    hangs = f"{GATE}:14:14:ReplaceBinaryOperator_Sub_Add:0"  # countdown's n - 1 -> n + 1: never ends
    cmd = [sys.executable, str(FAKE.parent / "fakes.py"), "mutate", "--sglang", str(FAKE), "--out", str(out),
           "--mutants", hangs, "--timeout", "60", "--jobs", "1"]  # fmt: skip
    env = {**os.environ, "DEFERLAB_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (control_done(out) and descendants(proc.pid)):
            time.sleep(0.2)  # the control finished: the hanging mutant's claims process runs
        running = descendants(proc.pid)
        assert any("claims.py" in p for p in running), running
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert not still_running(running), running
    assert "--resume --out" in err and Store(out).pending() == [hangs]  # resumable: the mutant is pending


def test_a_newly_surviving_mutant_is_a_regression(tmp_path: Path) -> None:
    """The baseline (`reports.core.baseline`, written as schema 2) gates every changed outcome (`reports.core.diff`,
    the mutant as subject): a mutant it saw killed that survives now; the committed schema-1 file still reads."""
    base = tmp_path / "baseline.json"
    argv = ("--target", f"{GATE}:should_defer", "--sample", "7")
    rc, doc, _ = campaign(tmp_path / "a", *argv, "--baseline", str(base), "--update-baseline")
    saved = json.loads(base.read_text())
    assert rc == 0 and saved["schema_version"] == 2 and saved["kind"] == "mutate"
    assert saved["cells"][str(FAKE)] == {m["id"]: m["outcome"] for m in doc["mutants"]}
    survivor = doc["survivors"][0]
    saved["cells"][str(FAKE)][survivor] = "killed"
    base.write_text(json.dumps(saved))
    rc, doc, _ = campaign(tmp_path / "b", *argv, "--baseline", str(base))
    assert rc == 1 and doc["regressions"] == [{"id": survivor, "baseline": "killed", "current": "survived"}]
    assert f"- `{survivor}`: killed -> survived" in (tmp_path / "b" / "out" / "mutate.md").read_text()
    saved["cells"] = {"x": {"elsewhere:1:1:X:0": "killed"}}
    base.write_text(json.dumps(saved))
    with pytest.raises(UsageError, match="shares no mutant"):
        campaign(tmp_path / "c", *argv, "--baseline", str(base))


def test_equivalent_survivors_come_from_a_person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rc, doc, _ = campaign(tmp_path / "a", "--target", f"{GATE}:should_defer", "--sample", "7")
    survivor = doc["survivors"][0]
    eq = tmp_path / "eq.toml"
    eq.write_text(f'[[equivalent]]\nid = "{survivor}"\nreason = "a tie never reaches the gate"\n')
    monkeypatch.setattr(mutate_render, "EQUIVALENT", eq)
    rc, doc, _ = campaign(tmp_path / "b", "--target", f"{GATE}:should_defer", "--sample", "7")
    assert survivor not in doc["survivors"] and doc["counts"]["equivalent"] == 1
    eq.write_text('[[equivalent]]\nid = "x"\n')
    with pytest.raises(ValueError, match="needs a non-empty 'id' and 'reason'"):
        mutate_render.load_equivalent(eq)


def test_committed_files_load() -> None:
    """The equivalents file parses (it may be empty) and the CI baseline is a mutate baseline (schema 1 or 2)."""
    assert isinstance(mutate_render.load_equivalent(mutate_render.HERE / "mutate_equivalent.toml"), dict)
    pinned = mutate_render.load_baseline(mutate_render.BASELINE)
    assert pinned.kind == "mutate" and pinned.meta["spec"] == "0.5.23" and len(pinned.cells["0.5.23"]) >= 8


def test_the_store_keeps_what_finished_and_retries_errors(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert not Store.holds_campaign(tmp_path)  # no plan yet
    store.plan_mutants({"a": {"x": 1}, "b": {"x": 2}, "c": {"x": 3}})
    store.put("plan", {"seed": 1})
    store.finish({"id": "a", "outcome": "killed", "seconds": 1.5})
    store.finish({"id": "c", "outcome": "error", "seconds": 0})
    store.add_session(2.0, {"enabled": True, "warm": 3, "cold": {"cold: x": 1}})
    store.add_session(1.0, {"enabled": True, "warm": 1, "cold": {"cold: x": 2}})
    store.close()
    again = Store(tmp_path)
    assert Store.holds_campaign(tmp_path) and again.get("plan") == {"seed": 1}
    assert again.pending() == ["b", "c"]  # an error is retried
    assert [r["id"] for r in again.records()] == ["a", "c"] and again.specs()["b"] == {"x": 2}
    assert again.sessions() == (3.0, {"enabled": True, "warm": 4, "cold": {"cold: x": 3}})
    again.close()
