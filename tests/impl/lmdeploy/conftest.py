"""The one in-process LMDeploy of this folder's tests (``DEFERLAB_LMDEPLOY``, default the driver's release), loaded
with the torchvision companion its InternVL pixel path runs; a skip only when a wheel cannot be fetched."""

from __future__ import annotations

import os

import pytest

from deferlab.impl.lmdeploy.sources import COMPANIONS, DEFAULT_VERSION
from deferlab.properties.engines import load_or_skip


@pytest.fixture(scope="session")
def lmdeploy_source():
    from deferlab.impl.lmdeploy import sources

    spec = os.environ.get("DEFERLAB_LMDEPLOY", DEFAULT_VERSION)
    return load_or_skip(lambda s: sources.load(s, companions=COMPANIONS), spec, "lmdeploy")


@pytest.fixture(scope="session")
def internvl_path(lmdeploy_source):
    from deferlab.impl.lmdeploy.internvl import InternVLPath

    return InternVLPath(lmdeploy_source)
