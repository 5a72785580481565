"""Loading the real SGLang in tests: one rule for when a test may skip instead of fail, and its helpers.

Why: a released version's wheel that is not cached and cannot be downloaded
says nothing about SGLang or about the driver, so a test may skip on it, with
the reason. Every other load failure (an import error inside SGLang, a module
the driver does not stand in for, a source without the feature) is a finding
and must fail the test that hit it. The rule lives here once, keyed on
`impl.sglang.sources.SGLangFetchError` (a `loader.engine.FetchError`), so no test matches messages of its own.

A process holds one SGLang, so tests of other versions run a child process
(`run_child`, one output convention) and tests of source resolution build tiny
fake checkouts (`fake_sglang_tree`); both live here so each exists once, with
the small inputs several test files share.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from deferlab.properties.engines import default_spec, load_or_skip, skip_if_unfetched
from deferlab.reference.system.profiles import profile

REPO = Path(__file__).resolve().parents[3]
__all__ = ["default_spec", "load_or_skip", "skip_if_unfetched"]  # re-exported for the tests of this folder
JSON_MARK = "JSON:"  # a child prints its result as one line: this mark, then the JSON object
K3 = profile("kimi-k3")
L1 = profile("sglang-gate-test-l1")  # in_patch_limit 1 (SGLang's second gate case)
KIP = "sglang.srt.multimodal.kimi_k3_image_processing"


def u8(c: int, h: int, w: int, seed: int = 0) -> torch.Tensor:
    """A random uint8 (c, h, w) image tensor."""
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (c, h, w), dtype=np.uint8))


def run_child(
    code: str, *args: str, spec: str | None = None, timeout: float = 300, module: bool = False
) -> dict[str, Any]:
    """Run ``code`` (``python -c``; with ``module``, ``code`` names a module run with ``python -m``; in the
    repository, ``args`` as ``sys.argv[1:]``) and return its result: the object on its last line that starts
    with `JSON_MARK`.

    ``spec`` names the SGLang the child loads: if the child failed because that wheel cannot be fetched,
    the test skips (`skip_if_unfetched`). Any other failure (a non-zero exit, no result line) fails it.
    """
    proc = subprocess.run(
        [sys.executable, "-m" if module else "-c", code, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0 and spec is not None:
        skip_if_unfetched(spec, proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(JSON_MARK)]
    assert proc.returncode == 0 and lines, f"child {args} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len(JSON_MARK) :])


def fake_sglang_tree(root: Path, version: str, files: Mapping[str, str]) -> Path:
    """A tiny SGLang checkout at ``root``: ``python/sglang`` declaring ``version``, an ``srt/`` folder, and
    ``files`` (path under ``python/sglang`` -> text).

    Why so little: source resolution and the deferred-path check read files, so a few bytes stand for a
    checkout. The package ``__init__`` raises, because the driver must never run it.
    """
    pkg = root / "python" / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the package init must never run')\n")
    (pkg / "_version.py").write_text(f"__version__ = version = {version!r}\n")
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return root
