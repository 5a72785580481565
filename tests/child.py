"""Run a test's heavy part in a child process and read its one result line.

Why a child: an engine release, a pinned transformers or a video stack is loaded where it cannot leak into the
test session's modules (and a thread setting applies to that process only). The child prints its result as one
line, `JSON_MARK` then a JSON object; the last such line is the result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
JSON_MARK = "JSON:"  # a child prints its result as one line: this mark, then the JSON object


def run_child(
    code: str,
    *args: str,
    module: bool = False,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    on_failure: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``python -c code`` (``module``: ``python -m code``) in the repository with ``args`` and ``env`` added to the
    environment; the object on its last `JSON_MARK` line. ``on_failure(stderr)`` is asked first when the child
    exits non-zero (it may skip the test); a non-zero exit or no result line then fails the test."""
    proc = subprocess.run(
        [sys.executable, "-m" if module else "-c", code, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0 and on_failure is not None:
        on_failure(proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(JSON_MARK)]
    assert proc.returncode == 0 and lines, f"child {code} {args} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len(JSON_MARK) :])
