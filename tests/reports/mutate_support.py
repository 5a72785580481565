"""What the ``deferlab mutate`` test files share: a campaign on the fake tree and the wait on its store.

Why a module: `test_mutate` (mutants, selection, outcomes, the front door) and `test_mutate_resume` (the
store, resume, the baseline, the equivalents) run the same fake campaign (`campaign`, with `mutate_args`), each
test with its own reference cache and no equivalents file (`isolate`); `test_faults` waits, as
`test_mutate_resume` does, until a running campaign's store holds its control (`control_done`). Importing it
skips the importing test file where cosmic-ray (the deferlab[mutate] extra) is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray", reason="deferlab mutate's operators are the deferlab[mutate] extra (cosmic-ray)")

from deferlab.reports.mutate import cli as mutate
from deferlab.reports.mutate import render as mutate_render
from deferlab.reports.mutate.store import Store
from tests.reports.mutate_fake.fakes import FAKE, FakeHarness

GATE = "sglang/srt/gate.py"


def mutate_args(*argv: str) -> argparse.Namespace:
    """``deferlab mutate --sglang FAKE ARGV...`` as the command's parser reads it."""
    parser = argparse.ArgumentParser()
    mutate.add_parser(parser.add_subparsers())
    return parser.parse_args(["mutate", "--sglang", str(FAKE), *argv])


def isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's own reference cache, and no equivalents file (every survivor counts)."""
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))  # the reference cache, per test
    monkeypatch.setattr(mutate_render, "EQUIVALENT", tmp_path / "none.toml")


def campaign(tmp_path: Path, *argv: str, harness: FakeHarness | None = None) -> tuple[int, dict, FakeHarness]:
    """``deferlab mutate`` on the fake with ``argv`` into ``tmp_path/out``: (exit status, mutate.json, harness)."""
    harness = harness or FakeHarness()
    out = tmp_path / "out"
    rc = mutate.run(mutate_args("--out", str(out), "--timeout", "4", *argv), log=open(os.devnull, "w"), harness=harness)
    doc = json.loads((out / "mutate.json").read_text()) if (out / "mutate.json").is_file() else {}
    return rc, doc, harness


def control_done(out: Path) -> bool:
    """Whether the campaign's store (another process writes it) holds the control's outcome."""
    if not Store.holds_campaign(out):
        return False
    db = sqlite3.connect(f"file:{out / 'campaign.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT 1 FROM doc WHERE name = 'control'").fetchone() is not None
    finally:
        db.close()
