"""``--first-kill`` on a claim judged in several columns (vLLM's plain and host-normalized paths): each recorded row
is compared with its own column's reference, and a claim the stopped session ran partly is judged on what ran
(`reports.mutate.columns`). Stop 36's vLLM video campaigns counted every mutant, the control too, as killed."""

from __future__ import annotations

import json
from pathlib import Path

from deferlab.reports.mutate import columns
from deferlab.reports.mutate import runs as mutate_run
from tests.reports.test_mutate import _record, _session


def test_first_kill_compares_each_column_with_its_own_reference(tmp_path: Path) -> None:
    """A claim recorded in two columns (vLLM's plain and host-normalized paths) is compared column by column: the
    unmutated tree runs every test (the first row matched its column, not the claim's joined verdict, which every
    row differed from and stopped the session, leaving the second column not run: every mutant and the control
    "killed"), and a row that moved in the second column stops the session there."""
    (tmp_path / "test_cols.py").write_text(
        "import os\nfrom deferlab.properties import verdicts\n"
        "def test_claim_c16_a():\n    verdicts.record_claim('C16', 'SGLANG', 'fails', 'AssertionError: 3 frames')\n"
        "def test_claim_c16_b():\n    verdicts.record_claim('C16', 'SGLANG host-normalized', os.environ.get('V', 'n/a'), 'none')\n"
        "def test_claim_c17_c():\n    verdicts.record_claim('C17', 'SGLANG', 'holds', 'fine')\n"
    )
    stop = tmp_path / "stop.json"
    assert "3 passed" in _session(tmp_path, tmp_path / "test_cols.py", {}).stdout
    rows = [{"id": c, "policy": p, "verdict": v, "evidence": e} for c, p, v, e in (
        ("C16", "SGLANG", "fails", "AssertionError: 3 frames"), ("C16", "SGLANG host-normalized", "n/a", "none"),
        ("C17", "SGLANG", "holds", "fine"))]  # fmt: skip
    ref = {"claims": mutate_run.claims_of(_record(rows)), "rows": rows, "tests": {}}
    assert "=" in ref["claims"]["C16"]["verdict"]  # joined over the two columns
    stop.write_text(json.dumps(columns.stop_document(ref)))
    assert "3 passed" in _session(tmp_path, tmp_path / "test_cols.py", {mutate_run.STOP_ENV: str(stop)}).stdout
    out = _session(tmp_path, tmp_path / "test_cols.py", {mutate_run.STOP_ENV: str(stop), "V": "fails"}).stdout
    assert "2 passed" in out and "C16 saw the mutant" in out
    legacy = {"claims": ref["claims"], "tests": {}}  # a stop file without columns never stops on a joined verdict
    stop.write_text(json.dumps(legacy))
    assert (
        "3 passed"
        in _session(tmp_path, tmp_path / "test_cols.py", {mutate_run.STOP_ENV: str(stop), "V": "fails"}).stdout
    )


def test_a_claim_the_stopped_session_ran_partly_is_judged_on_the_columns_it_ran() -> None:
    """--first-kill stopped after C18 saw the mutant; C16's quick n/a column had run, its plain column had not:
    C16 is not "killed" by the column it never reached (the vLLM campaign's "killed by C16, C17, C18"), and a
    column that ran and moved still kills."""
    rows = [
        {"id": c, "policy": p, "verdict": v, "evidence": e}
        for c, p, v, e in (("C16", "SGLANG", "fails", "AssertionError: 3 frames"), ("C16", "SGLANG host-normalized", "n/a", "x"),
                           ("C18", "SGLANG", "holds", "fine"))
    ]  # fmt: skip
    ref = {"claims": mutate_run.claims_of(_record(rows)), "rows": rows, "tests": dict.fromkeys(["n::c16a", "n::c16b", "n::c18"], "passed")}  # fmt: skip
    nodes = {"C16": ["n::c16a", "n::c16b"], "C18": ["n::c18"]}
    moved = {**rows[2], "verdict": "fails", "evidence": "AssertionError: 2 s"}
    stopped = _record([rows[1], moved], {"n::c16b": "passed", "n::c18": "failed"})
    v = mutate_run.judge(ref, stopped, ["C16", "C18"], nodes, lambda: None)
    assert v.killed_by == ["C18"] and "C16" not in v.reasons
    inside = _record([{**rows[1], "verdict": "holds"}], {"n::c16b": "passed"})  # the column that ran moved
    assert mutate_run.judge(ref, inside, ["C16"], nodes, lambda: None).killed_by == ["C16"]
    assert columns.stop_document(ref)["columns"]["C16"]["SGLANG host-normalized"] == {"verdict": "n/a", "signature": ""}
