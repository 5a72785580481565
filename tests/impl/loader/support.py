"""The fake engine the loader's tests run (`FAKE`, kept on disk in ``fakeproject/``), its release wheel
(`wheel_files`, `make_wheel`: a real zip with a RECORD, as pip would download it), and a child runner.

Why a child for anything that imports: the loader's finders and its import phase are per process, so a
fake engine loaded in the test process would share them with whichever real engine the process holds.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

from deferlab.impl.loader import integrity
from deferlab.impl.loader.companions import Companion
from deferlab.impl.loader.engine import Engine
from tests.impl.children import json_child, json_of

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "fakeproject"  # a checkout: python/fakeeng/
MISSING = "deferlab_fake_missing_dep"  # the third-party module nobody has
FAKE = Engine(
    name="fakeeng",
    distribution="fakeeng",
    package="fakeeng",
    checkout_subdir="python",
    required=("fakeeng.core.required",),
    display="FakeEng",
    marker="core",
    example_version="1.2.3",
)


def run(code: str, *args: str) -> dict[str, Any]:
    """Run ``code`` in a child (``PROJECT`` as argv[1], then ``args``); the JSON it prints last."""
    head = "import json, sys\nfrom tests.impl.loader.support import FAKE, MISSING, PROJECT\n"
    return json_of([sys.executable, "-c", head + textwrap.dedent(code), str(PROJECT), *args], timeout=120)


# The fake engine as a release: its wheel ships a compiled module too, which (as for vLLM) is not unpacked.
KERNEL = "fakeeng/core/_kernels.abi3.so"
WHEEL_ENGINE = dataclasses.replace(
    FAKE,
    required=("fakeeng.core.required", "fakeeng.core.uses_helper", "fakeeng.core.uses_kernel"),
    wheel_members=lambda member: member.startswith("fakeeng/") and member.endswith(".py"),
)


def wheel_files(package: Path = PROJECT / "python" / "fakeeng") -> dict[str, bytes]:
    """Every file of ``package`` (a folder) under its wheel path, plus the compiled `KERNEL`."""
    files = {
        f"{package.name}/{p.relative_to(package).as_posix()}": p.read_bytes()
        for p in sorted(package.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    return {**files, KERNEL: b"\x7fELF not really"} if package.name == "fakeeng" else files


def make_wheel(
    dest: Path, name: str, version: str, files: dict[str, bytes], *, recorded: dict[str, bytes] | None = None
) -> Path:
    """``dest/<name>-<version>-py3-none-any.whl`` holding ``files`` and a RECORD of the sha256 of ``recorded``
    (default: ``files``; another content makes a wheel whose files do not match its own RECORD)."""
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    listing = f"{name}-{version}.dist-info/RECORD"
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    for path, data in (files if recorded is None else recorded).items():
        writer.writerow([path, f"sha256={integrity.digest(data)}", len(data)])
    writer.writerow([listing, "", ""])
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
        zf.writestr(listing, rows.getvalue())
    return wheel


def downloader(
    name: str = "fakeeng",
    files: dict[str, bytes] | None = None,
    calls: list[str] | None = None,
    recorded: dict[str, bytes] | None = None,
) -> Any:
    """A downloader that "downloads" ``files`` (default `wheel_files`) as a wheel (`make_wheel`), noting each
    call in ``calls``."""

    def download(version: str, dest: Path) -> Path:
        if calls is not None:
            calls.append(version)
        return make_wheel(dest, name, version, files if files is not None else wheel_files(), recorded=recorded)

    return download


def no_download(version: str, dest: Path) -> Path:
    """A downloader that fails the test: nothing may be fetched."""
    raise AssertionError(f"a download of {version} was attempted")


def child(scenario: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``tests.impl.loader.child`` SCENARIO ARGS in a child process; the JSON it prints last."""
    return json_child("tests.impl.loader.child", scenario, *args, env=env, timeout=120)


# A companion library (`impl.loader.companions`): its package runs its __init__ (not bare), imports a module
# nobody has unguarded, and its wheel carries a dist-info with METADATA (importlib.metadata reads its version).
FAKE_COMPANION = Companion(Engine(name="fakecomp", distribution="fakecomp", package="fakecomp", bare_packages=False))
COMPANION_LISTED = ["0.9", "1.0", "1.5", "1.6rc1", "2.0", "not-a-version"]  # the newest accepted: 1.5
COMPANION_REQUIRES = "Requires-Dist: fakecomp<2.0,>=1.0\nRequires-Dist: fakecomp==0.9; extra == 'old'\n"


def companion_files(version: str) -> dict[str, bytes]:
    return {
        "fakecomp/__init__.py": b"INIT_RAN = True\n",
        "fakecomp/core.py": f"import {MISSING}\n\n\ndef answer():\n    return 42\n".encode(),
        f"fakecomp-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: fakecomp\nVersion: {version}\n".encode(),
    }


def companion_downloader(calls: list[str]) -> Any:
    """A downloader of the fake companion's wheel (each call noted in ``calls``)."""

    def download(version: str, dest: Path) -> Path:
        calls.append(version)
        return make_wheel(dest, "fakecomp", version, companion_files(version))

    return download


def engine_tree(root: Path, requires: str = COMPANION_REQUIRES) -> Path:
    """A release folder whose kept METADATA requires ``requires`` (what `companions.requirement` reads)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "deferlab-METADATA").write_text(f"Metadata-Version: 2.1\nName: fakeeng\nVersion: 1.2.3\n{requires}")
    return root
