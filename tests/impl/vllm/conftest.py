"""The one in-process vLLM of this folder's tests (``DEFERLAB_VLLM``, default the driver's release), loaded with
the companions its family paths run (transformers and torchvision at the release's pins), so every test of a
worker shares one tree; what needs another release or no companions runs in a child (`child`)."""

from __future__ import annotations

import os

import pytest

from deferlab.impl.vllm.sources import DEFAULT_VERSION
from deferlab.properties.engines import load_or_skip
from deferlab.reference.system import extras

COMPANIONS = ("transformers", "torchvision")


@pytest.fixture(scope="session")
def vllm_source():
    """The release's `Source` with its companions, loaded once (a skip only when a wheel cannot be fetched)."""
    from deferlab.impl.vllm import sources

    missing = extras.why_missing("vllm")
    if missing:
        pytest.skip(missing)
    spec = os.environ.get("DEFERLAB_VLLM", DEFAULT_VERSION)
    return load_or_skip(lambda s: sources.load(s, companions=COMPANIONS), spec, "vllm")


@pytest.fixture(scope="session")
def vll(vllm_source):
    """`VLLMPath` of the default release under vLLM's default settings."""
    from deferlab.impl.vllm.driver import VLLMPath

    return VLLMPath(vllm_source)
