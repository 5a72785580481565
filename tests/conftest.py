"""deferlab's own tests (not shipped): the suite plugin the shipped checks use (`deferlab.properties.suite`).

Why the same plugin: these tests run claim searches too (the seam's proofs, the recorder's own tests), with
the same profiles, devices and recorder; a session over both trees registers it once.

``own_process``: a test that loads an engine with the transformers its release pins (a loader companion) cannot
run in a process that has imported another transformers already (a process holds one; which test ran before it on
an xdist worker is chance). Such a test runs here when no transformers is imported yet, and otherwise in a pytest
child of its own (this node alone), whose outcome is its outcome.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest_plugins = ("deferlab.properties.suite",)

OWN_PROCESS_ENV = "DEFERLAB_OWN_PROCESS"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "own_process: loads an engine's pinned transformers: a child of its own when one is imported here"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``own_process`` test in a child when this process has imported a transformers already."""
    if pyfuncitem.get_closest_marker("own_process") is None or os.environ.get(OWN_PROCESS_ENV):
        return None
    if "transformers" not in sys.modules:
        return None
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", pyfuncitem.nodeid]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, cwd=pyfuncitem.config.rootpath,
                          env={**os.environ, OWN_PROCESS_ENV: "1"}, check=False)  # fmt: skip
    tail = (proc.stdout + proc.stderr)[-4000:]
    if proc.returncode == 0 and " passed" in proc.stdout:
        return True
    if proc.returncode == 0 and " skipped" in proc.stdout:
        reason = next((ln.split("] ", 1)[-1] for ln in proc.stdout.splitlines() if ln.startswith("SKIPPED")), "")
        pytest.skip(f"in its own process: {reason or 'skipped'}")
    pytest.fail(f"in its own process (a transformers was imported here first), exit {proc.returncode}:\n{tail}")
    return None


# vLLM's in-process fixture loads the release's pinned transformers; the tests that import the installed one (the
# families' trained sides, LMDeploy's InternVL path) would make it impossible on the same xdist worker after them.
# Collected first, vLLM's tests are in the first batch each worker receives, so they run before any of those.
FIRST = ("tests/impl/vllm/",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    first = [i for i in items if i.nodeid.startswith(FIRST)]
    if first:
        items[:] = first + [i for i in items if not i.nodeid.startswith(FIRST)]
