"""`impl.loader.wheels`: a wheel is fetched once, into the engine's cache folder, and never half-kept."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from deferlab.impl.loader import wheels
from tests.impl.loader.support import FAKE


def _tiny_wheel(version: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"fakeeng-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("fakeeng/__init__.py", "")
        zf.writestr("fakeeng/core/__init__.py", "")
    return wheel


def test_an_interrupted_download_leaves_nothing_a_later_run_mistakes_for_a_wheel(tmp_path):
    def interrupted(version, dest):
        wheel = _tiny_wheel(version, dest)
        wheel.write_bytes(wheel.read_bytes()[:20])  # cut mid-transfer
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wheels.fetch(FAKE, "9.9.9", tmp_path, interrupted)
    assert wheels.cached_tree(FAKE, "9.9.9", tmp_path) is None and list(tmp_path.iterdir()) == []

    with pytest.raises(wheels.DownloadError, match="not a zip"):
        wheels.fetch(
            FAKE,
            "9.9.9",
            tmp_path,
            lambda v, d: (d.mkdir(parents=True), d / "x.whl", (d / "x.whl").write_bytes(b"no"))[1],
        )
    assert wheels.cached_tree(FAKE, "9.9.9", tmp_path) is None

    tree, downloaded = wheels.fetch(FAKE, "9.9.9", tmp_path, _tiny_wheel)
    assert downloaded and (tree / "fakeeng" / "core").is_dir() and wheels.source_meta(tree)["version"] == "9.9.9"

    def must_not_run(version, dest):
        raise AssertionError("a second run downloaded again")

    assert wheels.fetch(FAKE, "9.9.9", tmp_path, must_not_run) == (tree, False)
    assert [p.name for p in tmp_path.iterdir()] == ["9.9.9"]


def test_a_wheel_without_the_package_is_unusable_and_the_cache_is_per_engine(tmp_path, monkeypatch):
    def other(version, dest):
        dest.mkdir(parents=True)
        wheel = dest / "other-1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("other/__init__.py", "")
        return wheel

    with pytest.raises(wheels.DownloadError, match="holds no fakeeng/ package") as info:
        wheels.fetch(FAKE, "1.0", tmp_path, other)
    assert info.value.download_failed is False and list(tmp_path.iterdir()) == []
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "c"))
    assert wheels.cache_root(FAKE) == tmp_path / "c" / "fakeeng"


def test_an_engine_can_unpack_only_some_members_of_its_wheel(tmp_path):
    """`Engine.wheel_members` keeps what the predicate accepts (vLLM: its Python sources, not its CUDA libraries)."""
    import dataclasses

    def with_library(version, dest):
        wheel = _tiny_wheel(version, dest)
        with zipfile.ZipFile(wheel, "a") as zf:
            zf.writestr("fakeeng/_C.abi3.so", b"\x7fELF")
        return wheel

    engine = dataclasses.replace(FAKE, wheel_members=lambda name: name.endswith(".py"))
    tree, _ = wheels.fetch(engine, "1.0.0", tmp_path, with_library)
    assert (tree / "fakeeng" / "__init__.py").is_file()
    assert not (tree / "fakeeng" / "_C.abi3.so").exists()
    full, _ = wheels.fetch(FAKE, "1.0.0", tmp_path / "all", with_library)
    assert (full / "fakeeng" / "_C.abi3.so").is_file()  # without a predicate, everything


def test_where_pip_got_the_wheel_is_read_off_its_output():
    """pip names the index it looked in unless it is PyPI, and shows a whole URL only off PyPI's file host."""
    pypi = "Collecting sglang==0.5.23\n  Downloading sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl (39.1 MB)\n"
    assert wheels.pip_origin(pypi) == {"index": "https://pypi.org/simple (pip's default)"}
    mirror = (
        "Looking in indexes: https://mirror.example/simple\nCollecting vllm==0.33.0\n"
        "  Downloading https://mirror.example/files/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl (336 MB)\n"
    )
    assert wheels.pip_origin(mirror) == {
        "index": "https://mirror.example/simple",
        "url": "https://mirror.example/files/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    }


def test_a_downloaders_origin_note_goes_into_the_release_metadata(tmp_path):
    def noted(version, dest):
        wheel = _tiny_wheel(version, dest)
        (dest / wheels.ORIGIN).write_text('{"index": "https://mirror.example/simple"}')
        return wheel

    tree, _ = wheels.fetch(FAKE, "1.0.0", tmp_path, noted)
    meta = wheels.source_meta(tree)
    assert meta["index"] == "https://mirror.example/simple" and len(meta["sha256"]) == 64
    assert [p.name for p in (tree / wheels.WHEEL_DIR).iterdir()] == ["fakeeng-1.0.0-py3-none-any.whl"]
