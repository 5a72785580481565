"""A claim's verdicts column by column, for ``--first-kill``: the stop file its plugin compares each recorded row
with, and the judging of a claim the stopped session ran only partly.

Why: a claim judged in more than one column (vLLM's plain and host-normalized paths; ``--model`` with several
families) records one row per column, and a campaign joins them into one verdict per claim (`runs.claims_of`).
Compared with that joined verdict, the first row always differed; a claim the session stopped inside was
"killed" by the columns it never reached (stop 36's vLLM video campaigns: every kill, the control too).
"""

from __future__ import annotations

from typing import Any

from deferlab.reports.core.runner import RunRecord
from deferlab.reports.mutate import select


def stop_document(reference: dict[str, Any]) -> dict[str, Any]:
    """What ``--first-kill``'s plugin compares each recorded claim row with (`properties.probes`): the reference's
    verdict and signature per claim *and per column*. A claim judged in two columns (vLLM's plain and
    host-normalized paths) records one row per column; compared with the claim's joined verdict, the first row
    always differed, the session stopped before the claim's other column ran, and every mutant (the control too)
    was "killed" by a column left not run."""
    columns: dict[str, dict[str, dict[str, str]]] = {}
    for row in reference.get("rows", []):
        columns.setdefault(str(row["id"]), {})[str(row.get("policy"))] = {
            "verdict": str(row["verdict"]), "signature": select.signature_of(row)}  # fmt: skip
    return {"claims": reference["claims"], "columns": columns, "tests": reference["tests"]}


def ran_columns(reference: dict[str, Any], record: RunRecord, unit: str) -> tuple[dict[str, str], dict[str, str]]:
    """(got, reference) of claim ``unit`` over the columns this run recorded, joined as `claims_of` joins them: a
    session ``--first-kill`` stopped after one column of a claim ran (its other columns' tests never started) is
    judged on what ran, not "killed" by the columns it did not reach."""
    want = stop_document(reference)["columns"].get(unit, {})
    ran = sorted((r for r in record.mine() if str(r["id"]) == unit), key=lambda r: str(r.get("policy")))
    got = {str(r.get("policy")): {"verdict": str(r["verdict"]), "signature": select.signature_of(r)} for r in ran}
    ref = {c: want.get(c, {"verdict": "not-run", "signature": ""}) for c in got}

    def joined(cols: dict[str, dict[str, str]]) -> dict[str, str]:
        return {"verdict": "; ".join(f"{c}={v['verdict']}" for c, v in cols.items()),
                "signature": " || ".join(f"{c}: {v['signature']}" for c, v in cols.items() if v["signature"])}  # fmt: skip

    return joined(got), joined(ref)
