"""What the loader's tests run in a child process (a process holds one engine tree): ``python -m
tests.impl.loader.child SCENARIO SPEC``, printing one ``JSON:`` line (`support.child` reads it).

Scenarios (the cache is ``DEFERLAB_CACHE``, set by the test; nothing may be downloaded):

* ``load SPEC``: load `support.WHEEL_ENGINE` from SPEC; its stand-ins, what was mended, what the code computes.
* ``catches SPEC``: the same engine whose required module imports the helper inside ``except Exception``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
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


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    scenario, spec = argv
    engine = WHEEL_ENGINE
    if scenario == "catches":
        engine = dataclasses.replace(WHEEL_ENGINE, required=("fakeeng.core.required", "fakeeng.core.catches_all"))
    print("JSON:" + json.dumps(_load(engine, spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
