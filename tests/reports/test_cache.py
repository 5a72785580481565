"""``deferlab cache``: what a fake cache folder holds, listed as a table and as JSON, and pruned.

The cache is a temporary ``DEFERLAB_CACHE`` filled through the loader itself (`integrity.ensure` with tiny
wheels built by `tests.impl.loader.support.make_wheel`, a RECORD in each), so each release folder is what a
real fetch leaves: the unpacked files, the kept wheel, the RECORD copy and the verified stamp.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from deferlab.impl.loader import bytecode, integrity
from deferlab.impl.sglang.sources import ENGINE as SGLANG
from deferlab.impl.vllm.sources import ENGINE as VLLM
from deferlab.reports.cli import main
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
        "deferlab: error: RELEASE '0.5.99': no sglang or vllm release 0.5.99 is cached; "
        "cached: sglang 0.5.17, 0.5.23; vllm 0.33.0"
    )
    assert sorted(p.name for p in (cache / "sglang").iterdir()) == ["0.5.17", "0.5.23"]
    rc, _, err = _run(capsys, "prune", "--engine", "vllm", "0.5.17")
    assert rc == 2 and "no vllm release 0.5.17 is cached; cached: vllm 0.33.0" in err
