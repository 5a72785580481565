"""The loader's command line (`impl.loader.__main__`): the one child deferlab starts to load an engine outside a
claims run, for a load check and for tests that import the engine (reproducers, a checkout's own unit tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deferlab.impl.loader.__main__ import ERROR_MARK, LOAD_FAILED, RESULT_MARK
from deferlab.properties.engines import default_spec, skip_if_unfetched


def _loader(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "deferlab.impl.loader", *args],
        capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})}, cwd=cwd,
    )  # fmt: skip


def test_bad_usage_is_one_line_and_exit_2() -> None:
    for args in ([], ["check", "sglang"], ["load", "sglang", "0.5.23"], ["run", "sglang", "0.5.23", "x.py"]):
        run = _loader(*args)
        assert run.returncode == 2 and run.stderr.startswith("usage: python -m deferlab.impl.loader"), args


def test_a_spec_that_cannot_load_is_the_loaders_one_line(tmp_path: Path) -> None:
    run = _loader("check", "sglang", str(tmp_path / "nothing-here"))
    assert run.returncode == LOAD_FAILED and run.stdout == ""
    (line,) = [x for x in run.stderr.splitlines() if x.startswith(ERROR_MARK)]
    assert "accepted:" in line
    unknown = _loader("check", "trt", "1.0")
    assert (
        unknown.returncode == LOAD_FAILED and "unknown engine 'trt'; accepted: sglang, vllm, lmdeploy" in unknown.stderr
    )


def test_check_names_what_loaded_and_run_gives_the_tests_the_loaded_engine(tmp_path: Path) -> None:
    spec = default_spec("sglang")
    run = _loader("check", "sglang", spec)
    skip_if_unfetched(spec, run.stderr)
    (line,) = [x for x in run.stdout.splitlines() if x.startswith(RESULT_MARK)]
    assert json.loads(line[len(RESULT_MARK) :])["name"] == f"sglang-{spec}"
    test = tmp_path / "test_uses_sglang.py"
    test.write_text(
        "import sglang.srt.multimodal.processors.kimi_k3 as k3\n\n"
        "def test_the_engine_is_importable():\n    assert hasattr(k3, 'KimiK3ImageProcessor')\n"
    )
    args = [str(test), "-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--rootdir", str(tmp_path)]
    ran = _loader("run", "sglang", spec, "--", *args, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, cwd=tmp_path)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]


def test_the_registry_says_how_each_engine_loads() -> None:
    """Each engine's load check is its registry entry's callable (a module path, never code in a string)."""
    from deferlab.impl.loader import __main__ as main
    from deferlab.reference.system.systems import ENGINES

    for facts in ENGINES.values():
        module, _, name = facts.load_check.partition(":")
        assert callable(main._callable(facts.load_check)) and module.startswith("deferlab.impl.") and name
