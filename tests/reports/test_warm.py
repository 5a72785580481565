"""The warm interpreter (`reports.mutate.warm`): a forked run sees the tree as it is on disk, as a new process would.

The fake checkout is the loader's own test tree (`properties.impl.sglang.support.fake_sglang_tree`): the
server loads it once; each run is a pytest session in a fork that imports the engine afresh. What must
hold: an edit between runs is seen (a mutant is a mutant), a load whose record differs from the server's
is refused (`DIFFERS`: the caller runs it cold), a hanging run is killed at its timeout and the server
serves on, a dead server is `WarmUnavailable`; and on real SGLang a warm claims run records exactly the
verdicts and failure signatures of a cold one.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from deferlab.reports.mutate import runs as mutate_run
from deferlab.reports.mutate import warm
from tests.impl.sglang.support import fake_sglang_tree
from tests.impl.sglang.test_sources import PROCESSOR_FILE, REQUIRED_FILES

MODEL = "srt/models/kimi_k3.py"
PROCESSOR = "class KimiK3ImageProcessor:\n    pass\n"  # an eager-only tree (0.5.17's shape): the least a load needs
TEST = "import sglang.srt.models.kimi_k3 as m\ndef test_value():\n    assert m.VALUE == 1, m.VALUE\n"


def _tree(tmp_path: Path, model: str = "VALUE = 1\n") -> Path:
    files = {**REQUIRED_FILES, PROCESSOR_FILE: PROCESSOR, MODEL: model}
    return fake_sglang_tree(tmp_path / "tree", "9.9.9", files)


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "DEFERLAB_CACHE": str(tmp_path / "cache")}


def _run(server: warm.WarmServer, tmp_path: Path, test: Path, timeout: float = 120) -> tuple[warm.Result, str]:
    log = tmp_path / "log.txt"
    log.write_text("")
    argv = [str(test), "-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--rootdir", str(test.parent)]
    got = server.run(argv, env=_env(tmp_path), cwd=tmp_path, log=log, timeout=timeout)
    return got, log.read_text()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    root = _tree(tmp_path)
    test = tmp_path / "t" / "test_it.py"
    test.parent.mkdir()
    test.write_text(TEST)
    server = warm.WarmServer("sglang", str(root), log=tmp_path / "server.log")
    yield server, root, test
    server.close()


def test_an_edit_between_runs_is_seen_and_undone(served, tmp_path: Path) -> None:
    server, root, test = served
    first, log = _run(server, tmp_path, test)
    assert first.rc == 0, log
    model = root / "python" / "sglang" / MODEL
    model.write_text(model.read_text().replace("VALUE = 1", "VALUE = 2"))
    mutated, log = _run(server, tmp_path, test)
    assert mutated.rc == 1 and "assert 2 == 1" in log, log
    model.write_text(model.read_text().replace("VALUE = 2", "VALUE = 1"))
    again, log = _run(server, tmp_path, test)
    assert again.rc == 0, log


def test_a_load_whose_record_differs_is_refused(served, tmp_path: Path) -> None:
    """An unguarded import of a module nobody has adds a stand-in to the record: the fork says `DIFFERS`."""
    server, root, test = served
    model = root / "python" / "sglang" / MODEL
    model.write_text("import no_such_package_anywhere\n" + model.read_text())
    got, log = _run(server, tmp_path, test)
    assert got.rc == warm.DIFFERS and "record differs" in log, log


def test_a_hanging_run_is_killed_at_its_timeout_and_the_server_serves_on(served, tmp_path: Path) -> None:
    server, _, test = served
    hang = test.parent / "test_hang.py"
    hang.write_text("import time\ndef test_hang():\n    time.sleep(600)\n")
    got, _ = _run(server, tmp_path, hang, timeout=3)
    assert got.timed_out and got.seconds < 60
    after, log = _run(server, tmp_path, test)
    assert after.rc == 0 and not after.timed_out, log


def test_a_dead_server_is_unavailable(served, tmp_path: Path) -> None:
    server, _, test = served
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    with pytest.raises(warm.WarmUnavailable):
        _run(server, tmp_path, test)


def test_a_tree_that_cannot_load_never_becomes_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(warm.WarmUnavailable, match="did not start"):
        warm.WarmServer("sglang", str(tmp_path / "nowhere"), log=tmp_path / "server.log")


def test_the_daemon_serves_later_commands_until_stopped_or_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_served` starts a detached daemon on first use; a later call (another command) reuses it and still
    sees an edit; `stop_daemon` ends it; an idle one ends by itself; a spec that cannot load gives None;
    `prestart` starts one in the background, which a run then joins instead of starting another."""
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(warm.IDLE_ENV, "60")
    root = _tree(tmp_path)
    test = tmp_path / "t" / "test_it.py"
    test.parent.mkdir()
    test.write_text(TEST)
    argv = [str(test), "-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--rootdir", str(test.parent)]
    log = tmp_path / "log.txt"

    def served() -> warm.Result | None:
        return warm.run_served("sglang", str(root), argv, env=_env(tmp_path), cwd=tmp_path, log=log, timeout=120)

    path = warm.socket_path("sglang", str(root))
    try:
        first = served()
        assert first is not None and first.rc == 0, log.read_text()
        assert path.exists()
        model = root / "python" / "sglang" / MODEL
        model.write_text("VALUE = 3\n")
        second = served()
        assert second is not None and second.rc == 1 and "assert 3 == 1" in log.read_text()
    finally:
        assert warm.stop_daemon("sglang", str(root))
    for _ in range(100):
        if not path.exists():
            break
        time.sleep(0.05)
    assert not path.exists() and not warm.stop_daemon("sglang", str(root))
    monkeypatch.setenv(warm.IDLE_ENV, "0.5")
    model.write_text("VALUE = 1\n")
    assert served().rc == 0  # type: ignore[union-attr]
    time.sleep(3)
    assert not path.exists()
    assert warm.run_served("sglang", str(tmp_path / "nowhere"), argv, env=_env(tmp_path), cwd=tmp_path, log=log) is None
    monkeypatch.setenv(warm.IDLE_ENV, "60")
    assert warm.prestart("sglang", str(root))  # in the background: the caller goes on
    assert not warm.prestart("sglang", str(root))  # one is loading: not a second
    try:
        joined = served()  # waits for the loading one rather than starting another
        assert joined is not None and joined.rc == 0
        assert not warm.prestart("sglang", str(root))  # one answers
    finally:
        assert warm.stop_daemon("sglang", str(root))


@pytest.mark.slow
def test_a_warm_claims_run_records_what_a_cold_one_does(tmp_path: Path) -> None:
    """Real SGLang (the release the tests load): C11 and C12 fail there with several signatures each; the warm
    fork must record the same verdicts, signature sets and test outcomes as a new process."""
    from deferlab.impl.loader.sources import resolve
    from deferlab.impl.sglang.sources import ENGINE
    from tests.impl.sglang.support import default_spec, load_or_skip

    root = load_or_skip(lambda s: resolve(ENGINE, s).root, default_spec())
    tree = tmp_path / "copy"
    shutil.copytree(root, tree)
    runner = mutate_run.Runner(profile="ci")
    nodes = [
        n for n in mutate_run.collect(runner, tree, tmp_path / "collect", 600) if "claim_c11_" in n or "claim_c12_" in n
    ]
    assert len(nodes) == 2, nodes
    got = {}
    for mode in ("cold", "warm"):
        runner.warm = mode == "warm"
        got[mode] = mutate_run.run_claims(runner, tree, nodes, tmp_path / mode, 600)
    assert runner.warm_runs == ["warm"]
    cold, hot = got["cold"], got["warm"]
    assert {k: v for k, v in hot.claims.items() if v["verdict"] != "not-run"} == {
        k: v for k, v in cold.claims.items() if v["verdict"] != "not-run"
    }
    assert hot.tests == cold.tests and hot.rc == cold.rc


def test_a_fork_loads_the_engine_after_the_runs_plugins_are_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probed tree calls mutate's probe builtin at import; a new process has it (mutate_select's
    ``pytest_configure`` installs it before the engine loads), so the fork must load after the plugins too, and
    the server, warmed with the builtin in place (``DEFERLAB_WARM_PRELOAD``), must record that load."""
    from deferlab.reports.mutate import select as mutate_select

    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    root = _tree(tmp_path, model=f"{mutate_select.PROBE}(0)\nVALUE = 1\n")
    test = tmp_path / "t" / "test_it.py"
    test.parent.mkdir()
    test.write_text(TEST)
    monkeypatch.setenv(warm.PRELOAD_ENV, "deferlab.reports.mutate.select:install_probe")
    server = warm.WarmServer("sglang", str(root), log=tmp_path / "server.log")
    monkeypatch.delenv(warm.PRELOAD_ENV)
    try:
        env = {**_env(tmp_path), mutate_select.PROBES_ENV: str(tmp_path / "probes.json")}
        argv = [
            str(test),
            "-q",
            "-p",
            "no:cacheprovider",
            "--noconftest",
            "-c",
            os.devnull,
            "--rootdir",
            str(test.parent),
        ]
        log = tmp_path / "log.txt"
        got = server.run([*argv, "-p", "deferlab.reports.mutate.select"], env=env, cwd=tmp_path, log=log, timeout=120)
        assert got.rc == 0, log.read_text()[-2000:]
    finally:
        server.close()
