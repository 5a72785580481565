"""``deferlab cache``: what a fake cache folder holds, listed as a table and as JSON, and pruned.

The cache is a temporary ``DEFERLAB_CACHE`` filled through the loader itself (`integrity.ensure` with tiny
wheels built by `tests.impl.loader.support.make_wheel`, a RECORD in each), so each release folder is what a
real fetch leaves: the unpacked files, the kept wheel, the RECORD copy and the verified stamp.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from deferlab.impl.loader import bytecode, integrity, wheels
from deferlab.impl.sglang.sources import ENGINE as SGLANG
from deferlab.impl.vllm.sources import ENGINE as VLLM
from deferlab.reference.system.errors import UsageError
from deferlab.reports.cli import main
from deferlab.reports.core import sides
from tests.impl.loader.support import downloader

SGLANG_FILES = {"sglang/__init__.py": b"", "sglang/srt/x.py": b"X = 1\n"}
VLLM_FILES = {"vllm/__init__.py": b"", "vllm/multimodal/y.py": b"Y = 2\n", "vllm/_C.abi3.so": b"\x7fELF"}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """sglang 0.5.17 and 0.5.23, vllm 0.33.0, and two bytecode entries, in a fresh ``DEFERLAB_CACHE``."""
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path))
    monkeypatch.delenv("DEFERLAB_OFFLINE", raising=False)
    for version in ("0.5.23", "0.5.17"):
        integrity.ensure(SGLANG, version, None, downloader("sglang", SGLANG_FILES))
    integrity.ensure(VLLM, "0.33.0", None, downloader("vllm", VLLM_FILES))
    bytecode.code_for("/a.py", b"A = 1\n", lambda: compile("A = 1\n", "/a.py", "exec"))
    bytecode.lines_for(b"A = 1\n", lambda: {1: False})
    return tmp_path


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    rc = main(["cache", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _age(cache: Path, engine: str, version: str, days: float) -> None:
    """Make a release look last used ``days`` ago."""
    when = time.time() - days * 86400
    os.utime(cache / engine / version / integrity.STAMP, (when, when))


def test_list_shows_each_release_its_source_size_integrity_and_the_bytecode(cache, capsys):
    rc, out, _ = _run(capsys)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"deferlab cache: {cache} (DEFERLAB_CACHE moves it)"
    assert lines[1].split() == ["ENGINE", "RELEASE", "SIZE", "LAST", "USED", "FETCHED", "WHEEL", "SHA256", "ORIGIN",
                                "INTEGRITY"]  # fmt: skip
    rows = [ln.split() for ln in lines[2:5]]
    assert [r[:2] for r in rows] == [["sglang", "0.5.17"], ["sglang", "0.5.23"], ["vllm", "0.33.0"]]
    assert "vllm-0.33.0-py3-none-any.whl" in rows[2] and rows[2][-2:] == ["-", "verified"]  # no origin recorded
    assert lines[5].startswith("bytecode: ") and lines[5].endswith(f"in 2 entries ({cache / 'bytecode'})")

    rc, out, _ = _run(capsys, "list", "--format", "json")
    listing = json.loads(out)
    vllm = listing["releases"][2]
    assert vllm["wheel_kept"] and len(vllm["sha256"]) == 64 and vllm["fetched_at"].endswith("Z")
    assert vllm["bytes"] > 0 and vllm["status"] == "verified" and listing["bytecode"]["entries"] == 2


def test_list_shows_a_damaged_release_and_changes_none_of_its_files(cache, capsys):
    (cache / "sglang" / "0.5.23" / "sglang" / "srt" / "x.py").unlink()
    rc, out, _ = _run(capsys, "--format", "json")
    (damaged,) = [r for r in json.loads(out)["releases"] if r["status"] != "verified"]
    assert (rc, damaged["version"], damaged["status"]) == (0, "0.5.23", "damaged")
    assert damaged["detail"] == "1 missing (sglang/srt/x.py)"
    assert not (cache / "sglang" / "0.5.23" / "sglang" / "srt" / "x.py").exists()
    assert "mended from its kept wheel by its next load" in _run(capsys)[1]


def test_prune_removes_named_releases_whole_and_nothing_else(cache, capsys):
    rc, out, _ = _run(capsys, "prune", "0.5.17")
    assert rc == 0 and out.splitlines()[1].split()[:2] == ["sglang", "0.5.17"]
    assert sorted(p.name for p in (cache / "sglang").iterdir()) == ["0.5.23"]
    rc, out, _ = _run(capsys, "prune", "--engine", "vllm", "--format", "json")
    assert json.loads(out)["removed"][0]["version"] == "0.33.0" and json.loads(out)["bytecode"] is None
    assert list((cache / "vllm").iterdir()) == [] and bytecode.usage()[0] == 2


def test_prune_older_than_removes_only_what_no_load_used_for_that_long(cache, capsys):
    _age(cache, "sglang", "0.5.17", 40)
    _age(cache, "vllm", "0.33.0", 10)
    rc, out, _ = _run(capsys, "prune", "--older-than", "30", "--format", "json")
    assert rc == 0 and [r["version"] for r in json.loads(out)["removed"]] == ["0.5.17"]
    assert (cache / "vllm" / "0.33.0").is_dir() and (cache / "sglang" / "0.5.23").is_dir()
    integrity.ensure(VLLM, "0.33.0")  # a load: used now
    assert json.loads(_run(capsys, "prune", "--older-than", "5", "--format", "json")[1])["removed"] == []


def test_prune_bytecode_alone_touches_no_release(cache, capsys):
    old = time.time() - 3 * 86400
    (entry, _), _second = bytecode.entries()
    os.utime(entry, (old, old))
    rc, out, _ = _run(capsys, "prune", "--bytecode", "--older-than", "2")
    assert rc == 0 and out.splitlines() == ["no release removed", out.splitlines()[1]]
    assert out.splitlines()[1].startswith("bytecode: removed 1 entries (")
    assert bytecode.usage()[0] == 1 and len(list((cache / "sglang").iterdir())) == 2
    assert json.loads(_run(capsys, "prune", "--bytecode", "--format", "json")[1])["bytecode"]["entries"] == 1


def test_a_bad_release_among_good_ones_removes_nothing(cache, capsys):
    rc, out, err = _run(capsys, "prune", "0.5.17", "0.5.99")
    assert rc == 2 and out == ""
    assert err.strip().splitlines()[-1] == (
        "deferlab: error: RELEASE '0.5.99': no sglang or vllm or lmdeploy release 0.5.99 is cached; "
        "cached: sglang 0.5.17, 0.5.23; vllm 0.33.0"
    )
    assert sorted(p.name for p in (cache / "sglang").iterdir()) == ["0.5.17", "0.5.23"]
    rc, _, err = _run(capsys, "prune", "--engine", "vllm", "0.5.17")
    assert rc == 2 and "no vllm release 0.5.17 is cached; cached: vllm 0.33.0" in err


# --- every other folder deferlab keeps, listed and pruned -----------------------------------------------------------
def _other_folders(cache: Path) -> dict[str, Path]:
    """Two PATH@REV trees, a companion's release folder, a mutation reference and an unknown folder."""
    made = {
        f"checkouts/{'a' * 40}": cache / "checkouts" / ("a" * 40) / "python" / "sglang" / "__init__.py",
        f"checkouts/{'b' * 40}": cache / "checkouts" / ("b" * 40) / "tree" / "vllm" / "__init__.py",
        "transformers": cache / "transformers" / "5.22.2" / "transformers" / "__init__.py",
        "mutate": cache / "mutate" / "reference-x.json",
        "leftover": cache / "leftover" / "x.bin",
    }
    for path in made.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 5000)
    return {name: cache / name for name in made}


def test_list_shows_the_checkouts_the_companions_and_every_other_folder_with_sizes(cache, capsys):
    made = _other_folders(cache)
    rc, out, _ = _run(capsys, "--format", "json")
    folders = {f["name"]: f for f in json.loads(out)["folders"]}
    assert rc == 0 and sorted(folders) == sorted(made)
    kinds = {name: f["kind"] for name, f in folders.items()}
    assert kinds == {
        f"checkouts/{'a' * 40}": "checkout",
        f"checkouts/{'b' * 40}": "checkout",
        "transformers": "companion releases",
        "mutate": "mutation references (deferlab mutate)",
        "leftover": "other",
    }
    assert all(f["bytes"] >= 5000 and f["path"] == str(made[n]) for n, f in folders.items())
    lines = _run(capsys)[1].splitlines()
    start = lines.index("other folders (deferlab cache prune --checkouts, or --folder NAME):")
    assert lines[start + 1].split() == ["FOLDER", "WHAT", "SIZE", "LAST", "USED"]
    assert [ln.split()[0] for ln in lines[start + 2 : start + 7]] == sorted(made)


def test_prune_checkouts_and_named_folders_removes_those_and_no_release(cache, capsys):
    made = _other_folders(cache)
    old = time.time() - 40 * 86400
    for path in (made[f"checkouts/{'a' * 40}"], *made[f"checkouts/{'a' * 40}"].rglob("*")):
        os.utime(path, (old, old))
    rc, out, _ = _run(capsys, "prune", "--checkouts", "--older-than", "30", "--format", "json")
    assert rc == 0 and [f["name"] for f in json.loads(out)["folders"]] == [f"checkouts/{'a' * 40}"]
    assert json.loads(out)["removed"] == [] and not made[f"checkouts/{'a' * 40}"].exists()
    rc, out, _ = _run(capsys, "prune", "--checkouts", "--folder", "mutate", "--folder", "leftover/")
    assert rc == 0 and not made[f"checkouts/{'b' * 40}"].exists() and not made["mutate"].exists()
    assert not made["leftover"].exists() and made["transformers"].is_dir()
    assert sorted(p.name for p in cache.iterdir()) == ["bytecode", "checkouts", "sglang", "transformers", "vllm"]
    assert len(list((cache / "sglang").iterdir())) == 2 and "no release removed" in out


def test_prune_of_a_folder_the_cache_does_not_hold_removes_nothing(cache, capsys):
    made = _other_folders(cache)
    rc, out, err = _run(capsys, "prune", "--checkouts", "--folder", "sglang")
    assert rc == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert last == (
        "deferlab: error: --folder 'sglang': the cache holds no such folder; accepted: one listed under 'other "
        f"folders' by deferlab cache: checkouts/{'a' * 40}, checkouts/{'b' * 40}, leftover, mutate, transformers"
    )
    assert all(path.exists() for path in made.values())


def test_prune_removes_a_link_never_what_it_points_to(cache, capsys, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "precious.txt").write_text("keep")
    (cache / "linked").symlink_to(outside)
    rc, _, _ = _run(capsys, "prune", "--folder", "linked")
    assert rc == 0 and not (cache / "linked").exists() and (outside / "precious.txt").read_text() == "keep"


# --- verify: every file hashed, whatever the stamp says ---------------------------------------------------------------
def _same_size_edit(path: Path) -> None:
    """``X = 1`` made ``X = 2``, its mtime set back: the stamp's old key (size, mtime) would not see it."""
    st = path.stat()
    time.sleep(0.05)
    path.write_bytes(path.read_bytes().replace(b"1", b"2"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_verify_says_each_release_is_verified(cache, capsys):
    rc, out, _ = _run(capsys, "verify")
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["ENGINE", "RELEASE", "STATUS", "DETAIL"]
    assert [ln.split() for ln in lines[1:4]] == [
        ["sglang", "0.5.17", "verified", "-"],
        ["sglang", "0.5.23", "verified", "-"],
        ["vllm", "0.33.0", "verified", "-"],
    ]
    assert lines[4] == "3 verified: every release is what its wheel shipped"


def test_verify_mends_a_damaged_release_from_its_kept_wheel_even_when_its_stamp_fits(cache, capsys):
    x = cache / "sglang" / "0.5.23" / "sglang" / "srt" / "x.py"
    _same_size_edit(x)
    integrity._stamp(x.parents[2], integrity.tree_files(x.parents[2]), 0.0)  # a stamp that fits the edit
    rc, out, _ = _run(capsys, "verify", "--engine", "sglang", "--format", "json")
    got = json.loads(out)
    (mended,) = [r for r in got["releases"] if r["version"] == "0.5.23"]
    assert rc == 0 and got["ok"] and mended["status"] == "mended"
    assert mended["detail"] == "1 altered (sglang/srt/x.py)"
    assert mended["action"] == "mended from its kept wheel sglang-0.5.23-py3-none-any.whl"
    assert x.read_bytes() == SGLANG_FILES["sglang/srt/x.py"]
    assert [r["engine"] for r in got["releases"]] == ["sglang", "sglang"]
    assert got["summary"] == "1 verified, 1 mended: every release is what its wheel shipped"


def test_verify_exits_1_when_a_damaged_release_cannot_be_mended(cache, capsys):
    tree = cache / "vllm" / "0.33.0"
    (tree / wheels.WHEEL_DIR / "vllm-0.33.0-py3-none-any.whl").unlink()
    (tree / "vllm" / "multimodal" / "y.py").write_bytes(b"")
    rc, out, _ = _run(capsys, "verify", "0.33.0")
    lines = out.splitlines()
    assert rc == 1 and lines[1].split()[:3] == ["vllm", "0.33.0", "damaged"]
    assert "1 altered (vllm/multimodal/y.py); its kept wheel is gone: its next load fetches it again" in lines[1]
    assert lines[2] == "1 damaged: vllm 0.33.0 cannot be trusted as cached"
    assert (tree / "vllm" / "multimodal" / "y.py").read_bytes() == b""  # nothing fetched


def test_verify_of_a_release_that_is_not_cached_checks_nothing(cache, capsys, monkeypatch):
    monkeypatch.setattr(integrity, "digest", lambda data: pytest.fail("hashed before the arguments were checked"))
    rc, out, err = _run(capsys, "verify", "0.5.17", "0.5.99")
    assert rc == 2 and out == ""
    assert err.strip().splitlines()[-1] == (
        "deferlab: error: RELEASE '0.5.99': no sglang or vllm or lmdeploy release 0.5.99 is cached; "
        "cached: sglang 0.5.17, 0.5.23; vllm 0.33.0"
    )


# --- PATH@REV: a refused revision leaves nothing in checkouts/ -------------------------------------------------------
def _git_repo(root: Path, files: dict[str, str]) -> Path:
    """A git checkout at ``root`` whose one commit holds ``files``."""
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, capture_output=True)
    return root


def test_a_refused_revision_leaves_no_tree_in_checkouts(tmp_path, monkeypatch):
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    checkouts = sides.checkouts_root()
    repo = _git_repo(tmp_path / "repo", {"python/sglang/__init__.py": "", "docs/README": "r"})
    (repo / "new").mkdir()  # in the working tree, not in the commit: git archive refuses it
    with pytest.raises(UsageError, match=r"^BASE: '.*/new@HEAD': git archive of [0-9a-f]{12}:new in .* failed \("):
        sides.resolve_side("BASE", f"{repo}/new@HEAD")
    assert not checkouts.exists()
    with pytest.raises(UsageError) as info:  # extracted, but no sglang/ in it: never loadable, not kept
        sides.resolve_side("BASE", f"{repo}/docs@HEAD")
    assert "holds no sglang/ package folder in docs of the git checkout" in str(info.value)
    assert str(info.value).endswith("or PATH@REV (that git checkout at a commit, branch or tag)")
    assert not checkouts.exists()
    side = sides.resolve_side("BASE", f"{repo}@HEAD")  # a good one stays (the cache lists and prunes it)
    assert Path(side.run_spec).is_dir() and [p.name for p in checkouts.iterdir()] == [side.revision]
    with pytest.raises(UsageError):
        sides.resolve_side("HEAD", f"{repo}/docs@HEAD")
    assert [p.relative_to(checkouts).as_posix() for p in checkouts.rglob("*") if p.is_dir()][:2] == [
        side.revision,
        f"{side.revision}/python",
    ]
    assert not (checkouts / side.revision / "docs").exists()
