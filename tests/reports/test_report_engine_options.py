"""``deferlab report``'s engine options come from the engine registry (issue 29): one ``--NAME SPEC`` per plugin,
today's names and refusals kept, and a plugin added to the registry gets its option with nothing else written."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest

from deferlab.reference.system.engines import ENGINES
from deferlab.reference.system.errors import UsageError
from deferlab.reports.report import engine_options
from deferlab.reports.report.claims import systems
from deferlab.reports.report.run import ReportOptions
from deferlab.reports.report.served.paths import RunPaths


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="report", exit_on_error=False)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--impl")
    engine_options.add_engine_options(p, group)
    return p


def test_every_engine_of_the_registry_has_its_option_in_its_order() -> None:
    p = _parser()
    flags = [a.option_strings[0] for a in p._actions if a.dest in ENGINES]
    assert flags == [f.option for f in ENGINES.values()] and {"--sglang", "--vllm"} <= set(flags)
    argv = [x for f in ENGINES.values() for x in (f.option, f"{f.name}-spec")]
    args = p.parse_args(argv)
    assert engine_options.engine_specs(args) == {name: f"{name}-spec" for name in ENGINES}
    assert engine_options.with_spec().startswith("--sglang SPEC or --vllm SPEC")  # the front door's rows


def test_a_plugin_added_to_the_registry_gets_an_option_and_a_system(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = dataclasses.replace(ENGINES["vllm"], name="fakeengine", display="FakeEngine", label="FAKEENGINE",
                               column_prefix="fakeengine-", order=9, seam="")  # fmt: skip
    monkeypatch.setitem(ENGINES, "fakeengine", fake)
    args = _parser().parse_args(["--fakeengine", "1.0.0", "--sglang", "0.5.23"])
    specs = engine_options.engine_specs(args)
    assert specs == {"sglang": "0.5.23", "fakeengine": "1.0.0"}
    assert [s.key for s in systems(specs)] == ["sglang:0.5.23", "fakeengine:1.0.0"]
    opts = ReportOptions("ci", Any, "test", Any, None, engines=specs)  # type: ignore[arg-type]
    assert opts.specs() == specs and RunPaths(engines={"fakeengine": "1.0.0"}).specs() == {"fakeengine": "1.0.0"}
    with pytest.raises(UsageError, match=r"^--fakeengine: not allowed with --impl \(with --fakeengine the claims run "
                       r"on FakeEngine's code, not the seam's\)$"):  # fmt: skip
        engine_options.engine_specs(_parser().parse_args(["--fakeengine", "1.0.0", "--impl", "x"]))


def test_options_built_before_every_engine_had_one_still_name_their_engines() -> None:
    """``ReportOptions(sglang=..., vllm=...)`` and ``RunPaths(vllm=...)``: the same specs as ``engines=``."""
    opts = ReportOptions("ci", Any, "test", Any, None, sglang="0.5.23", vllm="0.33.0")  # type: ignore[arg-type]
    assert opts.specs() == {"sglang": "0.5.23", "vllm": "0.33.0"}
    assert RunPaths(vllm="0.34.0").specs() == {"vllm": "0.34.0"}
    assert [s.key for s in systems({})] == ["model"]
