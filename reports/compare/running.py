"""Loading and running both sides of ``deferlab compare`` at once, through the one runner.

Why both at once: a comparison is two independent runs of one system's claims, each in a child process of its
own (`reports.core.runner`), so on two cores it takes the time of the slower side. Each child's torch gets
one thread (`Request.threads`): two sides already fill two cores, and a thread per core in each would
oversubscribe them (the claim tests' tensors are small). Progress is the seconds each side has run and what
each finished with, never anything read from pytest's output. Both sides are tasks of the one executor
(`reports.core.executor`): this machine's pool, or the Ray cluster with ``--cluster``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core import runner as core_runner
from deferlab.reports.core.executor import Outcome, Task, each, executor_for, on_gpu, run_all
from deferlab.reports.core.runner import LoadError, Request, RunRecord
from deferlab.reports.core.sides import Side, run_error, verdict_counts

Say = Callable[[str], None]
Loader = Callable[..., str]  # check_loads(system) -> the loaded code's name
Runner = Callable[..., RunRecord]  # run(request, work=...) -> its record


def workers() -> int:
    """Both sides at once where two cores are there, else one after the other."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def load_both(sides: Sequence[Side], say: Say, *, loader: Loader = core_runner.check_loads) -> dict[str, str]:
    """Load every side at once (a fresh process each): role -> the loaded code's name (a revision's with its
    commit), or `UsageError` naming the first side that cannot be loaded and the loader's line."""
    say("loading " + " and ".join(f"{s.role} {s.spec}" for s in sides) + " (an uncached release downloads once)")
    found: dict[str, str | LoadError] = {}

    def load(side: Side) -> str | LoadError:
        try:
            return loader(side.system)
        except LoadError as e:  # every side's load ends; the first side's refusal is the one said
            return e

    each(sides, load, lambda side, got: found.__setitem__(side.role, got), len(sides))
    names = {}
    for s in sides:
        name = found[s.role]
        if isinstance(name, LoadError):
            raise UsageError(f"{s.role}: {name}") from None
        if s.revision and "+g" not in name:  # an extracted revision is no git checkout: name its commit
            name += f"+g{s.revision[:9]}"
        names[s.role] = name
    return names


def result(record: RunRecord, log_text: str = "") -> dict[str, Any]:
    """What the document and the files take of a side's run: its rows and verdicts, why they are incomplete
    (one line, `reports.core.sides.run_error`), the code that ran, its seconds and its whole log."""
    from deferlab.reports.compare.cells import name_of, where_of

    rows = record.mine()
    return {
        "rows": rows,
        "verdicts": {name_of(str(r["id"]), where_of(r)): str(r["verdict"]) for r in rows},
        "error": run_error(record.error, record.failed_tests(), rows),
        "system": record.described,
        "seconds": round(record.seconds, 1),
        "log": log_text or record.log,
    }


def run_both(
    sides: Sequence[Side],
    request: Request,
    work: Path,
    say: Say,
    *,
    runner: Runner = core_runner.run,
    heartbeat: float = 20.0,
) -> dict[str, dict[str, Any]]:
    """``request`` (its system replaced by each side's) on every side at once: role -> `result`, with a line
    every ``heartbeat`` seconds saying how long each side has run, and one when each side finishes."""
    t0 = time.perf_counter()
    finished: dict[str, str] = {}
    say(f"running the claims on {' and '.join(f'{s.role} {s.spec}' for s in sides)} ({workers()} at once, "
        f"profile {request.profile})")  # fmt: skip
    done = threading.Event()

    def beat() -> None:
        while not done.wait(heartbeat):
            parts = [f"{s.role} {finished.get(s.role, 'running')}" for s in sides]
            say(f"{time.perf_counter() - t0:.0f} s: " + ", ".join(parts))

    by_role = {s.role: s for s in sides}

    def done_side(o: Outcome) -> None:
        side, folder = by_role[o.task.key], o.task.work
        record = o.record or RunRecord(o.task.request.system, request.profile, error=o.error)
        log = folder / "pytest.log" if folder is not None else None
        out = result(record, log.read_text(errors="replace") if log is not None and log.is_file() else "")
        found[side.role] = out
        finished[side.role] = f"done in {time.perf_counter() - t0:.0f} s"
        say(f"{side.role} {side.spec}: {verdict_counts(out['verdicts'])} in {out['seconds']} s"
            + (f"; {out['error']}" if out["error"] else ""))  # fmt: skip

    found: dict[str, dict[str, Any]] = {}
    tasks = [Task(s.role, request.with_(system=s.system), retries=0, work=work / s.role.lower()) for s in sides]
    executor = executor_for(None, workers(), call=lambda task: runner(task.request, work=task.work))
    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        run_all(executor, tasks, done_side)
        return {s.role: found[s.role] for s in sides}
    finally:
        done.set()


def run_on_cluster(sides: Sequence[Side], request: Request, say: Say, cluster: str) -> dict[str, dict[str, Any]]:
    """``request`` on every side as one task each on the Ray cluster ``cluster`` (`reports.core.executor`), both
    submitted at once, each side loaded on its worker: role -> `result`, as `run_both` gives."""
    executor = executor_for(cluster, say=say)
    tasks = on_gpu(executor, [Task(s.role, request.with_(system=s.system), load=True) for s in sides], say)
    say(f"running the claims on {' and '.join(f'{s.role} {s.spec}' for s in sides)} on {cluster} (profile "
        f"{request.profile})")  # fmt: skip
    found: dict[str, dict[str, Any]] = {}

    def done(o: Outcome) -> None:
        record = o.record or RunRecord(o.task.request.system, request.profile, error=o.error)
        found[o.task.key] = out = result(record)
        say(f"{o.task.key}: {verdict_counts(out['verdicts'])} in {out['seconds']} s on {o.node}{' (CUDA)' if o.cuda else ''}"
            + (f"; {out['error']}" if out["error"] else ""))  # fmt: skip

    run_all(executor, tasks, done)
    return {s.role: found[s.role] for s in sides}
