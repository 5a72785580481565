"""`impl.loader.sources`: a spec resolves to a checkout, the installed copy or a cached release, or is refused.

Resolution imports nothing, so it runs here on the fake project kept on disk; a release is a pre-seeded
cache (or a downloader that fails), never the network. Loading runs in a child (`support.run`).
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from deferlab.impl.loader import sources, wheels
from deferlab.impl.loader.engine import FetchError, SourceError
from tests.impl.loader.support import FAKE, PROJECT, run


def test_a_checkout_and_the_package_folder_resolve_to_the_same_root():
    root = (PROJECT / "python").resolve()
    for spec in (PROJECT, PROJECT / "python" / "fakeeng"):
        found = sources.resolve(FAKE, str(spec))
        assert (found.kind, found.root, found.version, found.downloaded) == ("checkout", root, "1.2.3", False)


def test_installed_is_whatever_the_interpreter_finds(monkeypatch):
    with pytest.raises(SourceError, match=r"^fakeeng source 'installed': no fakeeng package is importable"):
        sources.resolve(FAKE, "installed")
    monkeypatch.syspath_prepend(str(PROJECT / "python"))
    found = sources.resolve(FAKE, "installed")
    assert (found.kind, found.root, found.version) == ("installed", (PROJECT / "python").resolve(), "1.2.3")
    assert "fakeeng" not in sys.modules  # found, not imported


def test_a_version_comes_from_the_cache_without_a_download(tmp_path):
    tree = tmp_path / "1.2.3"
    (tree / "fakeeng").mkdir(parents=True)
    (tree / "deferlab-source.json").write_text(json.dumps({"version": "1.2.3", "wheel": "fakeeng-1.2.3.whl"}))

    def must_not_run(version, dest):
        raise AssertionError("a cached version was downloaded")

    found = sources.resolve(FAKE, "1.2.3", tmp_path, must_not_run)
    assert (found.kind, found.root, found.version, found.downloaded) == ("wheel", tree.resolve(), "1.2.3", False)
    assert found.wheel["wheel"] == "fakeeng-1.2.3.whl"


def test_every_refusal_names_the_spec_and_ends_with_what_is_accepted(tmp_path):
    def offline(version, dest):
        raise wheels.DownloadError("Network is unreachable", None)

    def listed(version, dest):
        raise wheels.DownloadError("no matching distribution", ["1.0", "1.1"])

    cases = [
        (str(tmp_path / "nowhere"), None, SourceError, "no such path"),
        ("latest", None, SourceError, "neither 'installed', an existing path nor a version"),
        (
            str(tmp_path),
            None,
            SourceError,
            re.escape("is not a FakeEng checkout (no python/fakeeng/ with __init__.py and core/,"),
        ),
        ("9.9", offline, FetchError, re.escape("could not fetch the wheel with pip download (Network is unreachable)")),
        (
            "9.9",
            listed,
            SourceError,
            r"the package index has no fakeeng==9.9 \(nearest: 1.1; newest: 1.0, 1.1; 2 listed\)",
        ),
    ]
    for spec, downloader, error, match in cases:
        with pytest.raises(error, match=match) as info:
            sources.resolve(FAKE, spec, tmp_path / "cache", downloader)
        assert str(info.value).endswith(FAKE.accepted) and "\n" not in str(info.value)
        assert (error is FetchError) == isinstance(info.value, FetchError)
    with pytest.raises(SourceError, match="not a non-empty string"):
        sources.check_spec(FAKE, "  ")


@pytest.mark.parametrize(
    ("spec", "nearest"),
    [
        ("9.9.9", "0.5.23"),  # nothing shared: the newest, not the oldest
        ("0.5.24", "0.5.23"),
        ("0.5.2", "0.5.2"),
        ("0.5.9.9", "0.5.9"),
        ("0.5.11", "0.5.12"),  # as far from 0.5.10 and 0.5.10.post1: the newer
        ("0.4.0", "0.4.9"),
        ("0.5.6", "0.5.6.post2"),
    ],
)
def test_nearest_release_prefers_shared_components_then_the_smallest_gap_then_the_newer(spec, nearest):
    listed = ["0.4.9", "0.5.2", "0.5.6.post1", "0.5.6.post2", "0.5.9", "0.5.10", "0.5.10.post1", "0.5.12", "0.5.23"]
    assert sources.nearest_release(spec, listed) == nearest


def test_an_unlisted_release_names_the_nearest_and_the_newest_not_the_whole_list():
    listed = [f"0.5.{n}" for n in range(40)]
    text = sources.known_releases("0.5.99", listed)
    assert text == "nearest: 0.5.39; newest: 0.5.37, 0.5.38, 0.5.39; 40 listed"
    assert sources.nearest_release("1.0", []) is None


def test_load_imports_the_required_modules_and_keeps_one_tree_per_process(tmp_path):
    other = tmp_path / "other"
    (other / "python" / "fakeeng" / "core").mkdir(parents=True)
    (other / "python" / "fakeeng" / "__init__.py").write_text("")
    got = run(
        """
        from deferlab.impl.loader import sources
        from deferlab.impl.loader.engine import SourceError
        s = sources.load(FAKE, sys.argv[1])
        out = {"name": s.name, "kind": s.kind, "required": list(s.required), "again": sources.load(FAKE, sys.argv[1]) is s,
               "double": s.module("fakeeng.core.required").double(21), "has": s.has("fakeeng.core.required")}
        try:
            sources.load(FAKE, sys.argv[2])
        except SourceError as e:
            out["other"] = str(e)
        print("JSON:" + json.dumps(out))
        """,
        str(other),
    )
    assert got["name"].startswith("fakeeng-1.2.3") and got["kind"] == "checkout" and got["again"] is True
    assert got["required"] == ["fakeeng.core.required"] and got["double"] == 42 and got["has"] is True
    assert f"this process already runs {got['name']} from" in got["other"]
    assert "one FakeEng version per process (run each version in its own subprocess)" in got["other"]


def test_offline_a_release_not_cached_is_refused_in_one_line_and_pip_never_runs(tmp_path, monkeypatch):
    from deferlab.impl.loader import integrity
    from tests.impl.loader.support import WHEEL_ENGINE, downloader, no_download

    for version in ("1.1.0", "1.0.0"):
        integrity.ensure(WHEEL_ENGINE, version, tmp_path, downloader())
    monkeypatch.setenv(wheels.OFFLINE_ENV, "1")
    monkeypatch.setattr(wheels, "pip_download", lambda *a: pytest.fail("pip was called offline"))
    for fetcher in (no_download, None):  # None: the default, pip
        with pytest.raises(FetchError) as info:
            sources.resolve(WHEEL_ENGINE, "1.2.0", tmp_path, fetcher)
        assert str(info.value) == (
            "fakeeng 1.2.0 is not cached and DEFERLAB_OFFLINE=1 forbids fetching it, so deferlab could not fetch "
            "the wheel; cached: 1.0.0, 1.1.0"
        )
    assert sources.resolve(WHEEL_ENGINE, "1.1.0", tmp_path, no_download).root == (tmp_path / "1.1.0").resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.0.0", "1.1.0"]  # nothing started


def test_offline_takes_only_a_yes_or_a_no(tmp_path, monkeypatch):
    from deferlab.reference.system.errors import InputValueError

    monkeypatch.setenv(wheels.OFFLINE_ENV, "sometimes")
    with pytest.raises(InputValueError, match=r"^DEFERLAB_OFFLINE='sometimes' is not accepted; accepted: 1, true"):
        sources.resolve(FAKE, "1.2.0", tmp_path, lambda v, d: pytest.fail("downloaded"))
    for value, offline in (("ON", True), (" 1 ", True), ("no", False), ("", False)):
        monkeypatch.setenv(wheels.OFFLINE_ENV, value)
        assert wheels.offline() is offline
