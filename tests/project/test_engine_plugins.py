"""Engines are plugins (`reference.system.engines`): a package outside deferlab adds one through the
``deferlab.engines`` entry point group, a broken one is one line while the others work, two claiming one option
refuse the command naming both.

The fake packages are installed the way pip installs any distribution, as far as Python can tell: a package
folder and a ``*.dist-info`` with its ``entry_points.txt`` on ``sys.path`` (PYTHONPATH of a child process), so
importlib.metadata finds them; nothing is installed into this environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deferlab.reference.system import engines
from tests.project import fake_engine_files

FACTS = """
from deferlab.reference.system.engines import EngineFacts

ENGINE = EngineFacts(
    name={name!r}, display="Fake Engine", article="a", label={label!r}, first_release="1.0.0",
    example_release="1.2.0", claims=("C13",), suite="claims", sources={sources!r},
    load_check="fake_engine.sources:load", driver="fake_engine.driver:Driver", column_prefix={prefix!r},
    distribution="fake-engine-dist", package="fake_engine_pkg", order=50,
)
"""


SOURCES = """
from deferlab.impl.loader.engine import Engine

ENGINE = Engine(name="fakeeng", distribution="fake-engine-dist", package="fake_engine_pkg", display="Fake Engine")
"""


def _install(site: Path, dist: str, module: str, body: str, *, entry: str | None = None) -> None:
    """A distribution ``dist`` holding package ``module`` (``plugin.py`` = ``body``), entry point ``entry``."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text("")
    (site / module / "plugin.py").write_text(body)
    (site / module / "sources.py").write_text(SOURCES)
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[deferlab.engines]\n{entry or 'fakeeng'} = {module}.plugin:ENGINE\n")


def _deferlab(site: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "deferlab.reports.cli", *argv], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_plugin_package_adds_an_engine(tmp_path: Path) -> None:
    """Installed with its own entry point, a fake engine is in the registry (its distribution and import package
    differ from its name), is a column of `deferlab families`, and an engine choice of `deferlab cache`."""
    _install(tmp_path, "fake-engine", "fake_engine",
             FACTS.format(name="fakeeng", label="FAKE", prefix="fake-", sources="fake_engine.sources"))  # fmt: skip
    code = (
        "from deferlab.reference.system.engines import ENGINES, BROKEN;"
        "import json; f = ENGINES['fakeeng'];"
        "print(json.dumps([list(ENGINES), f.distribution, f.package, f.option, f.plugin, BROKEN]))"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    names, dist, package, option, plugin, broken = json.loads(out)
    assert names == ["sglang", "vllm", "lmdeploy", "fakeeng"] and broken == []  # deferlab's own, then by order
    assert (dist, package, option) == ("fake-engine-dist", "fake_engine_pkg", "--fakeeng")
    assert plugin == "fake_engine.plugin:ENGINE (fake-engine)"
    table = _deferlab(tmp_path, "families")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].endswith("| SGLang | vLLM | LMDeploy | Fake Engine |")
    assert all(line.endswith("| not checked |") for line in table.stdout.splitlines()[2:10])
    refused = _deferlab(tmp_path, "cache", "prune", "--engine", "tgi")
    assert refused.returncode == 2 and "accepted: sglang, vllm, lmdeploy, fakeeng" in refused.stderr


def test_a_broken_plugin_is_one_line_and_the_others_work(tmp_path: Path) -> None:
    """An entry point whose module fails to import: one warning line naming the package; the command runs."""
    _install(tmp_path, "broken-engine", "broken_engine", "import no_such_module_here\n")
    run = _deferlab(tmp_path, "families", "--format", "json")
    assert run.returncode == 0, run.stderr
    warnings = [x for x in run.stderr.splitlines() if x.startswith("deferlab: warning:")]
    assert len(warnings) == 1, run.stderr
    assert "'fakeeng' (package broken-engine" in warnings[0] and "ModuleNotFoundError" in warnings[0]
    assert warnings[0].endswith("the other engines still work")
    assert {e for f in json.loads(run.stdout) for e in f["engines"]} >= {"sglang", "vllm", "lmdeploy"}


def test_two_plugins_claiming_one_option_are_refused_naming_both(tmp_path: Path) -> None:
    """Another package's plugin named ``vllm`` (so claiming ``--vllm``): every command refuses to start (exit 2), one
    line naming both plugins."""
    _install(tmp_path, "clash-engine", "clash_engine",
             FACTS.format(name="vllm", label="CLASH", prefix="clash-", sources="clash_engine.sources"), entry="vllm")  # fmt: skip
    run = _deferlab(tmp_path, "families")
    assert run.returncode == 2 and run.stdout == ""
    lines = [x for x in run.stderr.splitlines() if x.startswith("deferlab: error:")]
    assert len(lines) == 1, run.stderr
    assert "deferlab.impl.vllm.plugin:ENGINE (deferlab)" in lines[0] and "clash_engine.plugin:ENGINE" in lines[0]
    assert "both claim the option '--vllm'" in lines[0] and "accepted: one plugin per option" in lines[0]


def test_deferlab_declares_its_own_engines_as_entry_points() -> None:
    """The shipped engines come through the same door as anyone's: pyproject's entry points are the registry's
    built-ins, and each loads to the registered facts."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    declared = pyproject["project"]["entry-points"][engines.GROUP]
    assert declared == engines.BUILTIN
    assert [engines.ENGINES[name].plugin for name in declared] == [f"{v} (deferlab)" for v in declared.values()]


def test_a_plugin_engine_gets_verdicts(tmp_path: Path) -> None:
    """The recipe of docs/layout.md, whole: a package outside deferlab (`tests/project/fake_engine_files.py`:
    plugin, sources, served, hooks and its release trees) is a column of `deferlab families` and gets verdicts from
    `deferlab versions`: C15 ``holds`` on the release whose normalization is the checkpoint's, ``fails`` on the one
    that rescales in float32, with no claims.toml row (recorded, not asserted) and no pip call."""
    site = tmp_path / "site"
    fake_engine_files.install(site)
    table = _deferlab(site, "families")
    assert table.returncode == 0, table.stderr
    rows = table.stdout.splitlines()
    assert rows[0].endswith("| LMDeploy | Fake Engine |"), table.stdout + table.stderr
    gemma3 = next((r for r in rows if r.startswith("| `gemma3`")), "")
    assert gemma3.endswith("| 1.0.0+ served * |"), table.stdout + table.stderr
    unlisted = _deferlab(site, "versions", "--fakeeng", "1.2.0", "--out", str(tmp_path / "refused"))
    assert unlisted.returncode == 2 and "--fakeeng '1.2.0'" in unlisted.stderr, unlisted.stderr  # its own listing
    assert "nearest: 1.1.0" in unlisted.stderr and "accepted: fakeeng releases 1.0.0 and later" in unlisted.stderr
    out = tmp_path / "out"
    run = _deferlab(site, "versions", "--fakeeng", "1.0.0", "1.1.0", "--model", "gemma3", "--claims", "C15",
                    "--profile", "dev", "--baseline", "none", "--out", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads((out / "versions.json").read_text())
    assert doc["verdicts"] == {"C15": {"gemma3:fake-1.0.0": "holds", "gemma3:fake-1.1.0": "fails"}}, doc["verdicts"]
    assert doc["columns"]["gemma3:fake-1.1.0"]["engine"] == "fakeeng" and not doc["errors"]
    ran = doc["provenance"]["gemma3:fake-1.1.0"]["C15"]  # the release's own function ran, from its tree
    assert ran == {"fakeeng-1.1.0 (gemma3, served): normalization": "fakeeng_rt.norm.normalize of fakeeng-1.1.0"}
    assert "differ from the checkpoint in FP32" in json.dumps(doc), "the failing release's evidence"


def test_the_layout_recipe_lists_the_fake_engines_files(tmp_path: Path) -> None:
    """docs/layout.md's numbered files of a new engine are exactly the modules of the fake package that gets verdicts
    above (one more file, or one fewer, in either and this fails)."""
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "layout.md").read_text()
    recipe = doc[doc.index("* *An engine* is a plugin") : doc.index("Optional:", doc.index("* *An engine*"))]
    listed = set(re.findall(r"^  \d\. `(\w+\.py)`", recipe, re.M))
    fake_engine_files.install(tmp_path)
    shipped = {p.name for p in (tmp_path / "fake_engine").glob("*.py")} - {"__init__.py"}
    assert listed == shipped == {"plugin.py", "sources.py", "served.py", "hooks.py"}
    assert "the group `deferlab.engines`" in recipe  # item 2: the entry point (the fake's own dist-info)
    entry = (tmp_path / "fake_engine_dist-0.1.dist-info" / "entry_points.txt").read_text()
    assert entry.startswith("[deferlab.engines]\nfakeeng = fake_engine.plugin:ENGINE")
