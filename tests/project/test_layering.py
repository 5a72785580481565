"""The rooms and which way their imports point; no import cycle anywhere.

The rules (docs/layout.md): the shared description (``reference.system``)
imports nothing of ours; the oracle (``reference.oracle``) only the
description; the system under test (``impl``) only the description, never
the oracle it is judged by; the simulator (``sim``) never ``impl`` or torch,
except its calibration instrument (``sim.calibrate``), which runs them on
purpose and which ``import sim`` does not load; the CLI (``reports``) never
the test package; claim tests never ``impl`` (they ask the seam; the simulator may judge). Read from
the source by `properties.project.imports`, so a rarely run branch counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import deferlab.reference
from tests.project import imports

ROOT = Path(deferlab.reference.__file__).resolve().parents[1]
GRAPH = imports.build(ROOT)

ROOMS = (  # (prefix, room), most specific first
    ("deferlab.reference.system", "description"),
    ("deferlab.reference.oracle", "oracle"),
    ("deferlab.reference", "description"),
    ("deferlab.impl", "impl"),
    ("deferlab.sim.calibrate", "calibrate"),
    ("deferlab.sim", "sim"),
    ("deferlab.reports", "reports"),
    ("deferlab.properties.claims", "claims"),
    ("deferlab.properties", "tests"),
)
MAY_IMPORT = {
    "description": {"description"},
    "oracle": {"description", "oracle"},
    "impl": {"description", "impl"},
    "sim": {"description", "oracle", "sim"},
    "calibrate": {"description", "oracle", "sim", "calibrate", "impl"},
    "reports": {"description", "oracle", "impl", "sim", "calibrate", "reports"},
    "claims": {"description", "oracle", "sim", "tests", "claims"},
    "tests": {"description", "oracle", "impl", "sim", "calibrate", "reports", "tests", "claims"},
}
NO_TORCH = {"description", "oracle", "sim"}


def room(module: str) -> str:
    for prefix, name in ROOMS:
        if module == prefix or module.startswith(prefix + "."):
            return name
    raise AssertionError(f"{module} is in no room of ROOMS")


def violations(graph: imports.Graph) -> list[str]:
    out = []
    for m, targets in sorted(graph.edges.items()):
        here = room(m)
        out += [f"{m} ({here}) imports {t} ({room(t)})" for t in sorted(targets) if room(t) not in MAY_IMPORT[here]]
        if here in NO_TORCH and "torch" in graph.external[m]:
            out.append(f"{m} ({here}) imports torch")
        out += [f"{m} imports {b} without the deferlab prefix" for b in sorted(graph.bare[m])]
    return out


def test_the_graph_covers_the_tree() -> None:
    """Every room has modules and edges (an empty graph would pass every rule below)."""
    rooms = {room(m) for m in GRAPH.modules}
    assert rooms == set(MAY_IMPORT), rooms
    assert sum(map(len, GRAPH.edges.values())) > 300


def test_no_import_cycle() -> None:
    assert imports.cycles(GRAPH.edges) == []


def test_every_import_points_the_allowed_way() -> None:
    assert violations(GRAPH) == []


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A fake tree with a cycle, a description importing the oracle, the oracle importing torch, a bare import."""
    files = {
        "reference/system/a.py": "from deferlab.reference.oracle import b\n",
        "reference/oracle/b.py": "import torch\n\ndef f():\n    from deferlab.reference.system import a\n",
        "sim/c.py": "import sim.d\n",
        "sim/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from deferlab.impl import e\n",
        "impl/e.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    g = imports.build(tmp_path)
    assert imports.cycles(g.edges) == [["deferlab.reference.oracle.b", "deferlab.reference.system.a"]]
    assert violations(g) == [
        "deferlab.reference.oracle.b (oracle) imports torch",
        "deferlab.reference.system.a (description) imports deferlab.reference.oracle.b (oracle)",
        "deferlab.sim.c imports sim.d without the deferlab prefix",
    ]  # sim.d's impl import is TYPE_CHECKING-only: no edge


PROBE = """
import importlib, json, sys
from pathlib import Path
import deferlab.sim as sim
root = Path(sim.__file__).parent
names = sorted(
    "deferlab.sim." + ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
    for p in root.rglob("*.py")
    if p.relative_to(root).parts[0] != "calibrate" and p.name != "__init__.py"
)
for name in names + sys.argv[1:]:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith(("deferlab.impl", "deferlab.sim.calibrate")))
print(json.dumps([len(names), loaded]))
"""


def _probe(*extra: str) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, *extra], check=True, capture_output=True, text=True)
    count, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    return count, loaded


@pytest.mark.slow
def test_importing_sim_loads_neither_impl_nor_torch() -> None:
    """Every sim module but the calibration instrument, imported in a fresh interpreter: no impl, no torch."""
    count, loaded = _probe()
    assert count >= 20 and loaded == []


@pytest.mark.slow
def test_the_probe_sees_a_forbidden_import() -> None:
    """The probe can fail: importing one of impl's torch modules as well is reported."""
    _, loaded = _probe("deferlab.impl.pipeline")
    assert "torch" in loaded and any(m.startswith("deferlab.impl") for m in loaded)


CLI_MODULE_LINES = 400  # the one-runner issue's bound: a command's module past it is two modules


def long_modules(root: Path, limit: int = CLI_MODULE_LINES) -> list[str]:
    """The modules under ``root`` with more than ``limit`` lines, with their counts."""
    counts = ((p, len(p.read_text(encoding="utf-8").splitlines())) for p in sorted(root.rglob("*.py")))
    return [f"{p.relative_to(root)}: {n}" for p, n in counts if n > limit]


def test_no_module_of_the_cli_is_over_400_lines(tmp_path: Path) -> None:
    assert long_modules(ROOT / "reports") == []
    (tmp_path / "long.py").write_text("x = 1\n" * (CLI_MODULE_LINES + 1))  # the check can fail
    assert long_modules(tmp_path) == [f"long.py: {CLI_MODULE_LINES + 1}"]
