"""The CLI reaches an engine only through its plugin, and the shipped checks never import the CLI (issue 29).

Why beside `test_layering`: its rooms allow ``reports`` to import ``impl`` (the loader, the seam, the model), but
not an engine's own package (``impl/<engine>/``, named by the registry): an engine's code runs in a runner child
that loaded it, asked through its plugin (`EngineFacts`), never by a module of the CLI naming it. And the checks
(``properties``) run in those children: importing the CLI would make the shipped checks depend on it.

The edges still there would be listed in `KNOWN` (none are left); the list may only shrink (a test fails when an
entry no longer occurs, so a fixed one is struck off, and when a new one appears).
"""

from __future__ import annotations

from pathlib import Path

import deferlab.reference
from deferlab.reference.system.engines import ENGINES
from tests.project import imports

ROOT = Path(deferlab.reference.__file__).resolve().parents[1]

# (module, what it imports) still crossing (issue 29, item 4): none left; the report's front door, sweep, served
# paths and repro's served line ask the plugins' hooks, and properties.served reads `reference.system.snapshot`.
KNOWN: set[tuple[str, str]] = set()


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def crossings(graph: imports.Graph, engines: tuple[str, ...]) -> set[tuple[str, str]]:
    """Every edge from the CLI into an engine's package, and from the checks into the CLI."""
    packages = tuple(f"deferlab.impl.{name}" for name in engines)
    out = set()
    for module, targets in graph.edges.items():
        for target in targets:
            into_engine = _under(module, "deferlab.reports") and any(_under(target, p) for p in packages)
            into_cli = _under(module, "deferlab.properties") and _under(target, "deferlab.reports")
            if into_engine or into_cli:
                out.add((module, target))
    return out


def test_the_cli_names_no_engine_package_and_the_checks_no_cli() -> None:
    found = crossings(imports.build(ROOT), tuple(ENGINES))
    assert sorted(found - KNOWN) == [], "new crossings"
    assert sorted(KNOWN - found) == [], "fixed: strike them off KNOWN"


def test_the_check_can_fail(tmp_path: Path) -> None:
    """A fake tree: a CLI module importing an engine's driver, a check importing the CLI, and the allowed edges
    (the CLI importing the loader, an engine importing the description) not counted."""
    files = {
        "reports/a.py": "from deferlab.impl.fake import driver\nfrom deferlab.impl.loader import wheels\n",
        "properties/b.py": "def f():\n    from deferlab.reports import a\n",
        "impl/fake/driver.py": "from deferlab.reference.system import c\n",
        "impl/loader/wheels.py": "",
        "reference/system/c.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert crossings(imports.build(tmp_path), ("fake",)) == {
        ("deferlab.reports.a", "deferlab.impl.fake.driver"),
        ("deferlab.properties.b", "deferlab.reports.a"),
    }
