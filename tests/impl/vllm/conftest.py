"""The one in-process vLLM of this folder's tests (``DEFERLAB_VLLM``, default the driver's release)."""

from __future__ import annotations

import os

import pytest

from deferlab.impl.vllm.sources import DEFAULT_VERSION, VLLMFetchError


@pytest.fixture(scope="session")
def vll():
    """`VLLMPath` of the default release, loaded once (a skip only when its wheel cannot be fetched)."""
    from deferlab.impl.vllm.driver import VLLMPath

    spec = os.environ.get("DEFERLAB_VLLM", DEFAULT_VERSION)
    try:
        return VLLMPath(spec)
    except VLLMFetchError as e:
        pytest.skip(f"vllm {spec} is not cached and pip cannot reach the package index: {e}")
