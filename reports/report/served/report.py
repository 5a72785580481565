"""The report's served-vs-trained parts: vLLM's claim run, the claim table of an engine run, the served step
(the skew table) and the sweep step's C13 exhaustive geometry.

Why apart from `reports.report.run`: the runner orders steps; what a step does
with vLLM (a second pytest run under ``--vllm``, one subprocess, since the
plugin takes one engine per session) and with the served paths lives here,
so the runner stays one page.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system import claims as registry
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.seam import label_for
from deferlab.reports.report import claims
from deferlab.reports.report.served import images, skew
from deferlab.reports.report.served.paths import RunPaths
from deferlab.reports.report.steps import StepFailed

VLLM_LABEL = label_for("vllm")
NOT_VLLM = (
    "n/a: a claim about SGLang's PR #33921 (its gate, deferred items, owners, transports); vLLM has no such path, "
    "and claims.toml states nothing of vLLM for it (the suite skips it under --vllm)"
)


def vllm_claims(profile: str, spec: str, results_dir: Path, log: TextIO) -> dict[str, Any]:
    """The served claims (C13-C15) on vLLM ``spec`` in a subprocess: its results (StepFailed when pytest failed)."""
    from deferlab.reports.versions.matrix import vllm_claims_command

    env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(Path(results_dir).resolve())}
    proc = subprocess.run(vllm_claims_command(spec, profile), env=env, stdout=log, stderr=log, check=False)
    results = claims.load_results(results_dir)
    if proc.returncode != 0:
        raise StepFailed(f"pytest --vllm {spec} exited {proc.returncode}; verdicts read from what it recorded", results)
    return results


def merge_results(first: dict[str, Any] | None, vllm: dict[str, Any]) -> dict[str, Any]:
    """One results dict from an SGLang or model run and vLLM's: claims and properties side by side, each
    system kept (``system`` stays the first run's, ``systems`` names both)."""
    if first is None:
        return {**vllm, "systems": {"vllm": vllm.get("system")}}
    out = dict(first)
    out["claims"] = list(first.get("claims", [])) + list(vllm.get("claims", []))
    out["properties"] = list(first.get("properties", [])) + list(vllm.get("properties", []))
    out["systems"] = {"sglang": first.get("system"), "vllm": vllm.get("system")}
    return out


def vllm_claim_ids(statements: dict[str, dict[str, str]]) -> list[str]:
    """The claims claims.toml states for vLLM releases (``[claim.engines]`` rows naming vllm)."""
    found = registry.load_claims()
    return [c for c in statements if c in found and any(r.engine == "vllm" for r in getattr(found[c], "engines", ()))]


def claim_table(
    results: dict[str, Any] | None, statements: dict[str, dict[str, str]], *, sglang: bool, vllm: bool
) -> list[dict[str, Any]]:
    """`claims.claim_table`, plus vLLM's column when it ran: every vLLM claim has a row (``not-run`` when its
    run recorded none), the claims about SGLang's PR are ``n/a`` for vLLM (claims.toml states nothing of vLLM
    for them: it has no deferred path), and a vLLM-only run shows no empty SGLang column."""
    table = claims.claim_table(results, statements, real_code=sglang or vllm)
    if not vllm:
        return table
    if not sglang:
        table = [r for r in table if r["policy"] != claims.REAL_LABEL]
    applies = vllm_claim_ids(statements)
    for r in table:
        if r["policy"] == VLLM_LABEL and r["id"] not in applies and r["verdict"] == "not-run":
            r.update(verdict="n/a", evidence=NOT_VLLM)
    have = {r["id"] for r in table if r["policy"] == VLLM_LABEL}
    for cid in applies:
        if cid not in have:
            table.append(
                {
                    "id": cid,
                    "statement": statements[cid]["statement"],
                    "source": statements[cid]["source"],
                    "policy": VLLM_LABEL,
                    "verdict": "not-run",
                    "evidence": "no result recorded for this claim and vLLM",
                    "counterexample": None,
                    "provenance": {},
                    "ran_on": "not recorded",
                }
            )
    order = {c: i for i, c in enumerate(statements)}
    return sorted(table, key=lambda r: order.get(r["id"], len(order)))


def served_step(
    config: PreprocessConfig, paths: RunPaths, say: Callable[[str], None]
) -> tuple[dict[str, Any], list[skew.Column]]:
    """The skew table of every path of the run: (report.json's ``served``, the columns for the figures)."""
    found = paths.get()
    say(f"served: {len(found)} path(s): {', '.join(p.name for p in found)}")
    samples = images.samples()
    columns = skew.skew_table(found, config, samples, progress=say)
    doc = {**skew.table_dict(columns, samples), "config": config.name, "load_errors": dict(paths.errors)}
    if paths.errors:
        raise StepFailed("; ".join(paths.errors.values()), (doc, columns))
    return doc, columns


def geometry_step(
    config: PreprocessConfig, paths: RunPaths, max_side: int, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """C13 exhaustive over every path of the run (`reports.report.sweeps.geometry`); an engine that could not be loaded
    fails the step, the loaded paths' records are kept."""
    from deferlab.reports.report.sweeps.geometry import geometry_records

    records = geometry_records(paths.get(), config, max_side=max_side, progress=say)
    if paths.errors:
        raise StepFailed("; ".join(paths.errors.values()), records)
    return records
