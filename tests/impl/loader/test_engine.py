"""`impl.loader.engine`: an engine's description words every error, and names what it owns."""

from __future__ import annotations

import dataclasses

import pytest

from deferlab.impl.loader.engine import VERSION, Engine, FetchError, SourceError
from deferlab.reference.system.errors import SourceError as InputSourceError
from tests.impl.loader.support import FAKE


def test_the_accepted_sentence_follows_the_layout():
    assert FAKE.package_path == "python/fakeeng"
    assert FAKE.accepted == (
        "accepted: 'installed' (the fakeeng importable here), a path to a FakeEng source checkout (a folder "
        "holding python/fakeeng/, or the fakeeng package folder itself), or a release version such as '1.2.3' "
        "(fetched with pip download into the deferlab cache)"
    )
    flat = Engine(name="flat", distribution="flat", package="flat")  # a checkout with the package at its root
    assert flat.package_path == "flat" and "a folder holding flat/" in flat.accepted and flat.title == "flat"


def test_it_owns_its_package_only_and_is_frozen():
    assert FAKE.owns("fakeeng") and FAKE.owns("fakeeng.core.required")
    assert not FAKE.owns("fakeengine") and not FAKE.owns("torch")
    with pytest.raises(dataclasses.FrozenInstanceError):
        FAKE.name = "other"


def test_the_errors_and_the_version_pattern():
    assert issubclass(FetchError, SourceError) and issubclass(SourceError, InputSourceError)
    assert FAKE.source_error is SourceError and FAKE.fetch_error is FetchError
    assert VERSION.match("0.5.23") and VERSION.match("1.2.3rc1.post2") and not VERSION.match("latest")
