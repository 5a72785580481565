"""Ray Client's transient session-start failure is tried again within the connect timeout, nothing else is; a
stop cancels every task gently and forces only those still running after the grace, and never on ``local``."""

from __future__ import annotations

import time

import pytest

from deferlab.reports.core import cluster


class FakeRay:
    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        self.inits = 0
        self.shutdowns = 0

    def init(self, **_: object) -> None:
        self.inits += 1
        if self.failures:
            raise ConnectionError(self.failures.pop(0))

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_the_transient_failure_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster.time, "sleep", lambda _: None)
    ray = FakeRay([f"{cluster.TRANSIENT}: ", f"{cluster.TRANSIENT}: "])
    cluster._client_init(ray, "ray://127.0.0.1:1", time.perf_counter(), 30.0)
    assert ray.inits == 3 and ray.shutdowns == 2


def test_another_failure_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster.time, "sleep", lambda _: None)
    ray = FakeRay(["Connection refused"])
    with pytest.raises(ConnectionError, match="refused"):
        cluster._client_init(ray, "ray://127.0.0.1:1", time.perf_counter(), 30.0)
    assert ray.inits == 1


def test_past_the_timeout_the_transient_failure_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster.time, "sleep", lambda _: None)
    ray = FakeRay([f"{cluster.TRANSIENT}: "] * 5)
    with pytest.raises(ConnectionError, match="Initialization failure"):
        cluster._client_init(ray, "ray://127.0.0.1:1", time.perf_counter() - 60.0, 30.0)
    assert ray.inits == 1


class CancelRay:
    """Records the cancels; ``returns``: the tasks that return within the grace once asked to stop."""

    def __init__(self, returns: str, wait_fails: bool = False) -> None:
        self.returns, self.wait_fails = set(returns), wait_fails
        self.cancels: list[tuple[str, bool]] = []
        self.waits: list[float] = []

    def cancel(self, ref: str, force: bool = False) -> None:
        self.cancels.append((ref, force))

    def wait(self, refs: list[str], num_returns: int, timeout: float) -> tuple[list[str], list[str]]:
        self.waits.append(timeout)
        if self.wait_fails:
            raise RuntimeError("wait failed")
        return [r for r in refs if r in self.returns], [r for r in refs if r not in self.returns]


def _stopping(ray: CancelRay, local: bool) -> cluster.RayExecutor:
    executor = object.__new__(cluster.RayExecutor)  # no Ray instance: only what cancel_all reads
    executor._ray, executor._local, executor._running = ray, local, dict.fromkeys("abc")
    return executor


@pytest.mark.parametrize("local", [False, True], ids=["remote", "local"])
def test_a_stop_forces_only_the_tasks_still_running_after_the_grace(local: bool) -> None:
    """CI's crash: Ray 2.60's driver aborted when a forced cancel raced the reply of a task already returning
    (every task was forced, returned or not). Now a task that returned is never forced, nor any on ``local``."""
    ray = CancelRay(returns="ab")
    executor = _stopping(ray, local)
    executor.cancel_all()
    assert [c for c in ray.cancels if not c[1]] == [("a", False), ("b", False), ("c", False)]
    assert [r for r, force in ray.cancels if force] == ([] if local else ["c"])
    assert ray.waits == [cluster.CANCEL_GRACE_S] and executor._running == {}


@pytest.mark.parametrize("local", [False, True], ids=["remote", "local"])
def test_a_failed_wait_still_stops_every_task(local: bool) -> None:
    ray = CancelRay(returns="", wait_fails=True)
    executor = _stopping(ray, local)
    executor.cancel_all()
    assert [r for r, force in ray.cancels if force] == ([] if local else ["a", "b", "c"])
    assert executor._running == {}
