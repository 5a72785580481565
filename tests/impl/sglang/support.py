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
the small inputs several test files share. The normalization-only families' tests
(MiMo-V2, Step3-VL, MiniCPM-V) run their path the same way too: a child per
release (`release_child`) that records what a call expected refused came to
(`outcome`), CLIP's statistics and the float32 bit view (`bits`) they state
their arithmetic with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from deferlab.properties.engines import default_spec, load_or_skip, skip_if_unfetched
from deferlab.reference.system.profiles import profile
from tests import child
from tests.child import JSON_MARK, REPO

__all__ = [
    "JSON_MARK",
    "REPO",
    "default_spec",
    "load_or_skip",
    "skip_if_unfetched",
]  # re-exported for the tests of this folder
K3 = profile("kimi-k3")
L1 = profile("sglang-gate-test-l1")  # in_patch_limit 1 (SGLang's second gate case)
KIP = "sglang.srt.multimodal.kimi_k3_image_processing"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def u8(c: int, h: int, w: int, seed: int = 0) -> torch.Tensor:
    """A random uint8 (c, h, w) image tensor."""
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (c, h, w), dtype=np.uint8))


def run_child(
    code: str, *args: str, spec: str | None = None, timeout: float = 300, module: bool = False
) -> dict[str, Any]:
    """`tests.child.run_child`, and ``spec``: the SGLang the child loads; if the child failed because that wheel
    cannot be fetched, the test skips (`skip_if_unfetched`). Any other failure fails it."""
    on_failure = None if spec is None else lambda err: skip_if_unfetched(spec, err)
    return child.run_child(code, *args, module=module, timeout=timeout, on_failure=on_failure)


def release_child(code: str, release: str) -> dict[str, Any]:
    """``code`` run in a child on SGLang ``release`` (``"newest"``: the default spec) with the first argument the
    spec, as the family tests' children run (900 s: they load SGLang with its companions); skips as `run_child`."""
    spec = default_spec() if release == "newest" else release
    return run_child(code, spec, spec=spec, timeout=900)


def outcome(call: Callable[[], object], answered: str = "answered") -> str:
    """What a call a child expects refused came to, as its test reads it: the one-line ``Type: message`` of the
    exception it raised, or ``answered`` (a format string given the call's result) if it returned."""
    try:
        result = call()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return answered.format(result)


def bits(a: np.ndarray) -> np.ndarray:
    """``a``'s float32 bit patterns, so arrays compare bitwise (-0.0 and NaN included)."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


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
