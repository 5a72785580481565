"""Loading and running both sides of ``deferlab compare`` at once, through the one runner.

Why both at once: a comparison is two independent runs of one system's claims, each in a child process of its
own (`reports.core.runner`), so on two cores it takes the time of the slower side. Each child's torch gets
one thread (`Request.threads`): two sides already fill two cores, and a thread per core in each would
oversubscribe them (the claim tests' tensors are small). Progress is the seconds each side has run and what
each finished with, never anything read from pytest's output.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core import process
from deferlab.reports.core import runner as core_runner
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
    found = at_once({s.role: (lambda s=s: loader(s.system)) for s in sides}, len(sides))
    names = {}
    for s in sides:
        try:
            name = found[s.role].result()
        except LoadError as e:
            raise UsageError(f"{s.role}: {e}") from None
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

    def one(side: Side) -> dict[str, Any]:
        folder = work / side.role.lower()
        record = runner(request.with_(system=side.system), work=folder)
        log = folder / "pytest.log"
        out = result(record, log.read_text(errors="replace") if log.is_file() else "")
        finished[side.role] = f"done in {time.perf_counter() - t0:.0f} s"
        say(f"{side.role} {side.spec}: {verdict_counts(out['verdicts'])} in {out['seconds']} s"
            + (f"; {out['error']}" if out["error"] else ""))  # fmt: skip
        return out

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        found = at_once({s.role: (lambda s=s: one(s)) for s in sides}, workers())
        return {s.role: found[s.role].result() for s in sides}
    finally:
        done.set()


def run_on_cluster(sides: Sequence[Side], request: Request, say: Say, cluster: str) -> dict[str, dict[str, Any]]:
    """``request`` on every side as one task each on the Ray cluster ``cluster`` (`reports.core.executor`), both
    submitted at once, each side loaded on its worker: role -> `result`, as `run_both` gives."""
    from deferlab.reports.core.executor import Outcome, Task, executor_for, on_gpu, run_all

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


def at_once(jobs: dict[str, Callable[[], Any]], threads: int) -> dict[str, concurrent.futures.Future]:
    """Each job in a thread (``threads`` at a time), all waited for. Why the children are killed on the way out
    of an interrupt: each is the leader of its own process group (`reports.core.process`), so Ctrl-C does not
    reach it, and the threads would wait for children nobody waits for any more."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)
    try:
        futures = {key: pool.submit(job) for key, job in jobs.items()}
        concurrent.futures.wait(futures.values())
        return futures
    except BaseException:
        process.kill_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
