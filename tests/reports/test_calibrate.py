"""``deferlab calibrate`` (sim/calibrate/run.py): real measurements into a profile the simulator accepts or refuses.

One short run (one repeat) with the gloo rendezvous port taken by another socket: every other measurement must
still land in the profile with its how, machine and spread; the broadcast failure is one line; the simulator then
refuses the file naming a missing broadcast constant. Plus a real 2-process broadcast, and the "no free port" case.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import socket
import tomllib
from pathlib import Path

import pytest

from deferlab.reference.system.errors import ProfileError
from deferlab.reports.cli import main
from deferlab.sim.calibrate import crossproc as calibrate_ipc
from deferlab.sim.calibrate import run as calibrate
from deferlab.sim.costmodel import load_cost_model
from deferlab.sim.profile_schema import HOST_CONSTANTS


@pytest.fixture(scope="module")
def blocked_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, str]:
    """Run calibrate once with the rendezvous port already in use; (exit code, profile path, stderr)."""
    out = tmp_path_factory.mktemp("cal") / "calibrated.toml"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        err = io.StringIO()
        with contextlib.redirect_stderr(err):  # through the CLI, which writes the profile (atomically)
            rc = main(["calibrate", "--out", str(out), "--repeats", "1", "--port", port])
    return rc, out, err.getvalue()


def test_a_failed_process_group_is_one_line_and_the_rest_is_written(blocked_run: tuple[int, Path, str]) -> None:
    rc, out, err = blocked_run
    assert rc == 1 and out.is_file()
    failures = [line for line in err.splitlines() if "gloo group" in line]
    assert len(failures) == 3 and all("EADDRINUSE" in line or "died" in line for line in failures)
    data = tomllib.loads(out.read_text())
    consts = data["constants"]
    for name in HOST_CONSTANTS:
        if name.startswith("bcast_"):
            assert name not in consts
            continue
        c = consts[name]
        assert c["source"] == "measured" and c["how"] and c["machine"] and c["repeats"] >= 1
        assert c["spread"][0] <= c["value"] <= c["spread"][1] or name.endswith("_per_s")
    assert "missing: bcast_bytes_per_s_w2" in out.read_text()
    with pytest.raises(ProfileError, match=r"constant 'bcast_bytes_per_s_w2' is missing"):
        load_cost_model(out)


def test_observations_hold_the_real_microbenchmark(blocked_run: tuple[int, Path, str]) -> None:
    """impl's eager and deferred producers on 4 x 1536x1024, and the pickled sizes: FP32 is ~4x the uint8 bytes."""
    obs = tomllib.loads(blocked_run[1].read_text())["observations"]
    mb = obs["microbenchmark_4x1536x1024"]
    assert mb["eager_s"] > mb["deferred_s"] > 0
    fp32, u8 = obs["pickle_fp32_items"]["1536x1024"]["bytes"], obs["pickle_uint8_items"]["1536x1024"]["bytes"]
    assert 3.9 < fp32 / u8 < 4.2


def test_a_two_process_broadcast_runs() -> None:
    res = calibrate.run_bcast(2, [1024, 1 << 20], 1)
    assert len(res[1024]) == calibrate.SMALL and len(res[1 << 20]) == 1 and all(t > 0 for t in res[1 << 20])


def test_no_free_port_is_reported_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_port() -> int:
        raise OSError("no free port")

    monkeypatch.setattr(calibrate_ipc, "_free_port", no_port)
    rec = calibrate.Recorder(1, lambda _m: None)
    failures = calibrate.measure_bcast(rec)
    assert len(failures) == 3 and not rec.c
    assert capsys.readouterr().err.count("no free port") == 3


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    calibrate.add_parser(parser.add_subparsers(dest="command"))

    def never(path: Path, text: str) -> None:
        raise AssertionError(f"wrote {path} on bad arguments")

    assert (
        calibrate.run(parser.parse_args(["calibrate", "--repeats", "0", "--out", str(tmp_path / "x.toml")]), never) == 2
    )
    assert calibrate.run(parser.parse_args(["calibrate", "--out", str(tmp_path)]), never) == 2
    assert "--repeats" in capsys.readouterr().err
    assert parser.parse_args(["calibrate"]).out == calibrate.DEFAULT_OUT


def test_the_instrument_builds_the_text_and_the_cli_writes_it_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sim.calibrate.run hands the profile text to its writer and writes nothing itself; `deferlab calibrate`
    passes reports.core.atomic's writer (one crash-safe writer, and sim.calibrate never imports reports)."""
    from deferlab.reports import cli
    from deferlab.reports.core import atomic
    from deferlab.reports.report import cli as report_cli

    monkeypatch.setattr(calibrate, "build_profile", lambda repeats, say, port: ("x = 1\n", []))
    parser = argparse.ArgumentParser()
    calibrate.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "p.toml"
    written: list[tuple[Path, str]] = []
    assert calibrate.run(parser.parse_args(["calibrate", "--out", str(out)]), lambda p, t: written.append((p, t))) == 0
    assert written == [(out, "x = 1\n")] and not out.exists()
    calls: list[Path] = []

    def recording(path: Path, text: str) -> Path:
        calls.append(path)
        return atomic.write_text_atomic(path, text)

    monkeypatch.setattr(report_cli, "write_text_atomic", recording)
    assert cli.main(["calibrate", "--out", str(out)]) == 0
    assert calls == [out] and out.read_text() == "x = 1\n"
    assert "deferlab.reports" not in Path(calibrate.__file__).read_text()
