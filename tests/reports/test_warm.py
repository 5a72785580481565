"""The warm fork (`reports.mutate.fork`, its server and guard `properties.fork`): a forked run sees the tree as it
is on disk, as a new process would, and leaves no process behind.

The fake checkout is the loader's own test tree (`tests.impl.sglang.support.fake_sglang_tree`): the server loads
it once; each run is a pytest session in a fork that imports the engine afresh. What must hold: an edit between
runs is seen (a mutant is a mutant), a load whose record differs from the server's is refused (the caller runs
it cold), a hanging run is killed at its timeout and the server serves on, a dead server is `WarmUnavailable`;
the `Forks` launcher counts warm and cold runs; a command stopped with SIGTERM while a fork runs leaves neither
the server nor the fork; and on real SGLang a warm claims run records exactly what a cold one does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deferlab.reference.system.systems import System
from deferlab.reports.core import process, runner
from deferlab.reports.mutate import fork
from deferlab.reports.mutate import runs as mutate_run
from tests.impl.sglang.support import fake_sglang_tree
from tests.impl.sglang.test_sources import PROCESSOR_FILE, REQUIRED_FILES
from tests.reports.mutate_fake.fakes import HERE, descendants, still_running

MODEL = "srt/models/kimi_k3.py"
PROCESSOR = "class KimiK3ImageProcessor:\n    pass\n"  # an eager-only tree (0.5.17's shape): the least a load needs
TEST = "import sglang.srt.models.kimi_k3 as m\ndef test_value():\n    assert m.VALUE == 1, m.VALUE\n"


def _tree(tmp_path: Path, model: str = "VALUE = 1\n") -> Path:
    files = {**REQUIRED_FILES, PROCESSOR_FILE: PROCESSOR, MODEL: model}
    return fake_sglang_tree(tmp_path / "tree", "9.9.9", files)


def _argv(test: Path) -> list[str]:
    return [str(test), "-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--rootdir", str(test.parent)]


def _run(server: fork.Server, tmp_path: Path, test: Path, timeout: float = 120) -> tuple[process.Finished, str]:
    log = tmp_path / "log.txt"
    log.write_text("")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    got = server.run(_argv(test), env=env, cwd=tmp_path, log=log, timeout=timeout, spec=server.spec)
    return got, log.read_text()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    root = _tree(tmp_path)
    test = tmp_path / "t" / "test_it.py"
    test.parent.mkdir()
    test.write_text(TEST)
    server = fork.Server("sglang", str(root), tmp_path)
    yield server, root, test
    server.close()
    assert not process.live()  # the server is gone and unregistered


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
    assert again.rc == 0 and not server.differs, log


def test_a_load_whose_record_differs_is_refused(served, tmp_path: Path) -> None:
    """An unguarded import of a module nobody has adds a stand-in to the record: the fork says it differs."""
    server, root, test = served
    model = root / "python" / "sglang" / MODEL
    model.write_text("import no_such_package_anywhere\n" + model.read_text())
    _, log = _run(server, tmp_path, test)
    assert server.differs and "record differs" in log, log


def test_a_hanging_run_is_killed_at_its_timeout_and_the_server_serves_on(served, tmp_path: Path) -> None:
    server, _, test = served
    hang = test.parent / "test_hang.py"
    hang.write_text("import time\ndef test_hang():\n    time.sleep(600)\n")
    got, _ = _run(server, tmp_path, hang, timeout=3)
    assert got.timed_out and got.rc is None and got.seconds < 60
    after, log = _run(server, tmp_path, test)
    assert after.rc == 0 and not after.timed_out, log


def test_a_dead_server_is_unavailable(served, tmp_path: Path) -> None:
    server, _, test = served
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    with pytest.raises(fork.WarmUnavailable):
        _run(server, tmp_path, test)


def test_a_tree_that_cannot_load_never_becomes_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(fork.WarmUnavailable, match="did not start"):
        fork.Server("sglang", str(tmp_path / "nowhere"), tmp_path)
    assert not process.live()


def test_the_launcher_forks_warm_and_counts_what_ran_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Forks` as the runner's launcher: a run forked from the slot's server; a collection cold and uncounted; a
    load that differs cold, with why; switched off, every run cold."""
    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    root = _tree(tmp_path)
    test = tmp_path / "t" / "test_it.py"
    test.parent.mkdir()
    test.write_text(TEST)
    seen: list[str] = []

    def cold(request, cmd, env, cwd, log) -> process.Finished:
        seen.append("collect" if request.collect_only else "cold")
        return process.Finished(0, False, 0.0)

    forks = fork.Forks("sglang", root, enabled=True, cold=cold)
    request = runner.Request(System("sglang", str(root)), timeout=120)
    cmd = [sys.executable, "-m", "pytest", *_argv(test)]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        assert forks(request, cmd, env, tmp_path, tmp_path / "log").rc == 0
        assert forks(request.with_(collect_only=True), cmd, env, tmp_path, tmp_path / "log").rc == 0
        model = root / "python" / "sglang" / MODEL
        model.write_text("import no_such_package_anywhere\n" + model.read_text())
        forks(request, cmd, env, tmp_path, tmp_path / "log")
    finally:
        forks.close()
    assert seen == ["collect", "cold"] and forks.last[str(tmp_path)].startswith("cold: the load record differed")
    assert forks.summary() == {"enabled": True, "warm": 1, "cold": {"cold: the load record differed from the warm server's": 1}}  # fmt: skip
    off = fork.Forks("sglang", root, enabled=False, cold=cold)
    off(request, cmd, env, tmp_path, tmp_path / "log")
    assert off.summary()["cold"] == {"cold: warm forks off": 1} and not process.live()
    starts = []

    def no_server(*args: object, **kw: object) -> fork.Server:
        starts.append(args)
        raise fork.WarmUnavailable("no")

    monkeypatch.setattr(fork, "Server", no_server)
    broken = fork.Forks("sglang", root, enabled=True, cold=cold)
    for _ in range(2):
        broken(request, cmd, env, tmp_path, tmp_path / "log")
    assert len(starts) == 1 and broken.summary()["cold"] == {"cold: no": 2}  # a server that did not start: tried once


def test_sigterm_while_a_fork_runs_leaves_neither_server_nor_fork(tmp_path: Path) -> None:
    """A command (inside `process.stopped`, as every CLI command) stopped with SIGTERM while a forked run hangs:
    exit 143, and no process of its left (the server's group is killed, the fork, a group of its own, too)."""
    root = _tree(tmp_path)
    hang = tmp_path / "t" / "test_hang.py"
    hang.parent.mkdir()
    hang.write_text("import time\ndef test_hang():\n    time.sleep(600)\n")
    env = {**os.environ, "DEFERLAB_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, str(HERE / "fakes.py"), "fork", str(root), str(hang)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "forking"  # type: ignore[union-attr]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(descendants(proc.pid)) < 2:  # the server and its fork
            time.sleep(0.1)
        running = descendants(proc.pid)
        assert len(running) >= 2, running
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, proc.stderr.read()  # type: ignore[union-attr]
    assert not still_running(running), running


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
    harness = mutate_run.Harness("sglang", "ci")
    rootdir, nodes = harness.collect(tree, tmp_path / "collect", 600)
    nodes = [f"{rootdir}/{n}" for n in nodes if "claim_c11_" in n or "claim_c12_" in n]
    assert len(nodes) == 2, nodes
    got = {}
    for mode in ("cold", "warm"):
        forks = fork.Forks("sglang", tree, enabled=mode == "warm")
        harness.launcher = forks
        (tmp_path / mode).mkdir()
        try:
            got[mode] = harness.claims(tree, nodes, tmp_path / mode, 600)
        finally:
            forks.close()
    assert forks.summary()["warm"] == 1
    cold, hot = got["cold"], got["warm"]
    why = {n: (t.outcome, t.message) for n, t in hot.tests.items()}, hot.error, hot.log
    assert mutate_run.claims_of(hot) == mutate_run.claims_of(cold), why
    assert {n: t.outcome for n, t in hot.tests.items()} == {n: t.outcome for n, t in cold.tests.items()}


def test_a_fork_loads_the_engine_after_the_runs_plugins_are_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probed tree calls the probes' builtin at import; a new process has it (the campaign's plugin installs it
    in ``pytest_configure``, before the engine loads), so the fork must load after the plugins too, and the
    server, warmed with the builtin in place (``--probes``), must record that load."""
    from deferlab.reports.mutate import select

    monkeypatch.setenv("DEFERLAB_CACHE", str(tmp_path / "cache"))
    root = _tree(tmp_path, model=f"{select.PROBE}(0)\nVALUE = 1\n")
    test = tmp_path / "t" / "test_it.py"
    test.parent.mkdir()
    test.write_text(TEST)
    server = fork.Server("sglang", str(root), tmp_path, probes=True)
    try:
        env = {**os.environ, mutate_run.PROBES_ENV: str(tmp_path / "probes.json")}
        argv = [*_argv(test), "-p", mutate_run.PROBES]
        log = tmp_path / "log.txt"
        got = server.run(argv, env=env, cwd=tmp_path, log=log, timeout=120, spec=str(root))
        assert got.rc == 0 and not server.differs, log.read_text()[-2000:]
        assert (tmp_path / "probes.json").read_text().strip() == "[0]"
    finally:
        server.close()
