"""The project stands alone: no file we ship names the team's shared folder (beside the repo) or a machine path.

Why: a user clones the repository by itself (or installs the package), so a
citation of the team's SPEC beside the repository, or an absolute path of the
machine a file was written on, is a dead link at best and a test that
silently skips at worst. In a git checkout the
scan covers every tracked text file; in an installed package, the package
folders themselves. The patterns are assembled from pieces so that this file
does not match itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reference", "impl", "sim", "reports", "properties")
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".ico", ".npz", ".npy"}
BINARY |= {".pnm", ".ppm", ".pgm", ".pbm", ".pyc", ".whl", ".gz", ".zip"}

_SHARED = re.escape("..") + "/" + "shared"
_MACHINE = r"(?<![\w.~-])/(?:" + "|".join(["work", "home", "root", "Users", "tmp", "mnt"]) + r")/"
FORBIDDEN = re.compile(f"{_SHARED}|{_MACHINE}")


def shipped_text_files(root: Path = ROOT) -> list[Path]:
    """Tracked files in a git checkout; every file under the package folders otherwise."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True)
        files = [root / line for line in out.stdout.splitlines()]
    else:
        files = [p for pkg in PACKAGES for p in (root / pkg).rglob("*") if p.is_file()]
    return [p for p in files if p.suffix.lower() not in BINARY and p.is_file()]


def offending_lines(files: list[Path]) -> list[str]:
    """``path:line: text`` for each line that names the shared folder beside the repo, or a machine path."""
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{no}: {line.strip()}")
    return found


def test_no_shipped_file_points_outside_the_project() -> None:
    files = shipped_text_files()
    assert len(files) > 50, f"only {len(files)} files found under {ROOT}: the scan is not looking at the project"
    assert offending_lines(files) == []


@pytest.mark.parametrize(
    "line, flagged",
    [
        ("see " + "../" + "shared/SPEC.md §4", True),
        ('MIRROR = Path("' + "/work" + '/.mirror/repo")', True),
        ("cache in " + "/home" + "/me/.cache", True),
        ("deferlab report --out " + "/tmp" + "/x", True),
        ("see docs/semantics.md §4", False),
        ("the cache is ~/.cache/deferlab/sglang/", False),
        ("python/sglang/srt/models/kimi_k3.py", False),
    ],
)
def test_the_scan_flags_what_it_should(tmp_path: Path, line: str, flagged: bool) -> None:
    f = tmp_path / "doc.md"
    f.write_text(f"first line\n{line}\n", encoding="utf-8")
    assert bool(offending_lines([f])) is flagged
