"""The simulator's import boundary: pure Python + NumPy, and independent of the system it judges.

``sim`` reads the shared descriptions in ``reference`` (versions, placement
oracle, IPC counts, geometry); if it imported ``impl``, a bug in the system
under test would become the simulator's evidence. Checked in a fresh
interpreter, over every module of the package, by what actually gets loaded.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import sim

MODULES = sorted(m.name for m in pkgutil.walk_packages(sim.__path__, "sim."))
PROBE = """
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("impl", "torch"))
print(json.dumps(loaded))
"""


def loaded_after_importing(modules: list[str]) -> list[str]:
    """The impl / torch modules a fresh interpreter holds after importing ``modules``."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(modules=modules)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(sim.__file__).resolve().parents[1],
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_sim_module_is_probed() -> None:
    """The walk finds the package's modules (an empty list would pass vacuously)."""
    assert len(MODULES) >= 15 and "sim.ipc_machine" in MODULES and "sim.cli" in MODULES, MODULES


def test_importing_sim_loads_neither_impl_nor_torch() -> None:
    """Every module of ``sim`` imported together leaves ``impl`` and ``torch`` unloaded."""
    assert loaded_after_importing(MODULES) == []


def test_the_probe_sees_a_forbidden_import() -> None:
    """The probe can fail: importing impl.policy (next to sim) is reported."""
    assert "impl.policy" in loaded_after_importing(["sim.cli", "impl.policy"])
