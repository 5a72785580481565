"""Fixtures' helpers for the ``test_reports_*`` files: a tiny config and results file so a whole report runs in seconds."""

from __future__ import annotations

import json
from pathlib import Path

from deferlab.reference.system.claims import claim_ids

CLAIM_IDS = list(claim_ids())  # every claim of claims.toml (a hard-coded range once left C12 out)

# patch 1, merge 1: byte-rule ties exist at tiny sizes, so `<` vs `<=` shows up on a 12 x 12 sweep.
TINY_MEDIA_CFG = {
    "patch_size": 1,
    "merge_kernel_size": 1,
    "in_patch_limit": 4,
    "patch_limit_on_one_side": 100,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}
FAST_ARGS = ["--sweep-max-side", "12", "--sweep-limits", "4", "9", "--skip", "ipc", "served", "sim", "bench", "plots"]


def write_config(directory: Path) -> Path:
    path = directory / "tiny.json"
    path.write_text(json.dumps({"media_proc_cfg": TINY_MEDIA_CFG}))
    return path


def write_results(directory: Path, verdicts: dict[str, str] | None = None) -> Path:
    """A schema-1 verdicts.json: every claim holds for PR_33921 and RELEASED unless ``verdicts`` says otherwise."""
    directory.mkdir(parents=True, exist_ok=True)
    claims = []
    for cid in CLAIM_IDS:
        for pol in ("PR_33921", "RELEASED"):
            v = (verdicts or {}).get(f"{cid}/{pol}", "holds")
            claims.append(
                {
                    "id": cid,
                    "statement": f"statement {cid}",
                    "source": "test",
                    "policy": pol,
                    "verdict": v,
                    "evidence": "test fixture",
                    "counterexample": "width=1 height=1" if v == "fails" else None,
                }
            )
    data = {
        "schema_version": 1,
        "generated_at": "2026-01-01T00:00:00+00:00",
        "profile": "dev",
        "impl": "deferlab",
        "claims": claims,
        "properties": [{"name": "test_x", "examples": 10, "outcome": "passed", "seconds": 0.1}],
    }
    (directory / "verdicts.json").write_text(json.dumps(data))
    return directory
