"""``--patch FILE`` (`impl.loader.patching`): a diff applied to a copy of a release, never to the cache.

The fake engine's release (`support.WHEEL_ENGINE`, fetched into a temporary ``DEFERLAB_CACHE``) is patched so
that ``double`` triples: the copy runs the patched code, the cache keeps its bytes and its integrity stamp, the
source's name and provenance name the diff; each bad diff is refused in one line naming the file (and the hunk).
The shipped example (reports/example/patches) applies to SGLang 0.5.23's cached tree; skipped when it is not
cached.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from deferlab.impl.loader import integrity, patching, sources, wheels
from deferlab.impl.loader.engine import SourceError
from tests.impl.children import json_of
from tests.impl.loader.support import PROJECT, WHEEL_ENGINE, downloader, no_download

REQUIRED = "fakeeng/core/required.py"
FIX = "--- a/{p}\n+++ b/{p}\n@@ -2,4 +2,4 @@\n \n \n def double(x):\n-    return 2 * x\n+    return 3 * x\n"
EXAMPLE = Path(__file__).resolve().parents[3] / "reports" / "example" / "patches" / "sglang-0.5.23-internvl-tie.diff"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deferlab cache holding the fake engine's release 1.0.0 (fetched, verified, stamped); no DEFERLAB_PATCH."""
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(wheels.OFFLINE_ENV, raising=False)
    monkeypatch.delenv(patching.PATCH_ENV, raising=False)
    integrity.ensure(WHEEL_ENGINE, "1.0.0", None, downloader())
    return tmp_path / "cache"


def _diff(tmp: Path, text: str, name: str = "fix.diff") -> Path:
    (tmp / name).write_text(text)
    return tmp / name


def _stamp_holds(tree: Path) -> bool:
    return integrity.stamped(tree) == integrity.fingerprint(tree, integrity.tree_files(tree))


@pytest.mark.parametrize("layout", ["fakeeng/core/required.py", "python/fakeeng/core/required.py"])
def test_the_diff_goes_to_a_copy_and_the_cache_keeps_its_bytes_and_its_stamp(
    cache: Path, tmp_path: Path, layout: str
) -> None:
    """A release's tree and a repository-layout diff (``a/python/fakeeng/...``) both apply, to a copy only."""
    tree = cache / "fakeeng" / "1.0.0"
    before = (tree / REQUIRED).read_bytes()
    assert _stamp_holds(tree)
    diff = patching.read(_diff(tmp_path, FIX.format(p=layout)))
    assert patching.level(WHEEL_ENGINE, diff) == layout.count("/") - 1
    found = sources.resolve(WHEEL_ENGINE, "1.0.0", None, no_download)
    patched = patching.apply(WHEEL_ENGINE, "1.0.0", found, diff)
    assert patched.root != tree and tree not in patched.root.parents
    assert "return 3 * x" in (patched.root / REQUIRED).read_text()
    assert (tree / REQUIRED).read_bytes() == before
    assert _stamp_holds(tree) and integrity.status(WHEEL_ENGINE, tree, full=True) == ("verified", "")
    assert patched.patch["sha256"] == diff.sha256 and patched.patch["tree"] == str(tree)
    assert not (patched.root / wheels.WHEEL_DIR).exists()  # the kept wheel is not copied
    assert patching.apply(WHEEL_ENGINE, "1.0.0", found, diff).root == patched.root  # one copy per process


def _load(spec: str, env: dict[str, str] | None = None) -> dict:
    """Load the fake release at ``spec`` in a child: its name, its provenance's patch, double(2)."""
    code = textwrap.dedent(f"""
        import json
        from deferlab.impl.loader import sources
        from tests.impl.loader.support import WHEEL_ENGINE, no_download
        source = sources.load(WHEEL_ENGINE, {spec!r}, downloader=no_download)
        import fakeeng.core.required as r
        out = {{"name": source.name, "patch": source.describe()["patch"], "double": r.double(2),
                "file": r.__file__, "root": str(source.root)}}
        print("JSON:" + json.dumps(out))
    """)
    return json_of([sys.executable, "-c", code], env=env)


def test_a_load_runs_the_patched_copy_and_names_the_diff(cache: Path, tmp_path: Path) -> None:
    """``+patch:FILE`` on the spec and DEFERLAB_PATCH both load the copy; the name and provenance say which diff."""
    diff = _diff(tmp_path, FIX.format(p=REQUIRED))
    sha = patching.read(diff).sha256
    for got in (_load(f"1.0.0{patching.MARK}{diff}"), _load("1.0.0", {patching.PATCH_ENV: str(diff)})):
        assert got["name"] == f"fakeeng-1.0.0+patch.{sha[:8]}" and got["double"] == 6
        assert got["patch"]["file"] == "fix.diff" and got["patch"]["sha256"] == sha
        assert got["patch"]["files"] == [REQUIRED] and got["file"].startswith(got["root"])
        assert not Path(got["root"]).exists()  # the copy went with its process
    plain = _load("1.0.0")
    assert plain["name"] == "fakeeng-1.0.0" and plain["patch"] is None and plain["double"] == 4


def test_a_diff_of_another_engine_in_the_environment_is_not_this_loads(cache: Path, tmp_path: Path) -> None:
    """DEFERLAB_PATCH applies to the engine whose package the diff names (``versions`` runs several engines)."""
    other = _diff(tmp_path, FIX.format(p="python/vllm/core/required.py"))
    got = _load("1.0.0", {patching.PATCH_ENV: str(other)})
    assert got["name"] == "fakeeng-1.0.0" and got["double"] == 4


BAD_DIFFS = [
    ("not a diff", "hello\n", r"not a unified diff \(no '--- a/PATH', '\+\+\+ b/PATH' and '@@' hunk\); accepted: a "),
    ("no hunk", "--- a/fakeeng/x.py\n+++ b/fakeeng/x.py\n", r"fakeeng/x\.py \(line 1\) has no hunk"),
    (
        "cut short",
        FIX.format(p=REQUIRED)[:-20],
        r"hunk #1 of fakeeng/core/required\.py \(line 3\) is cut short: 4/4 old",
    ),
    ("binary", "GIT binary patch\nliteral 1\n", r"a binary patch \(line 1\)"),
    ("no folder", "--- x.py\n+++ x.py\n@@ -1 +1 @@\n-a\n+b\n", r"file name 'x\.py' has no first folder to drop"),
]


@pytest.mark.parametrize(("case", "text", "match"), BAD_DIFFS, ids=[b[0] for b in BAD_DIFFS])
def test_a_file_that_is_not_a_usable_diff_is_refused_in_one_line(
    tmp_path: Path, case: str, text: str, match: str
) -> None:
    with pytest.raises(patching.PatchError, match=match) as info:
        patching.read(_diff(tmp_path, text))
    assert "\n" not in str(info.value) and "fix.diff" in str(info.value)


def _refusal(cache: Path, tmp_path: Path, text: str, spec: str = "1.0.0") -> str:
    """The one line `apply` refuses ``text`` with, the cache left as it was."""
    tree = cache / "fakeeng" / "1.0.0"
    found = sources.resolve(WHEEL_ENGINE, spec, None, no_download)
    with pytest.raises(SourceError) as info:
        patching.apply(WHEEL_ENGINE, spec, found, patching.read(_diff(tmp_path, text)))
    assert "\n" not in str(info.value)
    assert _stamp_holds(tree)
    return str(info.value)


def test_a_hunk_that_does_not_apply_is_named(cache: Path, tmp_path: Path) -> None:
    text = FIX.format(p=REQUIRED).replace("-    return 2 * x", "-    return 5 * x")
    line = _refusal(cache, tmp_path, text)
    assert "patch 'fix.diff': hunk #1 of fakeeng/core/required.py (at line 2) does not apply to fakeeng 1.0.0" in line


def test_a_diff_of_another_release_names_the_path_this_tree_lacks(cache: Path, tmp_path: Path) -> None:
    line = _refusal(cache, tmp_path, FIX.format(p="fakeeng/core/renamed.py"))
    assert "changes fakeeng/core/renamed.py, which fakeeng 1.0.0 (" in line
    assert line.endswith("does not have (a diff of another release?); accepted: a diff of files this tree has")


def test_a_diff_already_applied_and_one_outside_the_package_are_refused(cache: Path, tmp_path: Path) -> None:
    fix = FIX.format(p=REQUIRED)  # read backwards (what applying it twice meets): its new line is there already
    reverse = fix.replace("-    return 2", "+    return 9").replace("+    return 3", "-    return 3").replace("9", "2")
    assert "fakeeng/core/required.py in fakeeng 1.0.0" in _refusal(cache, tmp_path, reverse)
    line = _refusal(cache, tmp_path, FIX.format(p="other/core/required.py"))
    assert "changes other/core/required.py, outside fakeeng's package; accepted: a diff of files under fakeeng/" in line


def test_a_checkout_is_patched_in_a_copy_and_installed_is_refused(tmp_path: Path) -> None:
    diff = patching.read(_diff(tmp_path, FIX.format(p="python/" + REQUIRED)))
    found = sources.resolve(WHEEL_ENGINE, str(PROJECT))
    patched = patching.apply(WHEEL_ENGINE, str(PROJECT), found, diff)
    assert "return 3 * x" in (patched.root / REQUIRED).read_text()
    assert "return 2 * x" in (PROJECT / "python" / REQUIRED).read_text()
    installed = sources.Resolved("installed", found.root, "1.0.0")
    with pytest.raises(SourceError, match=r"applies to a copy of a release or a checkout, not to the installed"):
        patching.apply(WHEEL_ENGINE, "installed", installed, diff)


def test_the_front_door_takes_a_diff_of_an_engine_the_command_loads(tmp_path: Path) -> None:
    from deferlab.reference.system.errors import UsageError

    assert patching.check_command(str(EXAMPLE), ["sglang"]).files[0].hunks == (174,)
    with pytest.raises(UsageError, match=r"^--patch: patch '.*' changes python/sglang/.*, outside the package of "):
        patching.check_command(str(EXAMPLE), ["vllm"])
    with pytest.raises(UsageError, match=r"^--patch .*: not with --cluster auto \(a worker has no such file\)"):
        patching.check_command(str(EXAMPLE), ["sglang"], "auto")


def _sglang_0523() -> tuple[object, Path]:
    from deferlab.impl.sglang.sources import ENGINE

    tree = wheels.cached_tree(ENGINE, "0.5.23")
    if tree is None:
        pytest.skip("SGLang 0.5.23 is not cached (deferlab versions 0.5.23 fetches it)")
    return ENGINE, tree


def test_the_shipped_example_applies_to_sglang_0_5_23_and_leaves_its_cache_verified() -> None:
    """reports/example/patches' diff fits 0.5.23's tree (``-p2``: a pull request's paths) and changes one line."""
    engine, tree = _sglang_0523()
    diff = patching.read(EXAMPLE)
    found = sources.resolve(engine, "0.5.23")
    patched = patching.apply(engine, "0.5.23", found, diff)
    rel = "sglang/srt/multimodal/processors/internvl.py"
    old, new = (tree / rel).read_text().splitlines(), (patched.root / rel).read_text().splitlines()
    changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert [b.strip() for _, b in changed] == [
        "elif diff == best_ratio_diff and W * H > 0.5 * image_size * image_size * blocks:"
    ]
    assert _stamp_holds(tree)


def test_the_patch_reaches_the_load_check_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``versions`` and ``report`` do: DEFERLAB_PATCH in the environment, the load check names the diff."""
    from deferlab.reference.system.systems import System
    from deferlab.reports.core.runner import check_loads

    _sglang_0523()
    monkeypatch.setenv(patching.PATCH_ENV, str(EXAMPLE))
    sha8 = patching.read(EXAMPLE).sha8
    assert check_loads(System("sglang", "0.5.23")) == f"sglang-0.5.23+patch.{sha8}"


def test_compare_patches_head_only_so_a_release_is_compared_with_its_fix(tmp_path: Path) -> None:
    """``compare 0.5.23 0.5.23 --patch FIX``: two sources (HEAD's identity has the diff's sha256), BASE's spec as
    given, HEAD's carrying ``+patch:FILE`` for its load check and claims child; without --patch it is refused."""
    import argparse

    from deferlab.reference.system.errors import UsageError
    from deferlab.reports.compare import cli as compare
    from deferlab.reports.core import process

    def args(patch: str | None) -> argparse.Namespace:
        return argparse.Namespace(base="0.5.23", head="0.5.23", out=tmp_path / "out", profile="ci", format="md",
                                  junit=None, claims=None, strict=False, patch=patch)  # fmt: skip

    with pytest.raises(UsageError, match=r"BASE and HEAD are the same source"):
        compare.check_args(args(None))
    try:
        base, head = compare.check_args(args(str(EXAMPLE)))
    finally:
        process.release_output(tmp_path / "out")
    assert base.run_spec == "0.5.23" and head.run_spec == f"0.5.23{patching.MARK}{EXAMPLE}"
    assert head.system.spec == head.run_spec and patching.read(EXAMPLE).sha256 in head.identity[-1]
