"""The refusals of issue 30 item 4 come before the work, not after it: the work itself is replaced by a function
that fails the test if called, the refusal must take seconds, and nothing is written.

``deferlab sweep --out FILE`` used to run the sweeps (minutes) and then end in a traceback; ``deferlab calibrate
--out`` measured first; ``deferlab report --sglang 0.5.23 --model glm-4.1v`` ran the whole report (about two
minutes) to say every claim is n/a; ``deferlab compare --engine vllm 0.5.22 ...`` asked the package index.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from deferlab.reports.cli import main


def _never(what: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{what} ran before the bad argument was refused")

    return call


def _refused_fast(argv: list[str], capsys: pytest.CaptureFixture, match: str) -> None:
    t0 = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - t0 < 10, "a front-door refusal takes seconds"
    err = capsys.readouterr().err
    assert [x for x in err.splitlines() if x.startswith("deferlab: error:") and match in x], err


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_sweep_refuses_a_bad_out_before_sweeping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from deferlab.reports.report.sweeps import collect

    monkeypatch.setattr(collect, "collect_sweeps", _never("the sweeps"))
    (tmp_path / "f").write_text("")
    _refused_fast(["sweep", "--out", str(tmp_path / "f")], capsys, "exists and is not a directory")
    _refused_fast(["sweep", "--out", str(tmp_path / "f" / "sub")], capsys, "--out")
    assert _files(tmp_path) == [tmp_path / "f"] and (tmp_path / "f").read_text() == ""


def test_calibrate_refuses_a_bad_out_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from deferlab.sim.calibrate import run as calibrate

    monkeypatch.setattr(calibrate, "build_profile", _never("the measurements"))
    (tmp_path / "f").write_text("")
    _refused_fast(["calibrate", "--out", str(tmp_path / "f" / "p.toml")], capsys, "its folder cannot be made")
    _refused_fast(["calibrate", "--out", str(tmp_path / "p.json")], capsys, "not a .toml file")
    _refused_fast(["calibrate", "--out", str(tmp_path)], capsys, "is a directory")
    assert _files(tmp_path) == [tmp_path / "f"]


def test_report_refuses_a_family_no_column_serves_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The n/a line is versions' own (`reports.versions.columns.not_served`), and nothing is loaded or run."""
    from deferlab.reports.core import runner
    from deferlab.reports.report import cli as report_cli
    from deferlab.reports.versions.columns import not_served

    monkeypatch.setattr(runner, "check_loads", _never("loading SGLang"))
    monkeypatch.setattr(report_cli, "run_report", _never("the report"))
    why = not_served("sglang", "0.5.23", "mistral3")
    assert why is not None
    out = tmp_path / "r"
    _refused_fast(["report", "--sglang", "0.5.23", "--model", "mistral3", "--out", str(out)], capsys, why)
    assert not out.exists()


def test_a_release_before_the_kimi_path_is_refused_without_asking_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from deferlab.impl.loader import wheels
    from deferlab.reports.core import runner

    monkeypatch.setattr(wheels, "index_versions", _never("asking the package index"))
    monkeypatch.setattr(wheels, "pip_download", _never("a download"))
    monkeypatch.setattr(runner, "check_loads", _never("loading an engine"))
    argv = ["compare", "--engine", "vllm", "0.5.22", "0.33.0", "--out", str(tmp_path / "c")]
    _refused_fast(argv, capsys, "accepted: 0.27.0 and later")
    _refused_fast(["report", "--sglang", "0.5.16", "--out", str(tmp_path / "r")], capsys, "accepted: 0.5.17 and later")
    assert not (tmp_path / "r").exists()
