"""`impl.loader.provenance`: one record per (module, kind), and a description listing every stand-in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

from deferlab.impl.loader import sources
from deferlab.impl.loader.provenance import Records, StandIn, describe
from tests.impl.loader.support import FAKE, PROJECT, run


def test_records_keep_the_first_of_each_module_and_kind():
    records = Records()
    records.add("a", "missing", "first")
    records.add("a", "missing", "second")
    records.add("a", "patched", "swapped")
    assert records == [StandIn("a", "missing", "first"), StandIn("a", "patched", "swapped")]
    assert records[1].as_dict() == {"module": "a", "kind": "patched", "why": "swapped"}


def test_describe_lists_every_stand_in_of_the_loaded_tree():
    got = run(
        """
        from deferlab.impl.loader import sources
        from deferlab.impl.loader.provenance import describe
        s = sources.load(FAKE, sys.argv[1])
        s.module("fakeeng.core.unguarded")
        s.patch("fakeeng.core.required.double", "a test swaps it")
        print("JSON:" + json.dumps(describe(s, "fake-run")))
        """
    )
    assert got["name"] == "fake-run" and got["version"] == "1.2.3" and got["kind"] == "checkout"
    assert got["commit"] is None or len(got["commit"]) == 40
    kinds = [(r["module"], r["kind"]) for r in got["stand_ins"]]
    assert kinds == [
        ("fakeeng", "bare"),
        ("fakeeng.core", "bare"),
        ("deferlab_fake_missing_dep", "missing"),
        ("fakeeng.core.required.double", "patched"),
    ]
    assert all(r["why"] for r in got["stand_ins"])
    plain = SimpleNamespace(name="n", version="v", kind="k", spec="s", root="r", git_rev=None, load_seconds=None)
    assert describe(SimpleNamespace(**vars(plain), stand_ins=[]))["load_seconds"] == 0.0
    assert describe(SimpleNamespace(**vars(plain), stand_ins=[], git_dirty=True))["dirty"] is True


def _git_copy(dest: Path) -> Path:
    """The fake project copied to ``dest`` and committed: a clean git checkout."""
    shutil.copytree(PROJECT, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", "-C", str(dest), *argv], check=True, capture_output=True)
    return dest


def test_a_checkout_records_its_commit_and_whether_its_working_tree_is_dirty(tmp_path: Path) -> None:
    repo = _git_copy(tmp_path / "repo")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    found = sources.resolve(FAKE, str(repo))
    assert (found.kind, found.git_rev, found.git_dirty) == ("checkout", head, False)
    helper = repo / "python" / "fakeeng" / "core" / "helper.py"
    helper.write_text(helper.read_text().replace("3 * x", "2 * x"))  # edited since the commit
    assert sources.resolve(FAKE, str(repo / "python" / "fakeeng")).git_dirty is True
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
    (repo / "notes.txt").write_text("untracked")  # an untracked file is a difference too
    assert sources.resolve(FAKE, str(repo)).git_dirty is True
    plain = tmp_path / "plain"  # not a git checkout: neither known
    shutil.copytree(PROJECT, plain, ignore=shutil.ignore_patterns("__pycache__"))
    if subprocess.run(["git", "-C", str(plain), "rev-parse"], capture_output=True).returncode != 0:  # not in one
        assert (sources.resolve(FAKE, str(plain)).git_rev, sources.resolve(FAKE, str(plain)).git_dirty) == (None, None)


def test_the_description_of_a_loaded_checkout_says_dirty(tmp_path: Path) -> None:
    repo = _git_copy(tmp_path / "repo")
    (repo / "python" / "fakeeng" / "core" / "helper.py").write_text("def triple(x):\n    return 2 * x\n")
    got = run(
        """
        from deferlab.impl.loader import sources
        from deferlab.impl.loader.provenance import describe
        print("JSON:" + json.dumps(describe(sources.load(FAKE, sys.argv[2]))))
        """,
        str(repo),
    )
    assert got["kind"] == "checkout" and len(got["commit"]) == 40 and got["dirty"] is True
