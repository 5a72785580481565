"""The pytest plugin (``properties/plugin.py``, entry point ``pytest11: deferlab``) in a user's own repository.

Each test runs a fresh pytest in a temporary folder outside the checkout, so
only the installed entry point can bring the options and the ``impl``
fixture there; and the plugin must stay inert in a session that uses none of
it: no torch, no profile loaded, no verdicts written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import deferlab.properties

SUITE = Path(deferlab.properties.__file__).resolve().parent

pytestmark = pytest.mark.slow


def _env(results: Path) -> dict[str, str]:
    """This environment without what would load a Hypothesis profile by itself (CI variables, HYPOTHESIS_PROFILE),
    and with verdicts (were any written) sent to ``results``."""
    from hypothesis import _settings

    ci_vars = set(getattr(_settings, "_CI_VARS", {"CI": None}))
    env = {k: v for k, v in os.environ.items() if k not in ci_vars and k != "HYPOTHESIS_PROFILE"}
    env["DEFERLAB_RESULTS_DIR"] = str(results)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``folder``, no cache, no xdist worker state inherited."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=_env(folder / "results"),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """An empty folder that is not under the checkout (nor under the installed suite)."""
    assert SUITE not in tmp_path.resolve().parents, tmp_path
    return tmp_path


def test_help_anywhere_lists_the_options(outside: Path) -> None:
    """``pytest --help`` in a folder with no deferlab file lists ``--sglang`` and ``--impl`` (the entry point)."""
    run = _pytest(outside, "--help")
    assert run.returncode == 0, run.stderr
    for option in ("--sglang", "--impl"):
        assert f"{option}=" in run.stdout, f"{option} missing from pytest --help:\n{run.stdout[-3000:]}"


USER_TEST = """\
import os

def test_uses_impl(impl):
    assert impl.name == os.environ["EXPECT_NAME"], impl.name
    assert type(impl._impl).__name__ == os.environ["EXPECT_TYPE"], type(impl._impl)
    assert callable(impl.to_chw_uint8)
"""


@pytest.mark.parametrize(
    ("args", "name", "kind"),
    [
        ((), "deferlab", "DeferlabImpl"),
        (("--impl", "deferlab.properties.broken:BrokenStaging"), "broken-staging", "BrokenStaging"),
    ],
    ids=["default", "impl-option"],
)
def test_user_test_takes_the_impl_fixture(outside: Path, args: tuple[str, ...], name: str, kind: str) -> None:
    """A user's own test takes ``impl``: deferlab's model by default, the ``--impl`` choice when given."""
    (outside / "test_mine.py").write_text(USER_TEST)
    env_args = {"EXPECT_NAME": name, "EXPECT_TYPE": kind}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=outside,
        env={**_env(outside / "results"), **env_args},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "1 passed" in run.stdout, run.stdout[-2000:]


def test_user_test_with_a_wrong_impl_expectation_fails(outside: Path) -> None:
    """The check above can fail: expecting the default where --impl picked another implementation fails."""
    (outside / "test_mine.py").write_text(USER_TEST)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
        + ["--impl", "deferlab.properties.broken:BrokenStaging"],
        cwd=outside,
        env={**_env(outside / "results"), "EXPECT_NAME": "deferlab", "EXPECT_TYPE": "DeferlabImpl"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout[-2000:]


INERT_TEST = """\
import sys

from hypothesis import settings


def test_nothing_of_deferlab_here(pytestconfig):
    heavy = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
    assert not heavy, heavy
    ours = sorted(m for m in sys.modules if m.startswith("deferlab."))
    assert set(ours) <= {"deferlab.properties", "deferlab.properties.plugin"}, ours
    assert settings.get_current_profile_name() == "default", settings.get_current_profile_name()
    assert pytestconfig.getini("filterwarnings") == [], pytestconfig.getini("filterwarnings")


def test_second():
    pass
"""


def test_plugin_is_inert_in_a_session_that_does_not_use_it(outside: Path) -> None:
    """A user's session with no deferlab option or test: no torch, no deferlab module beyond the plugin, the
    ``default`` Hypothesis profile, no warning filter, nothing deselected or skipped, no verdicts.json."""
    (outside / "test_trivial.py").write_text(textwrap.dedent(INERT_TEST))
    run = _pytest(outside, "-q", "-rA")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout and "deselected" not in run.stdout and "skipped" not in run.stdout, run.stdout
    written = sorted(p for p in outside.rglob("verdicts.json"))
    assert not written, written
    assert not (outside / "results").exists(), list((outside / "results").rglob("*"))  # $DEFERLAB_RESULTS_DIR


def test_plugin_loads_nothing_heavy_at_import() -> None:
    """Importing the plugin module (what pytest does for the entry point) imports neither torch nor the seam."""
    code = (
        "import sys; import deferlab.properties.plugin; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'hypothesis') "
        "or m in ('deferlab.properties.seam', 'deferlab.properties.verdicts')]; "
        "assert not bad, bad"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_the_inertness_check_can_fail(outside: Path) -> None:
    """The inertness test fails where a session does load a profile and torch (here: the user's conftest does)."""
    (outside / "conftest.py").write_text("import torch\nfrom hypothesis import settings\nsettings.load_profile('ci')\n")
    (outside / "test_trivial.py").write_text(textwrap.dedent(INERT_TEST))
    run = _pytest(outside, "-q")
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout[-3000:]
