"""`deferlab report`: run every step, write report.json / report.md / PNGs atomically, compare with the baseline.

Order: properties (the shipped checks of each system under test through the one runner, or a results file),
IPC verdicts (C9), sweeps (with C13's exhaustive geometry over the run's served paths), served vs trained (the
skew table), simulator, figures, benchmarks (opt-in: ``--bench``), regression check. The properties step's work
is its child processes, so the steps after it up to the figures run beside it, in this process, instead of after
it (`StepRunner.start`: on two cores the report no longer waits for them once the checks end); the claim table
is built once it ends, and the benchmarks start only then (they time a machine nothing else of the report uses).
The report is built in a
hidden staging directory and renamed into place only when complete (each claim run's results file and log
under ``runs/`` in it); the ``latest`` pointer next to it is updated last.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from deferlab.impl.compiled import numba_missing
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.systems import DEFAULT_FAMILY, System
from deferlab.reports.core import environment, junit, process, summary
from deferlab.reports.core.atomic import staged_directory, update_latest, write_text_atomic
from deferlab.reports.core.claims import load_claim_statements
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.core.sides import selected_families
from deferlab.reports.report import benchmarks, claims, simulation
from deferlab.reports.report.plots import video as video_plots
from deferlab.reports.report.plots.steps import plot_steps
from deferlab.reports.report.regressions import compare, load_baseline
from deferlab.reports.report.render import failure_groups, junit_rows, render_markdown, step_summary
from deferlab.reports.report.served import report as served_report
from deferlab.reports.report.served.paths import RunPaths, named_specs
from deferlab.reports.report.steps import StepFailed, StepRunner
from deferlab.reports.report.sweeps import collect as sweep_report
from deferlab.reports.report.sweeps import compute as sweeps_mod
from deferlab.reports.report.sweeps import geometry

SCHEMA_VERSION = 2  # of report.json (2: the runner's records: failed_tests, each property's system and message)
STEPS = ("properties", "ipc", "sweeps", "served", "sim", "bench", "plots")
EXIT_OK, EXIT_REGRESSION, EXIT_STEP_FAILED = 0, 1, 3  # 2, bad usage, is the CLI's (`reports.cli`)


@dataclass
class ReportOptions:
    """Everything `run_report` needs, already validated by the CLI."""

    profile: str
    config: PreprocessConfig
    config_source: str
    out: Path
    baseline: Path | None
    from_results: Path | None = None
    impl: str | None = None
    skip: set[str] = field(default_factory=set)
    bench: bool = False  # run the benchmarks (minutes; their ratios never gate)
    bench_args: list[str] = field(default_factory=list)
    max_side: int = sweeps_mod.MAX_SIDE  # sweeps cover 1..max_side per side
    limits: tuple[int, ...] = sweeps_mod.SWEEP_LIMITS  # in_patch_limit values swept
    strict: bool = False  # the strict switch: --strict or DEFERLAB_STRICT=1 (semantics §17.1)
    engines: dict[str, str] = field(default_factory=dict)  # every engine named (--NAME SPEC): its code, not the model
    sglang: str | None = None  # an engine named as before every engine had an option (`specs` reads both)
    vllm: str | None = None
    family: str = DEFAULT_FAMILY  # --model: the model families the engines' claims judge (`System.family`)
    checked: bool = False  # the CLI already loaded each engine once (`runner.check_loads`): the step need not again
    media_proc_cfg: dict[str, Any] | None = None  # --checkpoint: the snapshot's raw media_proc_cfg, for vLLM
    paths: RunPaths | None = None  # the run's served paths (built from the above when None)
    junit: Path | None = None  # --junit FILE: one testcase per (claim, column), written after the report
    fail_on: frozenset[Any] = frozenset()  # --fail-on: severity classes whose failing claim exits 1 (semantics §21)

    def specs(self) -> dict[str, str]:
        """engine -> spec of every engine named, in the registry's order."""
        return named_specs(self, self.engines)


def _properties(
    opts: ReportOptions, runner: StepRunner, stage: Path, targets: list[System]
) -> Callable[[], list[RunRecord]]:
    """Start the properties step beside the steps that follow; the function returned waits for it and gives the
    records of the claim runs (or of the results file): empty records when none ran, so every claim still has
    its not-run row."""
    if opts.from_results is not None:
        wait = runner.start("properties", claims.read_claims, opts.from_results)
    else:
        names = ", ".join(s.key for s in targets)
        runner.say(f"properties: the shipped checks of {names} (profile {opts.profile}); logs in runs/ of the report")
        kw = {"profile": opts.profile, "strict": opts.strict, "work": stage / "runs", "checked": opts.checked}
        wait = runner.start("properties", claims.run_claims, targets, **kw)
    return lambda: wait() or [RunRecord(s, opts.profile) for s in targets]


def _geometry(opts: ReportOptions, runner: StepRunner, paths: RunPaths) -> list[dict[str, Any]]:
    """C13 exhaustive; skipped with one line when the grid needs the numba-compiled sweep and numba is missing."""
    why = numba_missing() if opts.max_side**2 > geometry.INTERPRETED_FULL else None
    if why is not None and not {"sweeps", "sweeps:geometry"} & opts.skip:
        runner.skipped("sweeps:geometry", f"the numba-compiled C13 geometry sweep {why}")
        return []
    step = served_report.geometry_step
    return runner.run("sweeps:geometry", step, opts.config, paths, opts.max_side, runner.say, group="sweeps") or []


def _bench(opts: ReportOptions, runner: StepRunner, stage: Path) -> list[dict[str, Any]]:
    """The benchmarks with ``--bench`` (they take minutes and never gate); the checkpoint-vs-vLLM one is left
    out with one line when its extra is missing."""
    if "bench" in opts.skip or not opts.bench:
        runner.skipped("bench", "--skip" if "bench" in opts.skip else "opt-in: --bench (minutes; never gates)")
        return []
    why = numba_missing()
    if why is not None:
        runner.skipped("bench:vllm", f"the checkpoint-vs-vLLM benchmark {why}")
    return runner.run("bench", _bench_step, stage, opts.bench_args, why is not None) or []


def _bench_step(stage: Path, extra: list[str], without_vllm: bool) -> list[dict[str, Any]]:
    path, log = stage / "benchmarks.json", stage / "runs" / "bench.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = benchmarks.bench_command(path, extra, without_vllm=without_vllm)
    rc = process.run(cmd, env=benchmarks.bench_env(), log=log).rc
    found = benchmarks.load_benchmarks(path) if path.is_file() else []
    if rc != 0:
        raise StepFailed(f"benchmark run exited {rc}" + (" (no benchmark collected)" if rc == 5 else ""), found)
    return found


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """torch's intra-op pool at one thread in this process (restored after): the steps run beside the claim
    runs, whose workers hold the cores; a pool of a thread per core then spins against them (the served step
    took 3x the time on a loaded 2-core machine). Its results do not depend on the pool's size."""
    torch = sys.modules.get("torch")
    if torch is None:
        import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def collect(opts: ReportOptions, runner: StepRunner, stage: Path) -> dict[str, Any]:
    """Run every step into ``stage`` and return the report dict (without regressions)."""
    statements = load_claim_statements()
    properties = _properties(opts, runner, stage, claims.systems(opts.specs(), opts.impl, opts.family))
    with _one_torch_thread():  # beside the claim runs' workers, which hold the cores
        ipc = runner.run("ipc", simulation.ipc_verdicts, opts.profile)
        kw = {"limits": opts.limits, "max_side": opts.max_side, "progress": runner.say}
        sweeps = runner.run("sweeps", sweep_report.collect_sweeps, opts.config, **kw) or []
        paths = opts.paths or RunPaths(engines=opts.specs(), media_proc_cfg=opts.media_proc_cfg)
        names, work = selected_families(opts.family), stage / "runs"
        kimi = {"sweeps"} if DEFAULT_FAMILY not in names else {"sweeps", "served"}  # the steps using Kimi-K3's paths
        if not kimi <= opts.skip:  # load the engines once, timed apart from the steps that use them
            runner.run("paths", paths.get)
        sweeps += _geometry(opts, runner, paths)
        step = served_report.served_step
        served, columns = runner.run("served", step, opts.config, paths, runner.say, names, work) or (None, [])
        sim = runner.run("sim", simulation.run_scenarios, runner.say) or []
        grid = (opts.max_side, opts.limits)
        figures = plot_steps(runner, stage, config=opts.config, profile=opts.profile, grid=grid, sweeps=sweeps,
                             sim=sim, served=(served, columns))  # fmt: skip
    records = properties()  # the claim runs' children have ended: the table, then the benchmarks
    table = claims.claim_table(records, statements)
    figures += runner.run("plot:video", video_plots.report_figures, [x for r in records for x in r.rows], stage,
                          group="plots") or []  # fmt: skip
    if ipc:
        table = claims.merge_rows(table, claims.ipc_claim_rows(ipc, statements.get("C9", {})))
    bench = _bench(opts, runner, stage)
    cfg = opts.config.to_media_proc_cfg()
    systems = dict(paths.systems())
    systems.update({r.system.engine: r.described for r in records if r.system.real and r.described})
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "profile": opts.profile,
        "claims_profile": next((r.profile for r in records if r.wrote), None),  # what the claim searches ran under
        "strict": opts.strict,
        "impl": "+".join(s.key for s in claims.systems(opts.specs()) if s.real) or opts.impl or "deferlab",
        "system": next((r.described for r in records if r.described), None),
        "systems": systems or None,
        "environment": environment.environment(),
        "config": {"name": opts.config.name, "source": opts.config_source, "media_proc_cfg": cfg},
        "decision_source": sweeps_mod.DECISION_SOURCE,
        "sweep_grid": {"max_side": opts.max_side, "limits": list(opts.limits)},
        "results_from": str(opts.from_results) if opts.from_results else None,
        "claims": table,
        "properties": claims.properties(records),
        "failed_tests": claims.failed_tests(records),
        "sweeps": sweeps,
        "served": served,
        "sim": sim,
        "ipc": ipc or [],
        "benchmarks": bench,
        "figures": figures,
        "regressions": [],
        "notes": [],
        "baseline": None,
        "steps": [],
    }


def exit_status(report: dict[str, Any], fail_on: frozenset[Any] = frozenset()) -> int:
    """0: clean; 1: a regression against the baseline, or a failing claim of a ``fail_on`` severity class
    (``--fail-on``); 3: neither, but a step failed.

    A failed step never passes for a clean report: its part of the report is missing or partial, so the run
    must not exit 0 (the report is still written, with the step and its error listed). Benchmark ratios are
    never regressions, so the status never depends on timing."""
    if report["regressions"] or failing_classes(report, fail_on):
        return EXIT_REGRESSION
    if any(s["status"] == "failed" for s in report["steps"]):
        return EXIT_STEP_FAILED
    return EXIT_OK


def run_report(opts: ReportOptions, log: TextIO | None = None) -> int:
    """Build, write and gate one report; returns the exit code (`exit_status`)."""
    runner = StepRunner(opts.skip, log or sys.stderr)
    baseline = load_baseline(opts.baseline) if opts.baseline is not None else None
    with staged_directory(opts.out) as stage:
        report = collect(opts, runner, stage)
        report["steps"] = runner.as_dicts()
        if baseline is not None:
            regs, notes = compare(report, baseline, strict=opts.strict)
            report.update(regressions=regs, notes=notes, baseline=str(opts.baseline))
        write_report(report, stage)
    update_latest(opts.out)
    failed = [s["name"] for s in report["steps"] if s["status"] == "failed"]
    runner.say(f"report written to {Path(opts.out).resolve()} (report.md, report.json)")
    write_ci_outputs(report, opts.junit, runner.say)
    if failed:
        runner.say(f"failed steps: {', '.join(failed)}")
    for r in report["regressions"]:
        runner.say(f"REGRESSION {r['kind']} {r['name']}: {r['detail']}")
    for cid, policy, cls in failing_classes(report, opts.fail_on):
        runner.say(f"FAIL-ON {cls}: {cid} fails under {policy}")
    return exit_status(report, opts.fail_on)


def failing_classes(report: dict[str, Any], fail_on: frozenset[Any]) -> list[tuple[str, str, str]]:
    """(claim, column, class) of each failing claim row whose severity (semantics §21.3) ``fail_on`` names."""
    from deferlab.reports.core.severity import severity

    wanted = {getattr(c, "label", str(c)) for c in fail_on}
    found = ((r["id"], r.get("policy", ""), severity(r)) for r in report.get("claims", []))
    return [(cid, pol, cls) for cid, pol, cls in found if cls is not None and cls in wanted]


def write_ci_outputs(report: dict[str, Any], junit_file: Path | None, say: Callable[[str], None]) -> None:
    """After the report is in place: the JUnit XML to ``junit_file`` (atomically; not-run cells are skips) and,
    under GitHub Actions, the summary and verdict table appended to ``$GITHUB_STEP_SUMMARY``."""
    if junit_file is not None:
        junit.write_junit(junit_rows(report), junit_file, suite="deferlab report", not_run="skipped")
        say(f"JUnit XML written to {junit_file}")
    if summary.append_step_summary(step_summary(report)) is not None:
        say("summary appended to $GITHUB_STEP_SUMMARY")


def write_report(report: dict[str, Any], directory: Path) -> None:
    """report.json and report.md into ``directory``, each atomically; report.json keeps the grouped failures
    report.md shows (``failure_groups``), so a reader of the JSON meets each distinct failure once too."""
    report["failure_groups"] = failure_groups(report["claims"])
    write_findings(report, directory)
    write_text_atomic(directory / "report.json", json.dumps(report, indent=1, default=str) + "\n")
    write_text_atomic(directory / "report.md", render_markdown(report))


def write_findings(report: dict[str, Any], directory: Path) -> None:
    """findings.json, findings.md and each defect finding's F<n>.png beside report.md (semantics §21.4); the
    result is kept in ``report["findings"]`` so report.md's leading section links the pictures. Rows that cannot
    be read as findings leave the section to say so (`fromreport.section`)."""
    from deferlab.reference.system.errors import InputValueError
    from deferlab.reports.findings import fromreport, outputs

    try:
        result = fromreport.findings(report)
    except (KeyError, TypeError, InputValueError):
        return
    outputs.write(fromreport.versions_like(report), result, directory, "report.json")
    report["findings"] = result
