"""The cluster as documented: ``--cluster ray://HOST:PORT`` through Ray Client (the ``cluster`` extra installs
``ray[client]``) runs the matrix as the local pool does, against a head started on loopback the way the docs'
recipe starts one; and ``--cluster local`` listens on loopback only, every Ray process of it (GCS, raylet,
agents, workers), read from the kernel's socket tables, not from Ray's word.

The engines are the fakes of the mutate tests (``mutate_fake/``, `ray_support.matrix`), their launchers shipped with
the tasks, so no engine is fetched. One Ray instance per test (each start is 5-10 s).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core import cluster, executor
from tests.reports.ray_support import listeners, mark, matrix, ray_processes, seen, stop

pytestmark = pytest.mark.extra("cluster")  # selected by CI's `-m extra` phase, skipped (naming it) without

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = ("127.0.0.1", "::1")


def _free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on loopback now (held open together while chosen)."""
    held = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def _open(found: list[tuple[int, str, str, int]]) -> list[tuple[int, str, str, int]]:
    return [x for x in found if x[2] not in LOOPBACK]


@pytest.fixture
def head(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """A Ray head on loopback with its client server, as docs/cluster.md's recipe starts one (``ray start --head
    --port P --ray-client-server-port Q``; 2 CPUs, its own temp folder and token): yields (``ray://127.0.0.1:Q``,
    its mark); stopped after whatever happens, its processes only (``ray stop`` would stop every Ray of this user),
    none left."""
    assert importlib.util.find_spec("grpc"), "ray:// needs Ray Client: the cluster extra installs ray[client]==2.60.0"
    from ray._private.authentication_test_utils import reset_auth_token_state

    marked = mark(monkeypatch)
    token = uuid.uuid4().hex  # this head's own token (RAY_AUTH_TOKEN comes before ~/.ray/auth_token), left untouched
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # Ray Client sends the token only in this mode
    monkeypatch.setenv("RAY_AUTH_TOKEN", token)
    reset_auth_token_state()  # this process's Ray re-reads both (an earlier test may have loaded another)
    gcs, client = _free_ports(2)
    temp = tempfile.mkdtemp(prefix="ray-")  # short: Ray's unix sockets live under it
    env = {
        **os.environ,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # keeps --node-ip-address 127.0.0.1 (Ray would take the routable one)
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": str(ROOT),  # the workers import the fakes' launchers from tests/
    }
    command = [
        sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--node-ip-address", "127.0.0.1",
        "--port", str(gcs), "--ray-client-server-port", str(client), "--num-cpus", "2", "--temp-dir", temp,
        "--include-dashboard", "false", "--disable-usage-stats",
    ]  # fmt: skip
    try:
        started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=temp)
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        address = f"ray://127.0.0.1:{client}"
        deadline = time.monotonic() + 60  # `ray start` returns before its client server listens (seen under load)
        while cluster.reachable(address, 1.0) is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        yield address, marked
    finally:
        left = stop(marked)
        shutil.rmtree(temp, ignore_errors=True)
        monkeypatch.undo()
        reset_auth_token_state()
        assert left == [], f"Ray processes of the head left: {left}"


@pytest.mark.slow
def test_a_ray_client_address_runs_the_matrix_as_the_local_pool(head: tuple[str, str]) -> None:
    address, marked = head
    lines: list[str] = []
    try:
        pool = executor.executor_for(address, say=lines.append)
    except UsageError as e:  # Ray Client's own server, not deferlab: seen on CI's loaded 2 cores after the retries
        if cluster.TRANSIENT not in str(e):
            raise
        pytest.skip(f"this machine's Ray Client server could not start a session within the connect timeout: {e}")
    on_ray = executor.run_all(pool, matrix())
    assert any(f"cluster {address}: 1 node(s), 2 CPU" in x for x in lines), lines
    local = executor.run_all(executor.LocalExecutor(jobs=2), matrix())
    assert all(o.ok for o in local.values()) and local["sglang"].record.tests and local["vllm"].record.rows
    assert all(o.ok for o in on_ray.values()), {k: o.error for k, o in on_ray.items()}
    assert {k: seen(o.record) for k, o in on_ray.items()} == {k: seen(o.record) for k, o in local.items()}
    assert all(o.node not in ("?", "local") and o.cuda is False for o in on_ray.values())
    found = listeners(marked)  # the recipe's head, started on loopback, listens there only too
    assert {p for _, p, _, _ in found} >= {"gcs_server", "raylet"} and _open(found) == [], found


@pytest.mark.slow
def test_cluster_local_listens_on_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every TCP listener of every process of ``--cluster local`` (GCS, raylet, agents, the workers running the
    matrix) is on 127.0.0.1 or ::1, none on 0.0.0.0, ::, or this machine's routable address; read while the
    tasks run, again after, and nothing is left once it stops."""
    marked = mark(monkeypatch)
    snapshots: list[list[tuple[int, str, str, int]]] = []
    ray = executor.executor_for("local", say=lambda _: None, num_cpus=2)
    found = executor.run_all(ray, matrix(), done=lambda _: snapshots.append(listeners(marked)))
    assert all(o.ok for o in found.values()), {k: o.error for k, o in found.items()}
    assert ray_processes(marked, wait=15) == []
    seen_programs = {p for snap in snapshots for _, p, _, _ in snap}
    assert {"gcs_server", "raylet"} <= seen_programs and any(p.startswith("ray::") for p in seen_programs), snapshots
    assert [x for snap in snapshots for x in _open(snap)] == [], snapshots


def test_a_ray_client_refusal_names_the_token_when_this_driver_sends_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray Client sends the cluster's token only with RAY_AUTH_MODE=token here; without it the client server drops
    the calls and the driver times out (about 30 s), so that one line says what is missing."""
    from deferlab.reports.core.cluster import auth_hint

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert "RAY_AUTH_MODE=token" in auth_hint("ray://10.0.0.1:10001") and auth_hint("local") == ""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert auth_hint("ray://10.0.0.1:10001") == ""
