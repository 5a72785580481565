"""The one in-process SGLang of this folder's tests (``DEFERLAB_SGLANG``, default the driver's release)."""

from __future__ import annotations

import pytest

from tests.impl.sglang.support import default_spec, load_or_skip


@pytest.fixture(scope="session")
def sgl():
    """`SGLangImpl` of the default release, loaded once (a skip only when its wheel cannot be fetched)."""
    from deferlab.impl.sglang.driver import SGLangImpl

    return load_or_skip(SGLangImpl, default_spec())
