"""Ray Client's transient session-start failure is tried again within the connect timeout, nothing else is."""

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
