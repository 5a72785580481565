"""The README's Python examples run as written (a stale example is a bug a user meets first).

Only in a source checkout: an installed package has no README next to it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from deferlab import reports

README = Path(reports.__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if README.is_file() else []


@pytest.mark.skipif(not README.is_file(), reason="no README.md beside the package (an installed deferlab)")
def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_each_readme_python_block_runs(code: str, tmp_path: Path) -> None:
    """Each ```python block runs in a fresh interpreter from the repository root without an error."""
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=README.parent, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
