"""The README's and the guides' Python examples run as written (a stale example is a bug a user meets first).

The guides are every ``docs/*.md`` but ``semantics.md`` and ``CITATIONS.md`` (the API examples live in
``docs/api.md``). Only in a source checkout: an installed package has no README next to it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from deferlab import reports

ROOT = Path(reports.__file__).resolve().parents[1]
README = ROOT / "README.md"
NOT_GUIDES = ("semantics.md", "CITATIONS.md")
PAGES = [README, *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in NOT_GUIDES)]
FOUND = [
    (page.relative_to(ROOT).as_posix(), code)
    for page in PAGES
    if README.is_file() and page.is_file()
    for code in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
]
BLOCKS = [code for _, code in FOUND]
IDS = [f"{where}-block{i}" for i, (where, _) in enumerate(FOUND)]


@pytest.mark.skipif(not README.is_file(), reason="no README.md beside the package (an installed deferlab)")
def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=IDS)
def test_each_readme_python_block_runs(code: str, tmp_path: Path) -> None:
    """Each ```python block (README and guides) runs in a fresh interpreter from the repository root."""
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=README.parent, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
