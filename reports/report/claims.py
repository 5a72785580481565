"""The report's properties step and its claim table: the shipped checks of each system under test, run through
the one runner (`reports.core.runner`), read back as records and laid out one row per (claim, column).

Which systems: deferlab's model (or ``--impl``), else every real engine named (``--sglang``, ``--vllm``, each
plugin's ``--NAME``), one run each, their records side by side. Only the shipped checks run (``properties/claims``:
the claim tests and the ``real_code`` properties, as the suite selects them for the system), never deferlab's own
tests. A run whose child recorded nothing (or crashed) fails the step; a claim test failing on its verdict does
not: the verdict is in the record, and the baseline comparison decides. Every claim has a row in each column the
system must answer (``not-run`` when nothing recorded it; ``n/a`` where the engine answers no such claim), so a
claim nobody checked looks different from one that holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deferlab.reference.system import claims as registry
from deferlab.reference.system.families import family as family_facts
from deferlab.reference.system.systems import (
    DEFAULT_FAMILY,
    System,
    claim_key,
    engine_of_label,
    family_column,
    split_label,
)
from deferlab.reports.core import runner
from deferlab.reports.core.claims import new_signatures, ran_on
from deferlab.reports.core.executor import LocalExecutor, Task, run_all
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.core.sides import selected_families
from deferlab.reports.report.steps import StepFailed

REQUIRED_POLICIES = ("PR_33921", "RELEASED")  # the model's columns every claim must have
WORKERS = os.cpu_count() or 1


def systems(engines: Mapping[str, str], impl: str | None = None, family: str = DEFAULT_FAMILY) -> list[System]:
    """The systems one report checks: the real engines named (name -> spec, in the registry's order; each judging
    ``family``: one, a list or ``all``, each family's columns in the engine's one run), else deferlab's model
    (with ``impl``)."""
    named = [System(name, spec, family=family) for name, spec in engines.items()]
    return named or [System(impl=impl)]


def run_claims(
    targets: list[System], *, profile: str, strict: bool, work: Path, checked: bool = False, only: tuple[str, ...] = ()
) -> list[RunRecord]:
    """One runner record per system, each run's results and log under ``work/<engine>``; `StepFailed` (carrying
    every record) when a system could not be loaded or a run recorded nothing. ``checked``: the CLI already
    loaded each engine once (`runner.check_loads`), so the step need not again; ``only``: these claims' tests.

    Each system is a task of the one local executor (`reports.core.executor`), as ``versions``' releases are: its
    load check where it runs (`Task.load`: a spec that cannot load is a record with the loader's line), then the
    runner's child, whose results file the record is read from. One at a time: each run's xdist workers are the
    parallelism."""
    # One torch thread per xdist worker (`compare`'s setting): the workers are the parallelism; each with
    # torch's default pool (a thread per core) oversubscribes the cores, and OpenMP's spinning threads then
    # burn the CPU time the other worker needs. The same checks and examples; results do not depend on it.
    tasks = [
        Task(
            f"{i}:{system.key}",
            runner.Request(system, profile=profile, claims=only, strict=strict, workers=WORKERS, threads=1),
            retries=0,
            work=work / system.engine,
            load=system.real and not checked,
        )
        for i, system in enumerate(targets)
    ]
    found = run_all(LocalExecutor(1), tasks)
    records = [found[t.key].record or RunRecord(t.request.system, profile, error=found[t.key].error) for t in tasks]
    errors = [f"{r.system.key}: {r.error}" for r in records if r.error]
    if errors:
        raise StepFailed("; ".join(errors), records)
    return records


def read_claims(directory: Path) -> list[RunRecord]:
    """``--from-results DIR``: its verdicts.json as the one record (an engine's when its rows carry its label)."""
    doc = registry.load_results(directory)
    labels = (engine_of_label(str(r.get("policy"))) for r in doc["claims"] if isinstance(r, dict))
    facts = next((f for f in labels if f is not None), None)
    spec = str((doc.get("system") or {}).get("spec") or directory)
    system = System(facts.name, spec) if facts is not None else System()
    return [runner.read_results(RunRecord(system, str(doc.get("profile"))), Path(directory))]


def columns(record: RunRecord) -> tuple[list[str], list[str]]:
    """(the columns every claim must have, then every other column the record's rows carry). A real engine must
    have the default column of each family it was asked for (``--model``) and serves at its spec."""
    system = record.system
    if system.real:
        served = [
            f
            for f in selected_families(system.family)
            if family_facts(f).not_served(system.engine, str(system.spec)) is None
        ]
        required = [family_column(str(system.label), f) for f in served]
    else:
        required = list(REQUIRED_POLICIES)
    found = {str(r.get("policy")) for r in record.rows}
    return required, sorted(found - set(required))


def claim_table(records: list[RunRecord], statements: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """One row per (claim, column): every claim in each record's required columns, plus any other recorded one."""
    found = {(str(r["id"]), str(r["policy"])): (r, rec.system) for rec in records for r in rec.rows if "id" in r}
    cols: dict[str, tuple[System, bool]] = {}
    for rec in records:
        required, other = columns(rec)
        for col in required + other:
            cols.setdefault(col, (rec.system, col in required))
    ids = list(statements) + sorted({c for c, _ in found} - set(statements), key=claim_key)
    table = []
    for cid in ids:
        for col, (system, required) in cols.items():
            row = found.get((cid, col), (None, system))[0]
            if row is not None or required:
                table.append(_row(cid, col, row, statements.get(cid, {}), system))
    return table


def _row(cid: str, col: str, row: dict[str, Any] | None, statement: dict[str, str], system: System) -> dict[str, Any]:
    if row is None and system.real and not system.answers(cid, split_label(col)[0]):
        facts = system.facts
        row = {"verdict": "n/a", "evidence": f"n/a: {facts.display} answers {', '.join(facts.claims or ())} only; "
               f"claims.toml states nothing of {facts.display} for {cid} (the suite skips it)"}  # fmt: skip
    row = row or {}
    verdict = row.get("verdict", "not-run")
    out = {
        "id": cid,
        "statement": row.get("statement") or statement.get("statement", ""),
        "source": row.get("source") or statement.get("source", ""),
        "policy": col,
        "verdict": verdict if verdict in registry.VERDICTS else "not-run",
        "evidence": str(row.get("evidence", "no result recorded for this claim and column")),
        "counterexample": row.get("counterexample"),
        "provenance": row.get("provenance") or {},
        "ran_on": ran_on(row.get("provenance") or {}),
    }
    if isinstance(row.get("signatures"), list):
        out["signatures"] = row["signatures"]
    for key in ("impact", "figure"):  # what a finding states and draws (semantics §21.4, §21.7)
        if isinstance(row.get(key), dict):
            out[key] = row[key]
    new = new_signatures(row) if out["verdict"] == "fails" else []
    if new:  # a way of failing claims.toml does not document: failing, marked new (semantics §17.1)
        out["new_signatures"] = new
    return out


def properties(records: list[RunRecord]) -> list[dict[str, Any]]:
    """report.json's ``properties``: every test of every run, its system, outcome, seconds and failure line."""
    return [{"name": n, "system": r.system.key, **vars(t)} for r in records for n, t in sorted(r.tests.items())]


def failed_tests(records: list[RunRecord]) -> list[dict[str, str]]:
    """report.json's ``failed_tests``: each failed or erroring test with its failure line, as recorded."""
    return [{"system": r.system.key, "test": n, "message": m} for r in records for n, m in r.failed_tests().items()]


def ipc_claim_rows(verdicts: list[dict[str, Any]], statement: dict[str, str]) -> list[dict[str, Any]]:
    """Claim C9 per policy from ``sim.ipc.verdicts``: fails when any IPC property fails for that policy."""
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for v in verdicts:
        by_policy.setdefault(str(v.get("policy")), []).append(v)
    rows = []
    for pol, items in by_policy.items():
        failing = [v for v in items if v.get("verdict") == "fails"]
        rows.append(
            {
                "id": "C9",
                "statement": statement.get("statement", ""),
                "source": statement.get("source", ""),
                "policy": pol,
                "verdict": "fails" if failing else "holds",
                "evidence": "sim.ipc.verdicts: " + "; ".join(f"{v.get('property')}={v.get('verdict')}" for v in items),
                "counterexample": json.dumps(failing[0].get("counterexample"), default=str) if failing else None,
            }
        )
    return rows


def merge_rows(table: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill ``not-run`` rows of ``table`` from ``extra`` (same id and policy); recorded verdicts win."""
    index = {(r["id"], r["policy"]): r for r in extra}
    out = []
    for row in table:
        alt = index.pop((row["id"], row["policy"]), None)
        out.append(alt if (alt is not None and row["verdict"] == "not-run") else row)
    return out
