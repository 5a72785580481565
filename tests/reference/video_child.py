"""Running a test file's trained-side tests in a pytest process of their own (semantics §20.4's trained sides need
torchvision through the loader's companion before transformers is first imported; the whole suite imports it first).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def run_in_a_child(here: Path, probe: Callable[[], Any], tests: str, env: str) -> None:
    """The ``tests`` of the file ``here`` in a pytest process of their own (``env`` set), all passing, none skipped,
    when ``probe`` (building a trained side) skips with "run in a child" here (skipped when it builds)."""
    if os.environ.get(env):
        pytest.skip("this is the child")
    try:
        probe()
    except pytest.skip.Exception as e:
        if "run in a child" not in str(e):
            raise
    else:
        pytest.skip("the trained sides run in this process")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here), "-k", tests],
        capture_output=True, text=True, timeout=900, env={**os.environ, env: "1"}, cwd=here.parents[2],
    )  # fmt: skip
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert " passed" in last and " skipped" not in last, last
