"""`impl.loader.companions`: which version of a pinned library a release gets, how it is fetched and kept, and
how it runs in the engine's process (its own modules real, its missing dependencies stood in for, recorded)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch

from deferlab.impl.loader import companions, wheels
from deferlab.impl.loader.engine import Engine
from tests.impl.loader.support import (
    COMPANION_LISTED,
    FAKE_COMPANION,
    MISSING,
    child,
    companion_files,
    engine_tree,
    make_wheel,
)


def _listed(calls: list[str]):
    def lister(name: str) -> list[str]:
        calls.append(name)
        return COMPANION_LISTED

    return lister


def _cached(cache: Path, *versions: str) -> Path:
    """Complete release folders of the fake companion (what `wheels.cached_tree` counts)."""
    root = cache / "fakecomp"
    for version in versions:
        (root / version / "fakecomp").mkdir(parents=True)
        (root / version / wheels.META).write_text("{}")
    return root


def test_the_requirement_is_the_releases_requires_dist_without_extras(tmp_path):
    assert companions.requirement(engine_tree(tmp_path / "a"), "fakecomp") == "<2.0,>=1.0"
    assert companions.requirement(engine_tree(tmp_path / "b"), "FakeComp") == "<2.0,>=1.0"  # names normalized
    assert companions.requirement(engine_tree(tmp_path / "c", "Requires-Dist: other\n"), "fakecomp") is None
    assert companions.requirement(tmp_path / "checkout", "fakecomp") is None  # no METADATA: a checkout


def test_unpacking_keeps_the_wheels_metadata_and_an_old_tree_reads_it_from_its_kept_wheel(tmp_path):
    wheel = make_wheel(tmp_path / "w", "fakecomp", "1.5", companion_files("1.5"))
    wheels.unpack(FAKE_COMPANION.engine, wheel, tmp_path / "tree")
    assert "Version: 1.5" in (tmp_path / "tree" / wheels.METADATA).read_text()
    old = tmp_path / "old"
    (old / wheels.WHEEL_DIR).mkdir(parents=True)
    (old / wheels.WHEEL_DIR / wheel.name).write_bytes(wheel.read_bytes())
    assert "Version: 1.5" in wheels.metadata_text(old) and (old / wheels.METADATA).is_file()
    with zipfile.ZipFile(wheel) as zf:
        assert wheels.dist_info_member(zf, "METADATA") == "fakecomp-1.5.dist-info/METADATA"


def test_the_newest_final_release_satisfying_it_is_chosen_once_and_kept(tmp_path, monkeypatch):
    monkeypatch.delenv(wheels.OFFLINE_ENV, raising=False)
    calls: list[str] = []
    version, how = companions.choose(
        FAKE_COMPANION, "<2.0,>=1.0", "fakeeng 1.2.3", cache=tmp_path, lister=_listed(calls)
    )
    assert (version, calls) == ("1.5", ["fakecomp"]) and how.startswith("the newest release on the index satisfying it")
    kept = json.loads((tmp_path / companions.CHOICES).read_text())
    assert kept["<2.0,>=1.0"]["version"] == "1.5" and kept["<2.0,>=1.0"]["for"] == "fakeeng 1.2.3"
    assert companions.choose(FAKE_COMPANION, "<2.0,>=1.0", "x", cache=tmp_path, lister=_listed(calls))[0] == "1.5"
    assert calls == ["fakecomp"]  # the kept choice: the index is not asked again
    with pytest.raises(wheels.DownloadError, match=r"lists no fakecomp release satisfying '>=3'"):
        companions.choose(FAKE_COMPANION, ">=3", "x", cache=tmp_path, lister=_listed(calls))


def test_offline_chooses_among_cached_releases_and_refuses_in_one_line_when_none_fits(tmp_path, monkeypatch):
    monkeypatch.setenv(wheels.OFFLINE_ENV, "1")
    root = _cached(tmp_path, "1.0", "1.2", "2.1")
    assert companions.choose(FAKE_COMPANION, "<2.0,>=1.0", "x", cache=root)[0] == "1.2"
    (root / companions.CHOICES).write_text(json.dumps({"<2.0,>=1.0": {"version": "1.0", "chosen_at": "then"}}))
    assert companions.choose(FAKE_COMPANION, "<2.0,>=1.0", "x", cache=root) == (
        "1.0",
        "the kept choice, chosen then (DEFERLAB_OFFLINE=1)",
    )
    with pytest.raises(wheels.OfflineError) as refused:
        companions.choose(FAKE_COMPANION, ">=3", "fakeeng 1.2.3", cache=root)
    line = str(refused.value)
    assert "\n" not in line and line.startswith("fakecomp for fakeeng 1.2.3 (fakecomp>=3) is not cached and ")
    assert line.endswith("forbids fetching it, so deferlab could not fetch the wheel; cached fakecomp: 1.0, 1.2, 2.1")


def test_torchvision_without_a_pin_takes_the_series_built_for_this_torch():
    spec, why = companions.torch_series()
    minor = int(torch.__version__.split(".")[1])
    assert spec == f"==0.{minor + 15}.*" and why.startswith("the series matching torch ")


def test_a_companion_is_fetched_verified_and_run_ahead_of_anything_installed(tmp_path):
    got = child("companion", str(engine_tree(tmp_path / "release")), env={"DEFERLAB_CACHE": str(tmp_path / "cache")})
    assert (got["version"], got["requirement"], got["downloads"], got["same"]) == ("1.5", "<2.0,>=1.0", ["1.5"], True)
    assert got["init_ran"] and got["metadata_version"] == "1.5" and got["answer"] == 42
    assert got["core_file"] == str((tmp_path / "cache" / "fakecomp" / "1.5" / "fakecomp" / "core.py").resolve())
    kinds = {(r["module"], r["kind"]): r["why"] for r in got["records"]}
    assert sorted(kinds) == [(MISSING, "missing"), ("fakecomp", "companion")]
    assert (
        "fakeeng 1.2.3 requires fakecomp<2.0,>=1.0; the newest release on the index" in kinds["fakecomp", "companion"]
    )
    assert kinds[MISSING, "missing"].startswith("not installed here; imported unguarded at fakecomp/core.py:1")


def test_torchvisions_schemas_are_declared_once_recorded_and_have_no_kernel():
    got = child("declare", "-")
    assert got["first"] == ["torchvision::nms", "torchvision::qnms"] and got["second"] == []
    assert [(r["module"], r["kind"]) for r in got["records"]] == [
        ("torchvision::nms", "declared"),
        ("torchvision::qnms", "declared"),
    ]
    assert got["called"] in ("RuntimeError", "NotImplementedError")


def test_a_second_copy_is_refused_in_one_line():
    """torch is imported here (not from a companion tree): a companion of that package cannot be loaded."""
    torch_companion = companions.Companion(Engine(name="torch", distribution="torch", package="torch"))
    with pytest.raises(companions.CompanionError, match=r"^torch \(.* is already imported in this process") as e:
        companions.check_free(torch_companion, "9.9")
    assert "\n" not in str(e.value) and "or in its own process" in str(e.value)
    companions.check_free(FAKE_COMPANION)  # not imported: free
