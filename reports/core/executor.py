"""Where a command's runs execute: this machine's pool (the default, embedded) or a Ray cluster (``--cluster``).

A *task* is one call of the one runner (`reports.core.runner.run`): a system under test and the checks (or the
mutant) it runs, with the CPUs it needs declared so nothing oversubscribes, and a GPU where only CUDA can decide
it. Its result is the runner's `RunRecord`, wrapped in an `Outcome` that says where it ran and how many attempts
it took. `versions`, `compare` and `mutate` submit their tasks through `executor_for`; the outputs are the same
files as a local run, written once by the driver, whole or not at all.

Faults: a task past its timeout, or lost with its worker, is tried once more, then recorded as that task's
outcome (an error, never a lost command). The local pool never imports Ray; `reports.core.cluster` (the Ray
executor) is imported only when ``--cluster`` is given.

One scheduler on this machine: `each` is the only place deferlab runs work in threads (``jobs`` at a time, results
in the caller's thread, one way of stopping). `LocalExecutor.map` is `each` over runner tasks; ``compare`` submits
its two sides as tasks, the report its claim runs and family tables, and ``mutate``'s `reports.mutate.runs.Pool`
lends each of its threads a work tree around `each` (see its docstring for why the slots stay there).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core import process
from deferlab.reports.core import runner as runner_mod
from deferlab.reports.core.tasks import CLUSTER_FORMS, Outcome, Task, perform

__all__ = [
    "CLUSTER_FORMS",
    "DISTRIBUTES",
    "Executor",
    "LocalExecutor",
    "Outcome",
    "Task",
    "check_cluster",
    "each",
    "executor_for",
    "run_all",
]


class Executor(Protocol):
    """Runs tasks, calling ``done(outcome)`` in the driver's thread as each finishes (never raising for a task)."""

    name: str

    def map(self, tasks: Sequence[Task], done: Callable[[Outcome], None]) -> None: ...

    def close(self) -> None: ...


def each(
    items: Iterable[Any],
    fn: Callable[[Any], Any],
    done: Callable[[Any, Any], None],
    jobs: int = 1,
    *,
    on_stop: Callable[[BaseException], None] | None = None,
) -> None:
    """``fn(item)`` for every item, ``jobs`` at a time in worker threads, in order; ``done(item, result)`` in the
    calling thread as each finishes. An exception from ``fn`` or ``done`` (Ctrl-C, SIGTERM's `process.Stopped`, a
    failure) stops it: ``on_stop(exception)``, no item starts after it, and every child of the command is killed
    until each running ``fn`` has returned (so nothing it holds, a work tree, is removed under it), then the
    exception goes on. Why kill rather than wait: each child leads its own process group (`reports.core.process`),
    so Ctrl-C does not reach it, and a thread would wait out the rest of a claims run."""
    pending = list(items)
    jobs = max(1, int(jobs))
    pool = ThreadPoolExecutor(max_workers=jobs)
    running: dict[Future, Any] = {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                item = pending.pop(0)
                running[pool.submit(fn, item)] = item
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                item = running.pop(future)
                done(item, future.result())
    except BaseException as e:
        if on_stop is not None:
            on_stop(e)
        while not all(f.done() for f in running):
            process.kill_all()
            wait(running, timeout=0.2)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class LocalExecutor:
    """This machine: ``jobs`` tasks at once, each a child process through the runner (its own process group)."""

    name = "local"

    def __init__(
        self,
        jobs: int = 1,
        launcher: runner_mod.Launcher = runner_mod.cold,
        call: Callable[[Task], runner_mod.RunRecord] | None = None,
    ) -> None:
        """``call`` replaces `perform` (a command's tests give their fake runner and loader this way; ``compare``
        its runner with each side's work folder)."""
        self.jobs = max(1, int(jobs))
        self.launcher = launcher
        self.call = call or (lambda task: perform(task, launcher=self.launcher))
        self._stop = threading.Event()

    def _attempt(self, task: Task) -> Outcome:
        t0 = time.perf_counter()
        tries = 0
        try:
            while True:
                tries += 1
                record = self.call(task)
                if not record.timed_out or tries > task.retries or self._stop.is_set():
                    error = record.error if record.timed_out else None
                    return Outcome(task, record, error, tries, "local", None, round(time.perf_counter() - t0, 2))
        except Exception as e:  # noqa: BLE001 - a harness failure is this task's outcome
            return Outcome(task, None, f"{type(e).__name__}: {e}")

    def map(self, tasks: Sequence[Task], done: Callable[[Outcome], None]) -> None:
        """Through `each`. Stopped (Ctrl-C, SIGTERM, an error in ``done``): no task starts after it, a Ctrl-C or
        SIGTERM refuses every new child of the command, and every running child is killed before the threads
        are waited for, so the stop takes a moment, not the rest of a claims run."""
        each(tasks, self._attempt, lambda _task, outcome: done(outcome), self.jobs, on_stop=self._stopping)

    def _stopping(self, error: BaseException) -> None:
        self._stop.set()
        process.kill_all(stop=isinstance(error, KeyboardInterrupt | process.Stopped))

    def close(self) -> None:
        self._stop.set()


def check_cluster(value: str | None, command: str) -> str | None:
    """``--cluster``'s value checked at the front door (one line, exit 2): None (the local pool), ``auto``,
    ``local`` or ``ray://HOST:PORT``; ``command`` names the command for the refusal of one with nothing to
    distribute (`DISTRIBUTES`)."""
    if value is None:
        return None
    if command not in DISTRIBUTES:
        raise UsageError(
            f"--cluster: deferlab {command} runs one system in one process and has nothing to distribute; "
            f"accepted with {', '.join(DISTRIBUTES)}"
        )
    text = str(value).strip()
    if text in ("auto", "local"):
        return text
    if text.startswith("ray://"):
        host, _, port = text[len("ray://") :].rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            return text
    raise UsageError(f"--cluster: {value!r} is no cluster address; {CLUSTER_FORMS}")


DISTRIBUTES = ("versions", "compare", "mutate")


def executor_for(cluster: str | None, jobs: int = 1, *, say: Callable[[str], None] = print, **options: Any) -> Any:
    """The local pool (``cluster`` None; ``launcher`` and ``call`` options are its) or the Ray executor
    (`reports.core.cluster`, which needs the ``cluster`` extra: refused in one line naming it when Ray is not
    installed; its options: ``num_cpus``, ``resources``, ``connect_timeout``)."""
    if cluster is None:
        return LocalExecutor(jobs, options.get("launcher", runner_mod.cold), options.get("call"))
    from deferlab.reference.system.extras import why_missing

    missing = why_missing("cluster")
    if missing is not None:
        raise UsageError(f"--cluster: {missing}")
    from deferlab.reports.core.cluster import RayExecutor

    return RayExecutor(cluster, say=say, **{k: v for k, v in options.items() if k not in ("launcher", "call")})


def on_gpu(executor: Any, tasks: Iterable[Task], say: Callable[[str], None]) -> list[Task]:
    """The claims ``tasks`` asking for the cluster's GPU where a node offers one (`RayExecutor.gpu_demand`): their
    CUDA-parametrized tests then run there and each verdict records the device it ran on; unchanged otherwise (a
    CPU worker skips those tests, as this machine does)."""
    demand = getattr(executor, "gpu_demand", lambda: None)()
    if demand is None:
        return list(tasks)
    say(f"a GPU node is there ({demand}): each claims task asks for it, so its CUDA tests run")
    return [dataclasses.replace(t, **demand) for t in tasks]


def run_all(executor: Any, tasks: Iterable[Task], done: Callable[[Outcome], None] | None = None) -> dict[str, Outcome]:
    """Every task through ``executor``: key -> outcome (``done`` sees each as it finishes); the executor is closed
    after, however the run ends."""
    found: dict[str, Outcome] = {}

    def keep(outcome: Outcome) -> None:
        found[outcome.task.key] = outcome
        if done is not None:
            done(outcome)

    try:
        executor.map(list(tasks), keep)
    finally:
        executor.close()
    return found
