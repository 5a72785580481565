"""What the loader's tests run in a child process (a process holds one engine tree): ``python -m
tests.impl.loader.child SCENARIO SPEC``, printing one ``JSON:`` line (`support.child` reads it).

Scenarios (the cache is ``DEFERLAB_CACHE``, set by the test; nothing may be downloaded):

* ``load SPEC``: load `support.WHEEL_ENGINE` from SPEC; its stand-ins, what was mended, what the code computes.
* ``catches SPEC``: the same engine whose required module imports the helper inside ``except Exception``.
* ``companion TREE``: `support.FAKE_COMPANION` for the release whose METADATA is in TREE (`companions.load`,
  its wheel "downloaded" by `support.companion_downloader`, the index listing `support.COMPANION_LISTED`).
* ``declare -``: torchvision's operator schemas declared twice (`companions.declare_torchvision_ops`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from pathlib import Path
from typing import Any

from deferlab.impl.loader import sources
from deferlab.impl.loader.engine import SourceError
from tests.impl.loader.support import WHEEL_ENGINE, no_download


def _load(engine: Any, spec: str) -> dict[str, Any]:
    try:
        source = sources.load(engine, spec, downloader=no_download)
    except SourceError as e:
        return {"error": str(e), "type": type(e).__name__}
    return {
        "error": None,
        "kind": source.kind,
        "mended": source.wheel.get("mended", ""),
        "stand_ins": [r.as_dict() for r in source.stand_ins],
        "six_times": source.module("fakeeng.core.uses_helper").six_times(7),
    }


def _companion(tree: str) -> dict[str, Any]:
    import importlib
    import importlib.metadata

    from deferlab.impl.loader import companions
    from deferlab.impl.loader.provenance import Records
    from tests.impl.loader.support import COMPANION_LISTED, FAKE_COMPANION, companion_downloader

    records, calls = Records(), []
    load = companions.load
    got = load(FAKE_COMPANION, Path(tree), "fakeeng 1.2.3", records, lister=lambda _: COMPANION_LISTED,
               downloader=companion_downloader(calls))  # fmt: skip
    module = importlib.import_module("fakecomp.core")
    again = load(FAKE_COMPANION, Path(tree), "fakeeng 1.2.3", records, lister=None, downloader=None)
    return {
        "version": got.version,
        "requirement": got.requirement,
        "same": again is got,
        "downloads": calls,
        "init_ran": importlib.import_module("fakecomp").INIT_RAN,
        "metadata_version": importlib.metadata.version("fakecomp"),
        "core_file": module.__file__,
        "answer": module.answer(),
        "records": [r.as_dict() for r in records],
    }


def _declare() -> dict[str, Any]:
    import torch

    from deferlab.impl.loader import companions
    from deferlab.impl.loader.provenance import Records

    records = Records()
    first, second = companions.declare_torchvision_ops(records), companions.declare_torchvision_ops(records)
    try:
        torch.ops.torchvision.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
        called = "ran"
    except (RuntimeError, NotImplementedError) as e:
        called = type(e).__name__
    return {"first": first, "second": second, "records": [r.as_dict() for r in records], "called": called}


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    scenario, spec = argv
    if scenario in ("companion", "declare"):
        print("JSON:" + json.dumps(_companion(spec) if scenario == "companion" else _declare()), flush=True)
        return 0
    engine = WHEEL_ENGINE
    if scenario == "catches":
        engine = dataclasses.replace(WHEEL_ENGINE, required=("fakeeng.core.required", "fakeeng.core.catches_all"))
    print("JSON:" + json.dumps(_load(engine, spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
