"""impl's import boundary: the system under test may use reference's shared types, never the oracle's algorithms.

If impl imported an oracle function, a bug there would be in both sides of
every comparison and no property could see it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import impl

# Shared types and descriptions (configs, profiles, the contract's names, the version descriptions,
# the front-door checks and their error family); everything else in reference is the oracle.
ALLOWED_REFERENCE = {
    "reference.config",
    "reference.profiles",
    "reference.contract",
    "reference.versions",
    "reference.validate",
    "reference.errors",
}
IMPL_FILES = sorted(Path(impl.__file__).resolve().parent.rglob("*.py"))


def reference_imports(path: Path) -> list[str]:
    """Every ``reference`` module a file imports (at any depth of the syntax tree)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] if node.module != "reference" else [f"reference.{a.name}" for a in node.names]
    return [n for n in names if n == "reference" or n.startswith("reference.")]


def test_impl_files_are_found() -> None:
    """The walk sees impl's modules (an empty list would make the boundary test pass vacuously)."""
    assert len(IMPL_FILES) >= 15, IMPL_FILES


@pytest.mark.parametrize("path", IMPL_FILES, ids=lambda p: p.name)
def test_impl_imports_no_reference_algorithm(path: Path) -> None:
    """impl may import only reference's shared types, never an algorithm."""
    bad = [n for n in reference_imports(path) if n not in ALLOWED_REFERENCE]
    assert not bad, f"{path.name} imports {bad}; allowed: {sorted(ALLOWED_REFERENCE)}"


def test_the_boundary_check_can_fail(tmp_path: Path) -> None:
    """A file importing an oracle algorithm is reported (both import forms)."""
    f = tmp_path / "x.py"
    f.write_text("from reference import navit\nimport reference.resample\nfrom reference.config import A\n")
    assert reference_imports(f) == ["reference.navit", "reference.resample", "reference.config"]
