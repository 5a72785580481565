"""`reference.system.extras` and the ``extra(NAME)`` marker: a test that needs an optional extra skips, naming it,
where it is missing; the extras named agree with pyproject.toml."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from deferlab.reference.system import extras

ROOT = Path(extras.__file__).resolve().parents[2]


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="pyproject.toml is read in a source checkout")
def test_every_extra_named_is_one_pyproject_installs() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, (modules, _) in extras.EXTRAS.items():
        assert extra in declared, f"{extra} is no extra of pyproject.toml"
        names = {d.split(">")[0].split("=")[0].split("[")[0].strip().replace("-", "_").lower() for d in declared[extra]}
        wanted = {extras.DISTRIBUTIONS.get(m, m).replace("-", "_") for m in modules}
        assert wanted <= names, f"{extra}: {modules} not among {sorted(names)}"


def test_a_missing_extra_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRAS, "fake", (("no_such_module_xyz", "json"), "testing"))
    assert extras.missing("fake") == ("no_such_module_xyz",) and not extras.has("fake")
    assert extras.why_missing("fake") == (
        "needs the optional extra 'fake' (no_such_module_xyz not installed; for testing): pip install 'deferlab[fake]'"
    )
    monkeypatch.setitem(extras.EXTRAS, "here", (("json",), "testing"))
    assert extras.why_missing("here") is None


def test_the_marker_skips_with_that_line(tmp_path: Path) -> None:
    """A session over a test marked ``extra("vllm")`` with numba made unfindable: skipped, the reason the line."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ("deferlab.properties.suite",)\n')
    (tmp_path / "test_x.py").write_text(
        textwrap.dedent(
            """
            import importlib.util, pytest
            real = importlib.util.find_spec
            importlib.util.find_spec = lambda name, *a: None if name == "numba" else real(name, *a)

            @pytest.mark.extra("vllm")
            def test_needs_numba():
                raise AssertionError("must not run")

            def test_plain():
                pass
            """
        )
    )
    env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(tmp_path / "results")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0 and "1 passed, 1 skipped" in run.stdout, run.stdout[-3000:]
    # numba is made unfindable here; pydantic may be missing too (the README's install has neither)
    assert re.search(r"needs the optional extra 'vllm' \(numba(, pydantic)? not installed", run.stdout)
    assert "pip install 'deferlab[vllm]'" in run.stdout
