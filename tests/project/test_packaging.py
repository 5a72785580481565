"""Packaging: pyproject's ``packages`` is every package of the tree, package-data ships what code reads, and the
wheel installs one top-level name, ``deferlab``.

The five folders install as ``deferlab.{reference,impl,sim,reports,properties}``
(``package-dir = {"deferlab" = "."}``), so a package missing from the list,
or a data file missing from package-data, works in the checkout and breaks
only for someone who installed the wheel. Needs the checkout's pyproject.toml:
skipped when run as the installed suite.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import deferlab.properties

ROOT = Path(deferlab.properties.__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
TOPS = ("reference", "impl", "sim", "reports", "properties")
# Non-.py files the code reads at run time: each must be shipped (package-data covers every tracked file matching).
READ_AT_RUN_TIME = (
    "reference/system/claims.toml",
    "reference/data/corpus/MANIFEST.tsv",
    "reference/data/corpus/images/*",
    "sim/scenarios/*.toml",
    "sim/profiles/*.toml",
    "reports/baseline.json",
    "reports/versions_baseline.json",
)
# Tracked non-.py files under the five folders that are deliberately not installed (the README's illustrations).
NOT_SHIPPED = ("reports/example/*",)

needs_checkout = pytest.mark.skipif(
    not PYPROJECT.is_file(), reason="needs the source checkout's pyproject.toml (this is the installed suite)"
)


def _setuptools() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]


def package_dirs(root: Path) -> set[str]:
    """``deferlab.``-prefixed dotted names of every package under the five folders: a folder with an
    ``__init__.py`` whose every parent up to the top folder is one too (a tree below a plain folder, such as a
    fake project the loader tests read, is data, not a deferlab package)."""
    found = set()
    for top in TOPS:
        for init in (root / top).rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                continue
            if all((root.joinpath(*rel.parts[:n]) / "__init__.py").is_file() for n in range(1, len(rel.parts))):
                found.add("deferlab." + ".".join(rel.parts))
    return found


def _folder(package: str) -> str:
    return package.removeprefix("deferlab.").replace(".", "/")


def shipped(root: Path, package_data: dict[str, list[str]], files: list[str]) -> set[str]:
    """The files (paths relative to ``root``) some package-data pattern covers."""
    globbed = set()  # as setuptools globs: relative to the package folder, ``*`` never crosses a ``/``
    for package, patterns in package_data.items():
        for pattern in patterns:
            globbed.update(p.relative_to(root).as_posix() for p in (root / _folder(package)).glob(pattern))
    return globbed & set(files)


def _tracked(root: Path) -> list[str]:
    run = subprocess.run(["git", "ls-files", "-z", *TOPS], cwd=root, capture_output=True, timeout=60)
    if run.returncode != 0:
        pytest.skip(f"not a git checkout: {run.stderr.decode(errors='replace').strip()}")
    return [p for p in run.stdout.decode().split("\0") if p and (root / p).is_file()]


@needs_checkout
def test_packages_list_is_every_package_dir() -> None:
    """``[tool.setuptools] packages`` names exactly the package folders of the tree (no missing, no stale)."""
    listed = set(_setuptools()["packages"])
    on_disk = package_dirs(ROOT)
    assert listed == on_disk, f"missing from pyproject: {sorted(on_disk - listed)}; stale: {sorted(listed - on_disk)}"


@needs_checkout
def test_package_data_ships_what_code_reads() -> None:
    """Every tracked data file (not a package's module) under the five folders is package data (or deliberately not shipped), and
    the files code reads at run time (claims, corpus, scenarios, cost profiles, baselines) are among them."""
    data = _setuptools().get("package-data", {})
    packages = {_folder(p) for p in _setuptools()["packages"]}
    # Data: every file but a package's own modules (a .py file in a data tree is data too).
    files = [p for p in _tracked(ROOT) if not (p.endswith(".py") and p.rpartition("/")[0] in packages)]
    covered = shipped(ROOT, data, files)
    for pattern in READ_AT_RUN_TIME:
        matching = [p for p in files if fnmatch.fnmatchcase(p, pattern)]
        assert matching, f"{pattern}: no tracked file matches (moved? update READ_AT_RUN_TIME)"
        assert set(matching) <= covered, f"read at run time but not package data: {sorted(set(matching) - covered)}"
    unshipped = [p for p in files if p not in covered and not any(fnmatch.fnmatchcase(p, n) for n in NOT_SHIPPED)]
    assert not unshipped, f"tracked data files no package-data pattern ships: {unshipped}"


def test_package_data_check_can_fail(tmp_path: Path) -> None:
    """The two checks find a package folder missing from a list and a data file no pattern ships."""
    (tmp_path / "sim" / "ipc").mkdir(parents=True)
    (tmp_path / "sim" / "__init__.py").write_text("")
    (tmp_path / "sim" / "ipc" / "__init__.py").write_text("")
    (tmp_path / "sim" / "__pycache__").mkdir()
    (tmp_path / "sim" / "fake" / "python" / "eng").mkdir(parents=True)
    (tmp_path / "sim" / "fake" / "python" / "eng" / "__init__.py").write_text("")  # data: below a plain folder
    assert package_dirs(tmp_path) == {"deferlab.sim", "deferlab.sim.ipc"}
    files = ["sim/scenarios/a.toml", "sim/scenarios/deeper/c.toml", "sim/profiles/b.toml", "reference/claims.toml"]
    for path in files:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    covered = shipped(tmp_path, {"deferlab.sim": ["scenarios/*.toml"]}, files)
    assert covered == {"sim/scenarios/a.toml"}


@needs_checkout
@pytest.mark.slow
def test_wheel_installs_only_deferlab(tmp_path: Path) -> None:
    """The wheel's top-level names are ``deferlab`` and its dist-info: none of sim, reference, impl, properties,
    reports at the top (a generic ``sim`` would shadow anyone's); the run-time data is inside; deferlab's own
    tests are not (the shipped checks are). Built from a copy of the checkout's files, so the build leaves no
    ``build/`` or ``*.egg-info`` in the checkout (a stray ``deferlab.egg-info`` there shadowed the install)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    src = tmp_path / "src"
    for rel in listed:
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (wheel,) = tmp_path.glob("deferlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"deferlab"}, sorted(tops)
    assert not set(TOPS) & tops, sorted(tops)
    for path in (
        "deferlab/reference/system/claims.toml",
        "deferlab/properties/plugin.py",
        "deferlab/properties/suite.py",
    ):
        assert path in names, f"{path} missing from the wheel"
    assert any(n.startswith("deferlab/properties/claims/test_") for n in names)  # the shipped checks
    assert not [n for n in names if n.startswith(("deferlab/tests/", "tests/"))], "deferlab's own tests were shipped"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "deferlab = deferlab.properties.plugin" in zipfile.ZipFile(wheel).read(entry_points).decode()
