"""The one in-process LMDeploy of this folder's tests (``DEFERLAB_LMDEPLOY``, default the driver's release), loaded
with the torchvision companion its InternVL pixel path runs; a skip only when a wheel cannot be fetched."""

from __future__ import annotations

import os

import pytest

from deferlab.impl.lmdeploy.sources import COMPANIONS, DEFAULT_VERSION, LMDeployFetchError


@pytest.fixture(scope="session")
def lmdeploy_source():
    from deferlab.impl.lmdeploy import sources

    spec = os.environ.get("DEFERLAB_LMDEPLOY", DEFAULT_VERSION)
    try:
        return sources.load(spec, companions=COMPANIONS)
    except LMDeployFetchError as e:
        pytest.skip(f"lmdeploy {spec} (or torchvision) is not cached and pip cannot reach the package index: {e}")


@pytest.fixture(scope="session")
def internvl_path(lmdeploy_source):
    from deferlab.impl.lmdeploy.internvl import InternVLPath

    return InternVLPath(lmdeploy_source)
