"""The report's served-vs-trained steps: the skew table of every served path of the run (Kimi-K3's: the model's
here, each engine's in its child, `reports.report.served.kimi`; with ``--model``, each other family's per engine,
from a child process per engine, a task of the local executor writing a results file: `family_tables`), and the
sweep step's C13 exhaustive geometry over the same paths.

Why apart from `reports.report.run`: the runner orders steps; what a step does with the served paths (the
engines' loaded once a report, each in its child, by `reports.report.served.paths.RunPaths`, an engine that cannot
load recorded in one line) lives here, so the runner stays one page.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.families import DEFAULT
from deferlab.reference.system.families import family as fam
from deferlab.reference.system.systems import System
from deferlab.reports.core import process
from deferlab.reports.core.executor import LocalExecutor, Task, run_all
from deferlab.reports.core.runner import Request, RunRecord
from deferlab.reports.report.served import family, images, skew, tables_file
from deferlab.reports.report.served.kimi import config_request
from deferlab.reports.report.served.paths import RunPaths
from deferlab.reports.report.steps import StepFailed

CHILD_TIMEOUT_S = 1800.0  # one engine's family tables (its load with companions, then every family asked)


def served_step(
    config: PreprocessConfig,
    paths: RunPaths,
    say: Callable[[str], None],
    names: Sequence[str] = (DEFAULT,),
    work: Path | None = None,
) -> tuple[dict[str, Any], list[skew.Column]]:
    """The skew table of every path of the run (Kimi-K3's, when ``names`` has it), then, per other family of
    ``names`` and engine named, its table (`family_tables`): (report.json's ``served``, the figures' columns)."""
    doc: dict[str, Any] = {"config": config.name, "classes": [], "columns": [], "load_errors": {}}
    columns: list[skew.Column] = []
    if DEFAULT in names:
        found = paths.get()
        say(f"served: {len(found)} path(s): {', '.join(p.name for p in found)}")
        samples = images.samples()
        engines_answer = paths.request({"do": "skew", **config_request(config)})  # they work while this does
        columns = skew.skew_table(paths.local(), config, samples, progress=say)
        columns += [c for got in engines_answer(say) for c in got["columns"]]
        doc.update(skew.table_dict(columns, samples), load_errors=dict(paths.errors))
    engines = paths.specs()
    errors = list(paths.errors.values()) if DEFAULT in names else []
    if [n for n in names if n != DEFAULT]:
        doc["families"], more, failed = family_tables(engines, names, work or process.temp_dir("served-"), say)
        columns, errors = columns + more, errors + failed
    if errors:
        raise StepFailed("; ".join(errors), (doc, columns))
    return doc, columns


def family_tables(
    engines: dict[str, str], names: Sequence[str], work: Path, say: Callable[[str], None]
) -> tuple[list[dict[str, Any]], list[skew.Column], list[str]]:
    """Per engine, one child (`reports.report.served.family`) for the families of ``names`` it serves: (one entry
    per (family, engine) in family order, the columns, the engines' failures in one line each)."""
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    columns, errors = [], []
    for engine, spec in engines.items():
        wanted, na = family.pixel_families(engine, spec, names)
        entries.update({(f, engine): {"na": why} for f, why in na.items()})
        found, error = _run_child(engine, spec, wanted, work, say) if wanted else ({}, None)
        for f in wanted:
            got = found.get(f) or {"error": error or "the child wrote no table"}
            entries[(f, engine)] = {k: v for k, v in got.items() if k != "columns"}
            entries[(f, engine)]["columns"] = [c.to_dict() for c in got.get("columns", [])]
            columns += got.get("columns", [])
        errors += [error] if error else []
    order = [(f, e) for f in names for e in engines if (f, e) in entries]
    out = [{"family": f, "display": fam(f).display, "engine": e, "spec": engines[e], "config": fam(f).profile,
            **entries[(f, e)]} for f, e in order]  # fmt: skip
    return out, columns, errors


@dataclass(frozen=True)
class TablesTask(Task):
    """One engine's family tables as a task of the local executor (`reports.core.executor`): where it runs, the
    child (`reports.report.served.family`) loads the engine and writes its results file in the task's ``work``;
    the record says how the child ended, and the parent reads the file (`tables_file.read`), never an object
    handed back."""

    names: tuple[str, ...] = ()

    def files(self, work: Path) -> tuple[Path, Path]:
        """(the results file, the log) of this engine's child in ``work``."""
        engine = self.request.system.engine
        return work / f"served-{engine}.json", work / f"served-{engine}.log"

    def perform(self, work: Path | None, launcher: Any) -> RunRecord:
        system, folder = self.request.system, Path(work or process.temp_dir("served-"))
        out, log = self.files(folder)
        cmd = [sys.executable, "-m", "deferlab.reports.report.served.family", system.engine, str(system.spec),
               ",".join(self.names), str(out)]  # fmt: skip
        done = process.run(cmd, log=log, timeout=self.request.timeout)
        return RunRecord(system, self.request.profile, rc=done.rc, timed_out=done.timed_out, seconds=done.seconds,
                         wrote=out.is_file())  # fmt: skip


def _run_child(
    engine: str, spec: str, names: list[str], work: Path, say: Callable[[str], None]
) -> tuple[dict[str, Any], str | None]:
    """(family -> the child's answer, None) or ({}, why it failed in one line); its output in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    request = Request(System(engine, spec), timeout=CHILD_TIMEOUT_S)
    task = TablesTask(engine, request, retries=0, work=work, names=tuple(names))
    out, log = task.files(work)
    say(f"served: {engine} {spec}: {', '.join(names)} in a child process (log {log.name})")
    outcome = run_all(LocalExecutor(1), [task])[engine]
    done = outcome.record
    if done is None or done.rc != 0 or not out.is_file():
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()] if log.is_file() else []
        why = outcome.error if done is None else "timed out" if done.timed_out else f"exited {done.rc}"
        return {}, f"{engine} {spec!r} family tables: the child {why}" + (f": {lines[-1][:200]}" if lines else "")
    found = tables_file.read(out)
    for made in (out, tables_file.arrays_path(out)):  # the arrays live on in the figures; the report keeps the log
        made.unlink(missing_ok=True)
    return found, None


def geometry_step(
    config: PreprocessConfig, paths: RunPaths, max_side: int, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """C13 exhaustive over every path of the run (`reports.report.sweeps.geometry`); an engine that could not be loaded
    fails the step, the loaded paths' records are kept."""
    from deferlab.reports.report.sweeps.geometry import geometry_records

    local = paths.local()
    records = geometry_records(local, config, max_side=max_side, progress=say, remote=paths.geometry(max_side, say))
    if paths.errors:
        raise StepFailed("; ".join(paths.errors.values()), records)
    return records
