"""Claim verdicts: read the property suite's results file, or run the suite to produce it.

The property suites record one verdict per (claim, policy) into
``properties/results/verdicts.json`` while pytest runs (schema in
`reference.system.claims`, the one parser of ``claims.toml``, which this CLI
shares with the suite without importing the test package). The report needs
every claim of claims.toml for at least `REQUIRED_POLICIES`, so a pair the
results lack is shown as ``not-run`` rather than silently dropped: a claim
nobody checked must look different from one that holds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from deferlab.reference.system import claims as registry
from deferlab.reference.system.claims import load_results as load_results  # the CLI reads verdicts.json here
from deferlab.reference.system.seam import SGLANG_LABEL

CLAIMS_TOML = registry.CLAIMS_PATH
RESULTS_DIR = registry.RESULTS_DIR
RESULTS_FILE = registry.RESULTS_FILE
REQUIRED_POLICIES = ("PR_33921", "RELEASED")
VERDICTS = registry.VERDICTS
REAL_LABEL = SGLANG_LABEL  # the one column of a real-code run


def load_claim_statements(path: Path = CLAIMS_TOML) -> dict[str, dict[str, str]]:
    """id -> {statement, source} for every claim of claims.toml (its one parser, strict), in file order."""
    return {cid: {"statement": c.statement, "source": c.source} for cid, c in registry.load_claims(path).items()}


def claim_table(
    results: dict[str, Any] | None, statements: dict[str, dict[str, str]], *, real_code: bool | None = None
) -> list[dict[str, Any]]:
    """One row per (claim, policy): every claim x REQUIRED_POLICIES, plus any other policy the results carry."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for row in (results or {}).get("claims", []):
        if isinstance(row, dict) and "id" in row and "policy" in row:
            found[(str(row["id"]), str(row["policy"]))] = row
    if real_code is None:
        real_code = bool((results or {}).get("system"))
    required = (REAL_LABEL,) if real_code else REQUIRED_POLICIES
    policies = list(required) + sorted({p for _, p in found} - set(required))
    ids = list(statements) + sorted({c for c, _ in found} - set(statements), key=_claim_key)
    table = []
    for cid in ids:
        for pol in policies:
            row = found.get((cid, pol))
            if row is None and pol not in required:
                continue
            row = row or {}
            verdict = row.get("verdict", "not-run")
            table.append(
                {
                    "id": cid,
                    "statement": row.get("statement") or statements.get(cid, {}).get("statement", ""),
                    "source": row.get("source") or statements.get(cid, {}).get("source", ""),
                    "policy": pol,
                    "verdict": verdict if verdict in VERDICTS else "not-run",
                    "evidence": str(row.get("evidence", "no result recorded for this claim and policy")),
                    "counterexample": row.get("counterexample"),
                    "provenance": row.get("provenance") or {},
                    "ran_on": ran_on(row.get("provenance") or {}),
                    **({"signatures": row["signatures"]} if isinstance(row.get("signatures"), list) else {}),
                }
            )
    return table


def ran_on(provenance: dict[str, str]) -> str:
    """One phrase for what a verdict's evidence ran on: the model, real code, or real code except named parts."""
    if not provenance:
        return "not recorded"
    if all(v == "model" for v in provenance.values()):
        return "deferlab's model"
    modelled = sorted(m for m, v in provenance.items() if v != "model" and not v.startswith("real"))
    partly = sorted(m for m, v in provenance.items() if v.startswith("real") and "modelled" in v)
    if not modelled and not partly:
        return "real code"
    parts = [f"{m} (modelled)" for m in modelled] + [f"{m} (partly modelled)" for m in partly]
    return "real code, except " + ", ".join(parts)


def stand_ins_by_kind(system: dict[str, Any]) -> dict[str, int]:
    """How many imports real SGLang needed were stood in for, per kind (a results file's ``system.stand_ins``)."""
    kinds: dict[str, int] = {}
    for s in system.get("stand_ins", []):
        kinds[s.get("kind", "?")] = kinds.get(s.get("kind", "?"), 0) + 1
    return kinds


def _claim_key(cid: str) -> tuple[int, str]:
    digits = "".join(ch for ch in cid if ch.isdigit())
    return (int(digits) if digits else 10**6, cid)


def suite_path() -> Path:
    """The folder of the ``properties`` package, checkout or installed.

    Given to pytest as a path (not ``--pyargs``) so its conftest is an initial
    conftest: the xdist controller, which collects nothing, must load the
    hooks that merge the workers' verdicts.
    """
    spec = importlib.util.find_spec("deferlab.properties")  # found, not imported: the CLI never loads the tests
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the deferlab.properties package (the property suite) is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def pytest_command(profile: str, impl: str | None = None, sglang: str | None = None) -> list[str]:
    """The property-suite command the report runs (``-n auto`` when pytest-xdist is installed); with
    ``sglang`` the claim tests on that real SGLang (``installed``, a checkout path, a version)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(suite_path() / "claims") if sglang else str(suite_path()),
        "-q",
        "-p",
        "no:cacheprovider",
        f"--hypothesis-profile={profile}",
    ]
    if importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", "auto"]
    if impl:
        cmd += ["--impl", impl]
    if sglang:
        cmd += ["--sglang", sglang]
    return cmd


def run_property_suite(
    profile: str,
    impl: str | None = None,
    *,
    results_dir: Path = RESULTS_DIR,
    log: Any = sys.stderr,
    sglang: str | None = None,
) -> int:
    """Run the suite (checkout or installed, see `suite_path`) in a subprocess, verdicts into ``results_dir``.

    Its output goes to ``log``; returns pytest's exit code. Exit 1 (some test
    failed) still leaves a results file; the report reads it and marks the
    step failed. Works from any directory: nothing is looked up by repo path.
    """
    env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(Path(results_dir).resolve())}
    proc = subprocess.run(pytest_command(profile, impl, sglang), env=env, stdout=log, stderr=log, check=False)
    return proc.returncode


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
