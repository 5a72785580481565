"""The one way the impl tests read a child process's answer: it prints its result as JSON on a line that starts
with ``JSON:``, the last such line counts.

Why a child at all: a process holds one engine (and one set of loader finders), so a test of another version or
of a fresh import runs in a child of its own; why one module: the loader's, vLLM's and transformers' tests all read
their children this way, with the same failure message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

MARK = "JSON:"


def json_of(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 120) -> dict[str, Any]:
    """Run ``argv`` (``env`` added to ours): the object on its last `MARK` line; a non-zero exit or no such line
    fails the test with the child's stderr."""
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, check=False
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    assert proc.returncode == 0 and lines, f"child exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len(MARK) :])


def json_child(module: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> dict[str, Any]:
    """``python -m MODULE ARGS`` in a child process: `json_of` its output."""
    return json_of([sys.executable, "-m", module, *args], env=env, timeout=timeout)
