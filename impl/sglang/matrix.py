"""Probe several SGLang versions, one subprocess each (a process holds one SGLang), and print a JSON table.

``python -m impl.sglang.matrix 0.5.18 0.5.23`` -> for each version: load time
(warm: from the cache; ``--cold``: into a fresh temporary cache, download and
unzip included), `features()`, the stand-in records, the provenance table
and, with ``--compare``, `compare.compare`'s disagreements with deferlab's
``impl``. A version that cannot be loaded reports its `SGLangSourceError`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[2]


def probe_one(spec: str, compare: bool) -> dict[str, Any]:
    """In this process: load ``spec`` and run every probe (the child side of `run`)."""
    t0 = time.perf_counter()
    from deferlab.impl.sglang import provenance
    from deferlab.impl.sglang.driver import SGLangImpl
    from deferlab.impl.sglang.sources import SGLangSourceError

    try:
        sgl = SGLangImpl(spec)
    except SGLangSourceError as e:
        return {"spec": spec, "error": str(e), "seconds": time.perf_counter() - t0}
    out: dict[str, Any] = {
        "spec": spec,
        "name": sgl.name,
        "downloaded": sgl.source.downloaded,
        "load_seconds": round(sgl.source.load_seconds, 2),
        "process_seconds_to_loaded": round(time.perf_counter() - t0, 2),
        "wheel": sgl.source.wheel,
    }
    out["features"] = sgl.features()
    out["stand_ins"] = [r.as_dict() for r in sgl.source.stand_ins if r.kind != "patched"]
    out["provenance"] = provenance.of(sgl)  # per function (the seam's per-method form folds these)
    if compare:
        from deferlab.impl.sglang.compare import compare as run_compare

        out["compare"] = run_compare(sgl)
    return out


def run(specs: list[str], *, cold: bool = False, compare: bool = False, timeout: int = 900) -> list[dict[str, Any]]:
    """`probe_one` for each spec in its own subprocess."""
    results = []
    for spec in specs:
        env = dict(os.environ)
        tmp = tempfile.mkdtemp(prefix="deferlab-cold-") if cold else None
        if tmp:
            env["DEFERLAB_CACHE"] = tmp
        cmd = [sys.executable, "-m", "deferlab.impl.sglang.matrix", "--child", spec] + (
            ["--compare"] if compare else []
        )
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=_REPO, env=env, capture_output=True, text=True, timeout=timeout)
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
        wall = round(time.perf_counter() - t0, 2)
        try:
            row = json.loads(proc.stdout[proc.stdout.index("{") :])
        except ValueError:
            row = {"spec": spec, "error": f"child exited {proc.returncode}: {proc.stderr[-2000:]}"}
        row["subprocess_seconds"] = wall
        row["cold"] = cold
        results.append(row)
    return results


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = {a for a in argv[1:] if a.startswith("--")}
    if "--child" in flags:
        print(json.dumps(probe_one(args[0], "--compare" in flags), default=str))
        return 0
    specs = args or [f"0.5.{n}" for n in range(17, 24)]
    print(json.dumps(run(specs, cold="--cold" in flags, compare="--compare" in flags), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
