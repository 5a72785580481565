"""A pytest plugin of ``deferlab mutate --vllm`` (``-p deferlab.reports.mutate.vllm_plugin``): the claims
process's rows, recorded under the ``VLLM`` label, relabelled for `mutate_run.run_claims`.

Why: run_claims reads the rows recorded under the SGLang label only, and a
``--vllm`` session records its rows under ``VLLM``. Until run_claims takes the
label from its runner, this plugin rewrites, after the suite's own
``pytest_sessionfinish`` wrote it, the policy of the campaign's scratch results
file (``DEFERLAB_RESULTS_DIR/verdicts.json``, read by nothing but the
campaign), keeping the original as ``engine_policy``. A module of its own, so
the claims process imports nothing more than it needs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

FROM, TO = "VLLM", "SGLANG"  # reference.system.seam's labels (LABELS["vllm"], SGLANG_LABEL)


def relabel(results_dir: str | Path) -> bool:
    """Rewrite ``results_dir/verdicts.json``'s ``VLLM`` rows as ``SGLANG`` ones (atomically); whether it did."""
    path = Path(results_dir) / "verdicts.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict):
        return False
    for row in doc.get("claims", []):
        if isinstance(row, dict) and row.get("policy") == FROM:
            row["engine_policy"], row["policy"] = FROM, TO
    tmp = path.with_name(f".{path.name}.relabel")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)
    return True


def _results_dir() -> str | None:
    """Where the suite wrote this session's results: its recorder module's folder, else the environment's."""
    verdicts = sys.modules.get("deferlab.properties.verdicts")
    where = getattr(verdicts, "RESULTS_DIR", None)
    return str(where) if where is not None else os.environ.get("DEFERLAB_RESULTS_DIR")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """After the suite merged and wrote ``verdicts.json`` (its hook runs first): relabel the rows."""
    if session.config.getoption("--vllm", None) is None:
        return
    where = _results_dir()
    if where:
        relabel(where)
