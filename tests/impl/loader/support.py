"""The fake engine the loader's tests run (`FAKE`, kept on disk in ``fakeproject/``) and a child runner.

Why a child for anything that imports: the loader's finders and its import phase are per process, so a
fake engine loaded in the test process would share them with whichever real engine the process holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from deferlab.impl.loader.engine import Engine

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "fakeproject"  # a checkout: python/fakeeng/
MISSING = "deferlab_fake_missing_dep"  # the third-party module nobody has
FAKE = Engine(
    name="fakeeng",
    distribution="fakeeng",
    package="fakeeng",
    checkout_subdir="python",
    required=("fakeeng.core.required",),
    display="FakeEng",
    marker="core",
    example_version="1.2.3",
)


def run(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a child (``PROJECT`` as argv[1], then ``args``); the JSON it prints last."""
    head = "import json, sys\nfrom tests.impl.loader.support import FAKE, MISSING, PROJECT\n"
    proc = subprocess.run(
        [sys.executable, "-c", head + textwrap.dedent(code), str(PROJECT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("JSON:")]
    assert proc.returncode == 0 and lines, f"child exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][5:])
