"""A cached release is checked against its wheel's RECORD on load and mended; a damaged cache never becomes a verdict.

The cache is a temporary ``DEFERLAB_CACHE`` filled by `wheels.fetch` from the fake engine's wheel
(`support.make_wheel`: the fake project's files and a compiled module, with a RECORD); nothing is downloaded
except where a test hands in a downloader and counts its calls.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from deferlab.impl.loader import integrity, wheels
from deferlab.impl.loader.engine import FETCH_FAILED
from tests.impl.loader.support import KERNEL, WHEEL_ENGINE, child, downloader, no_download, wheel_files

HELPER = "fakeeng/core/helper.py"
REQUIRED = "fakeeng/core/required.py"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deferlab cache holding the fake engine's release 1.0.0 (fetched, verified, stamped)."""
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path))
    monkeypatch.delenv(wheels.OFFLINE_ENV, raising=False)
    ready = integrity.ensure(WHEEL_ENGINE, "1.0.0", None, downloader())
    assert ready.downloaded and ready.tree == tmp_path / "fakeeng" / "1.0.0"
    return tmp_path


def _tree(cache: Path) -> Path:
    return cache / "fakeeng" / "1.0.0"


def test_a_fresh_release_keeps_its_wheel_and_record_and_unpacks_only_what_the_engine_takes(cache: Path) -> None:
    tree = _tree(cache)
    assert (tree / wheels.WHEEL_DIR / "fakeeng-1.0.0-py3-none-any.whl").is_file()
    assert KERNEL in (tree / wheels.RECORD).read_text() and not (tree / KERNEL).exists()
    assert (tree / HELPER).read_bytes() == wheel_files()[HELPER]
    assert integrity.status(WHEEL_ENGINE, tree) == ("verified", "")


def test_a_deleted_an_altered_and_an_added_file_are_mended_from_the_kept_wheel(cache: Path) -> None:
    tree = _tree(cache)
    (tree / HELPER).unlink()
    (tree / REQUIRED).write_text("def double(x):\n    return 2 * x + 1\n")  # a changed line
    (tree / "fakeeng" / "core" / "stray.py").write_text("X = 1\n")
    assert integrity.status(WHEEL_ENGINE, tree)[0] == "damaged"
    ready = integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert not ready.downloaded
    assert "1 missing (fakeeng/core/helper.py), 1 altered (fakeeng/core/required.py), 1 extra" in ready.mended
    assert "mended from its kept wheel fakeeng-1.0.0-py3-none-any.whl" in ready.mended
    for path in (HELPER, REQUIRED):
        assert (tree / path).read_bytes() == wheel_files()[path]
    assert not (tree / "fakeeng" / "core" / "stray.py").exists()
    assert integrity.status(WHEEL_ENGINE, tree) == ("verified", "")


def test_an_unchanged_tree_is_not_hashed_again(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def hashed(data: bytes) -> str:
        raise AssertionError("a stamped, unchanged tree was hashed")

    monkeypatch.setattr(integrity, "digest", hashed)
    assert integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download).mended == ""
    (_tree(cache) / HELPER).touch()  # an mtime changed: hashed again
    with pytest.raises(AssertionError, match="was hashed"):
        integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)


def test_a_damaged_record_copy_is_restored_from_the_wheel_it_came_from(cache: Path) -> None:
    tree = _tree(cache)
    (tree / wheels.RECORD).write_text((tree / wheels.RECORD).read_text().replace("sha256=", "sha256=x", 1))
    ready = integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert "mended from its kept wheel" in ready.mended
    assert (tree / wheels.RECORD).read_bytes() == _record_in_wheel(tree)
    assert integrity.status(WHEEL_ENGINE, tree) == ("verified", "")


def _record_in_wheel(tree: Path) -> bytes:
    import zipfile

    with zipfile.ZipFile(wheels.kept_wheel(tree)) as zf:
        return zf.read("fakeeng-1.0.0.dist-info/RECORD")


def test_without_its_wheel_a_damaged_tree_is_fetched_again_or_refused_offline(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(cache)
    (tree / wheels.WHEEL_DIR / "fakeeng-1.0.0-py3-none-any.whl").unlink()
    (tree / HELPER).unlink()
    monkeypatch.setenv(wheels.OFFLINE_ENV, "1")
    with pytest.raises(wheels.OfflineError) as info:
        integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    text = str(info.value)
    assert "fakeeng 1.0.0 is damaged" in text and "1 missing (fakeeng/core/helper.py)" in text
    assert "its kept wheel is gone" in text and "DEFERLAB_OFFLINE=1 forbids fetching it" in text
    assert FETCH_FAILED in text and "\n" not in text and not (tree / HELPER).exists()
    monkeypatch.setenv(wheels.OFFLINE_ENV, "0")
    calls: list[str] = []
    ready = integrity.ensure(WHEEL_ENGINE, "1.0.0", None, downloader(calls=calls))
    assert calls == ["1.0.0"] and ready.downloaded and "so it was fetched again" in ready.mended
    assert (tree / HELPER).is_file() and wheels.kept_wheel(tree) is not None
    assert [p.name for p in tree.parent.iterdir()] == ["1.0.0"]  # the damaged folder went whole


def test_a_wheel_whose_files_differ_from_its_own_record_is_unusable(tmp_path: Path) -> None:
    files = wheel_files()
    lying = downloader(files={**files, HELPER: b"def triple(x):\n    return x\n"}, recorded=files)
    with pytest.raises(wheels.DownloadError) as info:
        integrity.ensure(WHEEL_ENGINE, "1.0.0", tmp_path, lying)
    assert "do not match its own RECORD (1 altered (fakeeng/core/helper.py))" in str(info.value)
    assert info.value.download_failed is False  # a finding about the wheel, not a failed download
    assert [p for p in tmp_path.iterdir() if not p.name.startswith(".tmp-")] == []


def test_loading_a_damaged_release_mends_it_and_never_stands_in_for_the_engines_own_module(cache: Path) -> None:
    (_tree(cache) / HELPER).unlink()
    got = child("load", "1.0.0")
    assert got["error"] is None and got["kind"] == "wheel" and got["six_times"] == 42
    assert "1 missing (fakeeng/core/helper.py)" in got["mended"]
    assert not [r for r in got["stand_ins"] if r["module"].startswith("fakeeng.core.helper")]
    (kernel,) = [r for r in got["stand_ins"] if r["module"] == "fakeeng.core._kernels"]
    assert kernel["kind"] == "missing"
    assert kernel["why"].startswith(f"a compiled module its wheel ships ({KERNEL}), not unpacked here; imported")


@pytest.mark.parametrize("scenario", ["load", "catches"])
def test_a_tree_lacking_its_own_python_is_an_error_naming_the_module(cache: Path, scenario: str) -> None:
    """Loaded as a path (no verification), the importer itself refuses, even where the engine catches everything."""
    tree = _tree(cache)
    (tree / HELPER).unlink()
    got = child(scenario, str(tree))
    assert got["type"] == "SourceError" and "\n" not in got["error"]
    assert "FakeEng's own module fakeeng.core.helper is missing" in got["error"]
    assert "the tree is incomplete (its wheel ships fakeeng/core/helper.py)" in got["error"]
    assert got["error"].endswith("never stands in for the engine's own Python; restore the missing files")


def test_a_release_folder_that_lost_its_metadata_or_its_package_is_mended_offline(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _tree(cache)
    (tree / wheels.META).unlink()
    monkeypatch.setenv(wheels.OFFLINE_ENV, "1")  # the kept wheel is enough
    ready = integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert f"1 missing ({wheels.META})" in ready.mended and wheels.source_meta(tree)["version"] == "1.0.0"
    import shutil

    shutil.rmtree(tree / "fakeeng")
    assert wheels.cached_tree(WHEEL_ENGINE, "1.0.0") is None  # not a complete tree any more
    ready = integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert "missing (fakeeng/__init__.py" in ready.mended and (tree / HELPER).is_file()
    assert wheels.cached_versions(WHEEL_ENGINE) == ["1.0.0"]


# --- the stamp's key: an edit that keeps the size and sets the mtime back is still seen -------------------------------
def _same_size_edit(path: Path, how: str) -> None:
    """``3 * x`` made ``2 * x`` (same size), the file's mtime (and atime) set back to what it was: ``in place``
    rewrites the file's bytes, ``replaced`` renames a new file over it (as an editor saving does)."""
    st = path.stat()
    data = path.read_bytes()
    edited = data.replace(b"return 3 * x", b"return 2 * x")
    assert edited != data and len(edited) == len(data)
    time.sleep(0.05)  # ctime is kept in jiffies: an edit a human makes is never in the same one as the check
    if how == "in place":
        with open(path, "r+b") as f:
            f.write(edited)
    else:
        (path.parent / "edited.tmp").write_bytes(edited)
        os.replace(path.parent / "edited.tmp", path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)  # what the old key saw: unchanged


def _truncate(path: Path) -> None:
    st = path.stat()
    path.write_bytes(path.read_bytes()[:10])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


DAMAGE = {
    "same-size edit in place, mtime restored": (lambda p: _same_size_edit(p, "in place"), "1 altered"),
    "same-size edit replaced, mtime restored": (lambda p: _same_size_edit(p, "replaced"), "1 altered"),
    "truncated, mtime restored": (_truncate, "1 altered"),
    "deleted": (lambda p: p.unlink(), "1 missing"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_file_is_seen_on_load_and_mended_from_the_kept_wheel(cache: Path, damage: str) -> None:
    tree = _tree(cache)
    assert integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download).mended == ""  # stamped, fits
    harm, said = DAMAGE[damage]
    harm(tree / HELPER)
    ready = integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert f"{said} (fakeeng/core/helper.py)" in ready.mended and "mended from its kept wheel" in ready.mended
    assert (tree / HELPER).read_bytes() == wheel_files()[HELPER] and not ready.downloaded
    assert integrity.status(WHEEL_ENGINE, tree, full=True) == ("verified", "")


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_file_without_the_kept_wheel_is_refused_offline(
    cache: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    tree = _tree(cache)
    (tree / wheels.WHEEL_DIR / "fakeeng-1.0.0-py3-none-any.whl").unlink()
    integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)  # the stamp fits the tree without its wheel
    harm, said = DAMAGE[damage]
    harm(tree / HELPER)
    monkeypatch.setenv(wheels.OFFLINE_ENV, "1")
    with pytest.raises(wheels.OfflineError) as info:
        integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    text = str(info.value)
    assert f"fakeeng 1.0.0 is damaged (the cached tree {tree} differs from its wheel's RECORD ({said} (" in text
    assert "its kept wheel is gone" in text and "DEFERLAB_OFFLINE=1 forbids fetching it" in text and "\n" not in text


def test_a_same_size_edit_with_its_mtime_restored_never_runs_in_a_load(cache: Path) -> None:
    """The flaw the key closes: ``triple`` made to return 2x loaded as "verified" and computed 28, not 42."""
    _same_size_edit(_tree(cache) / HELPER, "in place")
    got = child("load", "1.0.0")
    assert got["error"] is None and got["six_times"] == 42
    assert "1 altered (fakeeng/core/helper.py)" in got["mended"] and "mended from its kept wheel" in got["mended"]


def test_only_the_files_whose_key_changed_are_hashed(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _tree(cache)
    hashed: list[int] = []
    real = integrity.digest

    def counting(data: bytes) -> str:
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(integrity, "digest", counting)
    os.chmod(tree / HELPER, 0o644)  # the ctime moves, nothing else: hashed (and clean)
    assert integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download).mended == ""
    assert hashed == [len(wheel_files()[HELPER])]
    hashed.clear()
    assert integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download).mended == "" and hashed == []
    (tree / integrity.KEYS).unlink()  # no keys kept: every file is hashed once
    (tree / HELPER).touch()
    integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert len(hashed) == len(integrity.expected(WHEEL_ENGINE, integrity.record_of(tree) or {}))


def test_a_stamp_of_the_old_key_verifies_the_tree_in_full_once(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stamp an older deferlab wrote (no ``key``: size and mtime alone) is not trusted: hashed, re-stamped."""
    tree = _tree(cache)
    stamp = json.loads((tree / integrity.STAMP).read_text())
    assert stamp["key"] == integrity.KEY
    del stamp["key"]
    (tree / integrity.STAMP).write_text(json.dumps(stamp))
    (tree / integrity.KEYS).unlink()
    assert integrity.stamped(tree) is None
    hashed: list[bytes] = []
    real = integrity.digest
    monkeypatch.setattr(integrity, "digest", lambda data: hashed.append(data) or real(data))
    integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert len(hashed) == len(integrity.expected(WHEEL_ENGINE, integrity.record_of(tree) or {}))
    assert json.loads((tree / integrity.STAMP).read_text())["key"] == integrity.KEY
    hashed.clear()
    integrity.ensure(WHEEL_ENGINE, "1.0.0", None, no_download)
    assert hashed == []


def test_a_full_check_ignores_a_stamp_that_fits(cache: Path) -> None:
    """``status(full=True)`` (``deferlab cache verify``) hashes every file: a stamp made to fit a damaged tree
    (as a same-jiffy edit, or an edited stamp, would) does not hide it; ``mend`` restores it from the wheel."""
    tree = _tree(cache)
    _same_size_edit(tree / HELPER, "in place")
    integrity._stamp(tree, integrity.tree_files(tree), 0.0)  # the stamp lies
    assert integrity.status(WHEEL_ENGINE, tree) == ("verified", "")
    assert integrity.status(WHEEL_ENGINE, tree, full=True) == ("damaged", "1 altered (fakeeng/core/helper.py)")
    assert integrity.mend(WHEEL_ENGINE, tree) == "mended from its kept wheel fakeeng-1.0.0-py3-none-any.whl"
    assert integrity.status(WHEEL_ENGINE, tree, full=True) == ("verified", "")
