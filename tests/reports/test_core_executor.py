"""`reports.core.executor` and `reports.core.cluster`: tasks (one runner call each) on this machine's pool or on a
Ray cluster started on loopback; timeouts retried once then recorded, a refused worker, GPU placement through a
custom resource standing in for the GPU, no process left."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import System
from deferlab.reports.core import executor, process, runner
from tests.reports.ray_support import mark, ray_processes

SUITE_PLUGIN = "deferlab.properties.suite"


def _task(tmp_path: Path, key: str, body: str, *, timeout: float | None = None, **kw) -> executor.Task:
    test = tmp_path / f"test_{key}.py"
    test.write_text(textwrap.dedent(body))
    request = runner.Request(System(), nodes=(str(test),), plugins=(SUITE_PLUGIN,), timeout=timeout)
    return executor.Task(key, request, **kw)


PASSES = "def test_ok():\n    assert 1 + 1 == 2\n"
HANGS = "import time\n\ndef test_hangs():\n    time.sleep(300)\n"


def test_the_local_pool_runs_each_task_and_retries_a_timeout_once(tmp_path: Path) -> None:
    tasks = [_task(tmp_path, "a", PASSES), _task(tmp_path, "b", HANGS, timeout=4)]
    seen: list[str] = []
    found = executor.run_all(executor.LocalExecutor(jobs=2), tasks, lambda o: seen.append(o.task.key))
    assert sorted(seen) == ["a", "b"]
    assert found["a"].ok and found["a"].attempts == 1 and found["a"].record.tests
    slow = found["b"]
    assert not slow.ok and slow.attempts == 2 and "did not finish within 4 s" in slow.error
    assert process.live() == []


@pytest.mark.parametrize(
    ("value", "command", "message"),
    [
        ("ray://nohost", "versions", "is no cluster address"),
        ("ray://h:0", "versions", "is no cluster address"),
        ("tcp://h:1", "compare", "is no cluster address"),
        ("local", "report", "has nothing to distribute"),
        ("auto", "repro", "has nothing to distribute"),
    ],
)
def test_a_bad_cluster_value_is_one_line(value: str, command: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        executor.check_cluster(value, command)
    assert executor.check_cluster(None, "report") is None and executor.check_cluster("ray://h:10001", "mutate")


def test_without_ray_the_cluster_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from deferlab.reference.system import extras

    monkeypatch.setitem(extras.EXTRAS, "cluster", (("no_such_ray_module",), "running on a Ray cluster"))
    with pytest.raises(UsageError, match=r"needs the optional extra 'cluster'.*pip install 'deferlab\[cluster\]'"):
        executor.executor_for("local")


# --- Ray, on this machine's loopback only ----------------------------------------------------------------------
@pytest.mark.extra("cluster")
@pytest.mark.slow
def test_nobody_answering_is_one_line_within_30_s() -> None:
    t0 = time.perf_counter()
    with pytest.raises(UsageError, match="nobody answers at 127.0.0.1:1"):
        executor.executor_for("ray://127.0.0.1:1")
    assert time.perf_counter() - t0 < 30


@pytest.mark.extra("cluster")
@pytest.mark.slow
def test_a_local_cluster_runs_tasks_places_a_gpu_task_and_refuses_a_foreign_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One local Ray instance (loopback, a custom resource 'fakegpu' standing in for a GPU node): a CPU task, a
    task that asks for the GPU stand-in (placed, its CUDA read inside the task), a task no node can place
    (cancelled at its deadline, recorded), and a worker whose versions differ (refused in one line)."""
    from deferlab.reports.core import cluster

    marked = mark(monkeypatch)  # its own instance's processes, not another xdist worker's
    lines: list[str] = []
    ray_exec = executor.executor_for("local", say=lines.append, num_cpus=2, resources={"fakegpu": 1})
    try:
        assert "1 node(s), 2 CPU" in lines[0]
        tasks = [
            _task(tmp_path, "cpu", PASSES),
            _task(tmp_path, "gpu", PASSES, resources={"fakegpu": 1}),
        ]
        found: dict[str, executor.Outcome] = {}
        ray_exec.map(tasks, lambda o: found.__setitem__(o.task.key, o))
        assert found["cpu"].ok and found["gpu"].ok and found["gpu"].cuda is False
        assert found["gpu"].record.tests and found["cpu"].node == found["gpu"].node
        unplaceable = _task(tmp_path, "nowhere", PASSES, resources={"bigger": 1}, timeout=1, retries=0)
        ray_exec._deadline = lambda task: 3.0  # noqa: SLF001 - a short deadline for the pending task
        ray_exec.map([unplaceable], lambda o: found.__setitem__(o.task.key, o))
        assert not found["nowhere"].ok and "no result within 3 s" in found["nowhere"].error
        foreign = {**ray_exec.driver, "deferlab": "0.0.0"}
        got = cluster.execute(_task(tmp_path, "x", PASSES), foreign)
        assert got["refused"].endswith("accepted: a worker with the driver's deferlab, torch and Python")
    finally:
        ray_exec.close()
    assert ray_processes(marked, wait=10) == []
