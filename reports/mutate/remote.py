"""``deferlab mutate --cluster ADDRESS``: each mutant's run one task of the Ray executor (`reports.core.cluster`),
in place of a run in this machine's `runs.Pool` (the reference still runs here, once, and is cached).

What a task carries: the mutated file's text (never a tree); where the tree it mutates comes from (the driver's
path with ``--cluster local``, which the worker shares; with a remote cluster a release, fetched into the
worker's own cache, the front door refusing a path of this machine); each run's node ids relative to the
checks' folder, re-anchored on the worker to its own (`Harness.suite_root`, `runner.suite_path`), and timeout;
``--first-kill``'s reference; and the campaign's harness, its launcher cold (no warm forks on a cluster). The
worker copies the tree (`engine.WorkTree`), applies the text, runs each run through the one runner, checks the
load only when a run recorded nothing, removes its copy and returns the records (`Ran`). The driver judges them
against the reference (`runs.judge`) and commits each mutant to the store as its outcome arrives, so a campaign
stopped on a cluster resumes with its pending mutants only; Ctrl-C and SIGTERM cancel the cluster's tasks (the
executor's ``cancel_all``). A mutant the equivalents file lists as CUDA-only asks for a GPU where the cluster has one
(`RayExecutor.gpu_demand`) and records where it ran and whether ``torch.cuda`` was there (``gpu_task``); one
that ran on CUDA is judged by its outcome, no longer reported as needing CUDA. A task whose worker is lost is retried once by Ray, then an ``error`` outcome
(retried by ``--resume``), never a lost campaign.
"""

from __future__ import annotations

import copy
import importlib
import os
import shutil
import types
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core import process
from deferlab.reports.core.runner import Launcher, Request, RunRecord
from deferlab.reports.core.tasks import CLUSTER_FORMS, Outcome, Task
from deferlab.reports.mutate import engine
from deferlab.reports.mutate import runs as mrun

LOAD_S = 600.0  # the worker's load check of a tree whose run recorded nothing (as `Harness.load_error`'s default)
Run = tuple[str, tuple[str, ...], float]  # (label: "" or "all_claims", node ids relative to the checks, timeout)


def front(cluster: str | None, kind: str, spec: str, anchor: Any) -> None:
    """``--cluster`` with the rest of the arguments, in one line (exit 2) before any long work: no ``--anchor``
    (a checkout's own unit tests run on this machine), a remote cluster only with a release (a worker fetches
    it; it has no path of this machine), and a ``ray://`` address that answers."""
    if cluster is None:
        return
    if anchor is not None:
        raise UsageError(f"--cluster {cluster}: --anchor runs the checkout's unit tests on this machine; run the "
                         "anchor without --cluster")  # fmt: skip
    if cluster != "local" and (spec == "installed" or Path(spec).expanduser().exists()):
        what = "the installed copy" if spec == "installed" else "a path"
        raise UsageError(
            f"--cluster {cluster}: --{kind} {spec!r} is {what} on this machine, which a worker does not have; "
            "accepted with a remote cluster: a release version (or --cluster local)"
        )
    if cluster.startswith("ray://"):
        from deferlab.reports.core.cluster import reachable

        why = reachable(cluster, 10.0)
        if why is not None:
            raise UsageError(f"--cluster: {cluster}: {why}; {CLUSTER_FORMS}")


# --- where it runs -------------------------------------------------------------------------------------------------
@dataclass
class Ran(RunRecord):
    """A mutant task's records: its first run's (the fields), every run's by label, and the tree's load check
    (None: it loads, or it was not needed)."""

    runs: dict[str, RunRecord] = field(default_factory=dict)
    load_error: str | None = None


def tree_root(engine_name: str, spec: str) -> Path:
    """The tree a release ``spec`` names on this machine: fetched into its own cache (`sources.resolve`)."""
    from deferlab.impl.loader.sources import resolve
    from deferlab.reference.system.systems import engine as engine_facts

    return resolve(importlib.import_module(engine_facts(engine_name).sources).ENGINE, spec).root


def anchored(root: Path, node: str) -> str:
    """A node id shipped relative to the checks' folder, absolute under ``root`` (this machine's)."""
    return node if os.path.isabs(node.split("::")[0]) else f"{root}/{node}"


def relative(root: Path, nodes: Sequence[str]) -> tuple[str, ...]:
    """Absolute node ids relative to ``root`` (the driver's checks' folder); one outside it is kept absolute."""
    out = []
    for node in nodes:
        path, sep, rest = node.partition("::")
        rel = os.path.relpath(path, root)
        out.append(node if rel.startswith("..") else f"{Path(rel).as_posix()}{sep}{rest}")
    return tuple(out)


@dataclass(frozen=True)
class MutantTask(Task):
    """One mutant (or the control, ``file`` None) on a worker: its tree copied from ``source`` (a path there, or
    a release fetched there when ``fetch``), ``text`` at ``file``, ``runs`` run in turn (`Harness.claims`)."""

    harness: Any = None  # runs.Harness
    source: str = ""
    fetch: bool = False
    file: str | None = None
    text: str = ""
    runs: tuple[Run, ...] = ()
    stop: str | None = None  # --first-kill's reference, as the campaign's plugin reads it

    def perform(self, work: Path | None, launcher: Launcher) -> RunRecord:
        harness = self.harness
        base = process.temp_dir("mutant-")  # in the run folder: a worker killed mid-task leaves it to the janitor
        try:
            root = tree_root(harness.engine, self.source) if self.fetch else Path(self.source)
            tree = engine.WorkTree.make(root, base, harness.package)
            if self.file is not None:
                tree.apply(self.file, self.text)
            scratch = base / "scratch"
            scratch.mkdir()
            env = None
            if self.stop is not None:
                (base / "stop.json").write_text(self.stop, encoding="utf-8")
                env = {mrun.STOP_ENV: str(base / "stop.json")}
            here = harness.suite_root()
            records = {
                label: harness.claims(tree.path, [anchored(here, n) for n in nodes], scratch, timeout, env)
                for label, nodes, timeout in self.runs
            }
            silent = any(not r.timed_out and not (r.wrote and r.recorded()) for r in records.values())
            load = harness.load_error(tree.path, LOAD_S) if silent else None
            first = records[self.runs[0][0]]
            return Ran(**{f.name: getattr(first, f.name) for f in fields(RunRecord)}, runs=records, load_error=load)
        finally:
            shutil.rmtree(base, ignore_errors=True)


# --- the driver ----------------------------------------------------------------------------------------------------
@dataclass
class Remote:
    """The campaign's side of the cluster: ``source`` (``fetch``: a release each worker fetches), the harness
    shipped with ``launcher`` (cold), and what each submitted task's record needs back."""

    campaign: mrun.Campaign
    source: str
    fetch: bool
    launcher: Launcher
    stop: str | None = None
    cuda_only: frozenset[str] = frozenset()  # reviewed survivors only CUDA reaches (the equivalents file)
    gpu: dict[str, Any] | None = None  # what such a mutant's task asks for (`RayExecutor.gpu_demand`), None: no GPU
    asked: dict[str, tuple[dict[str, Any], list[str] | None, list[tuple[str, list[str]]]]] = field(default_factory=dict)

    def shipped(self) -> mrun.Harness:
        """The campaign's harness as a task carries it: a copy whose launcher is ``launcher`` (one of the
        harness's own methods bound to the copy, so nothing of the driver's launcher travels)."""
        harness = copy.copy(self.campaign.harness)
        own = getattr(self.launcher, "__self__", None) is self.campaign.harness
        harness.launcher = types.MethodType(self.launcher.__func__, harness) if own else self.launcher  # type: ignore[attr-defined]
        return harness

    def task(self, key: str, m: engine.Mutant | None) -> MutantTask | dict[str, Any]:
        """The task of mutant ``m`` (None: the control), or its ``error`` record when it cannot be made."""
        c = self.campaign
        rec: dict[str, Any] = {} if m is None else {**asdict(m), "id": m.id, "node": list(m.node)}
        chosen, runs = (None, [("", mrun.units_of(c.reference))]) if m is None else c.runs_of(m)
        code = None if m is None else c.sources.mutated(m)
        if m is not None and code is None:
            return {**rec, "outcome": "error", "killed_by": [], "reasons": {"(harness)": f"ValueError: {mrun.INCOMPETENT}"}, "seconds": 0}  # fmt: skip
        if m is not None and code is not None:
            rec["diff"] = engine.diff(c.sources.text(m.file), code, m.file)
        here = c.harness.suite_root()
        shipped = tuple((label, relative(here, mrun.absolute(c.reference, c.nodes(u))), c.timeout(c.nodes(u))) for label, u in runs)  # fmt: skip
        harness = self.shipped()
        request = Request(harness.system(self.source), harness.profile, timeout=sum(r[2] for r in shipped) + LOAD_S)
        self.asked[key] = (rec, chosen, runs)
        gpu = self.gpu if m is not None and self.gpu is not None and m.id in self.cuda_only else {}
        return MutantTask(key, request, harness=harness, source=self.source, fetch=self.fetch,
                          file=None if m is None else m.file, text=code or "", runs=shipped, stop=self.stop, **gpu)  # fmt: skip

    def record(self, o: Outcome) -> dict[str, Any] | None:
        """The mutant's record judged on the driver (None: the control had no outcome; `--resume` runs it)."""
        rec, chosen, runs = self.asked.pop(o.task.key)
        ran = o.record if isinstance(o.record, Ran) and o.error is None else None
        if ran is None:
            why = (o.error or "the task returned no record")[:400]
            if o.task.key == mrun.CONTROL:
                return None
            return {**rec, "outcome": "error", "killed_by": [], "reasons": {"(harness)": why}, "seconds": 0}
        for label, units in runs:
            record = ran.runs[label]
            v = self.campaign.verdict(record, units, lambda: ran.load_error)
            if o.task.key == mrun.CONTROL:
                return {"outcome": v.outcome, "seen_by": v.killed_by, "reasons": v.reasons, "seconds": record.seconds,
                        "run": "cold"}  # fmt: skip
            rec.update(mrun.part(label, v, record.seconds))
        rec["claims_run"] = chosen
        if o.task.gpus or o.task.resources:  # a CUDA-only mutant sent to a GPU node: where it ran, read there
            rec["gpu_task"] = {"node": o.node, "cuda": o.cuda, "asked": {"gpus": o.task.gpus, **o.task.resources}}
        return rec

    def run(self, executor: Any, todo: dict[str, engine.Mutant], keys: list[str], done: Callable[[str, dict], None], say: Callable) -> None:  # fmt: skip
        """Every key (mutant ids, `runs.CONTROL`) as one task of ``executor``, all submitted at once; ``done(key,
        record)`` in this thread as each outcome arrives."""
        tasks = []
        for key in keys:
            got = self.task(key, None if key == mrun.CONTROL else todo[key])
            if isinstance(got, dict):
                done(key, got)
            else:
                tasks.append(got)

        def arrived(o: Outcome) -> None:
            rec = self.record(o)
            if rec is None:
                say(f"control: no outcome on {o.node} ({o.error}); --resume runs it again")
            else:
                done(o.task.key, rec)

        sent = sum(1 for t in tasks if t.gpus or t.resources)
        if self.cuda_only & set(keys):
            where = f"{sent} to a GPU node ({self.gpu})" if self.gpu else "no GPU on the cluster: run on CPU as before"
            say(f"{len(self.cuda_only & set(keys))} CUDA-only mutant(s) (reviewed): {where}")
        executor.map(tasks, arrived)
