"""`deferlab report`: run every step, write report.json / report.md / PNGs atomically, compare with the baseline.

Order: property suite (or its results file), claim table, IPC verdicts (C9),
sweeps (with C13's exhaustive geometry over the run's served paths), served vs
trained (the skew table), simulator, benchmarks, figures, regression check. The report is built
in a hidden staging directory and renamed into place only when complete; the
``latest`` pointer next to it is updated last.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reports.core import environment, junit, summary
from deferlab.reports.core.atomic import staged_directory, update_latest, write_text_atomic
from deferlab.reports.report import benchmarks, claims, simulation
from deferlab.reports.report.plots import figures as plots
from deferlab.reports.report.plots import served as plots_served
from deferlab.reports.report.plots import sim as plots_sim
from deferlab.reports.report.regressions import compare, load_baseline
from deferlab.reports.report.render import failure_groups, junit_rows, render_markdown, step_summary
from deferlab.reports.report.served import report as served_report
from deferlab.reports.report.served.paths import RunPaths
from deferlab.reports.report.steps import StepFailed, StepRunner
from deferlab.reports.report.sweeps import collect as sweep_report
from deferlab.reports.report.sweeps import compute as sweeps_mod

SCHEMA_VERSION = 1
PROFILES = ("dev", "ci", "thorough")
STEPS = ("properties", "ipc", "sweeps", "served", "sim", "bench", "plots")
_HERE = Path(__file__).resolve().parents[1]
# A source checkout keeps reports in reports/out; an installed package never writes into site-packages.
DEFAULT_OUT_PARENT = _HERE / "out" if (_HERE.parent / "pyproject.toml").is_file() else Path.cwd() / "deferlab-reports"


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
    bench_args: list[str] = field(default_factory=list)
    max_side: int = sweeps_mod.MAX_SIDE  # sweeps cover 1..max_side per side
    limits: tuple[int, ...] = sweeps_mod.SWEEP_LIMITS  # in_patch_limit values swept
    results_dir: Path = claims.RESULTS_DIR  # where a suite run by the report records its verdicts
    sglang: str | None = None  # check real SGLang (installed, a checkout path, a version) instead of the model
    sglang_loaded: bool = False  # the CLI already loaded ``sglang`` once (`preflight`): the step need not again
    vllm: str | None = None  # also check real vLLM's served path (installed, a checkout path, a version)
    media_proc_cfg: dict[str, Any] | None = None  # --checkpoint: the snapshot's raw media_proc_cfg, for vLLM
    paths: RunPaths | None = None  # the run's served paths (built from the above when None)
    junit: Path | None = None  # --junit FILE: one testcase per (claim, column), written after the report


def default_out_dir(now: datetime | None = None, prefix: str = "") -> Path:
    """``reports/out/<prefix><UTC timestamp>`` (``deferlab versions`` uses the prefix ``versions-``)."""
    return DEFAULT_OUT_PARENT / f"{prefix}{(now or datetime.now(UTC)).strftime('%Y%m%dT%H%M%SZ')}"


def _properties_step(opts: ReportOptions, log: TextIO) -> dict[str, Any]:
    if opts.from_results is not None:
        return claims.load_results(opts.from_results)
    if opts.vllm is None:
        return _suite_step(opts, log)
    first, errors = None, []  # vLLM alone: no model suite to run (its claims are about SGLang's PR)
    if opts.sglang is not None:
        try:
            first = _suite_step(opts, log)
        except StepFailed as e:
            first, errors = e.value, [str(e)]
    try:
        vllm = served_report.vllm_claims(opts.profile, opts.vllm, opts.results_dir / "vllm", log)
    except StepFailed as e:
        vllm, errors = e.value or {}, [*errors, str(e)]
    merged = served_report.merge_results(first, vllm)
    if errors:
        raise StepFailed("; ".join(errors), merged)
    return merged


def _suite_step(opts: ReportOptions, log: TextIO) -> dict[str, Any]:
    results_dir = opts.results_dir
    if opts.sglang is not None:
        from deferlab.reports.versions.matrix import SGLangLoadError, preflight

        try:  # the driver's one line (unknown version, not a checkout, no Kimi-K3, offline, an import failing)
            if not opts.sglang_loaded:
                preflight(opts.sglang)
        except SGLangLoadError as e:
            raise StepFailed(f"sglang {opts.sglang!r}: {e}") from None
        results_dir = opts.results_dir / "sglang"
    rc = claims.run_property_suite(opts.profile, opts.impl, results_dir=results_dir, log=log, sglang=opts.sglang)
    results = claims.load_results(results_dir)
    if rc != 0:
        raise StepFailed(f"pytest exited {rc}; verdicts read from what it recorded", results)
    return results


def _bench_step(stage: Path, extra: list[str], log: TextIO) -> list[dict[str, Any]]:
    path = stage / "benchmarks.json"
    rc = benchmarks.run_benchmarks(path, extra=extra, log=log)
    found = benchmarks.load_benchmarks(path) if path.is_file() else []
    if rc != 0:
        raise StepFailed(f"benchmark run exited {rc}" + (" (no benchmark collected)" if rc == 5 else ""), found)
    return found


FIGURES = (
    (
        "decision_maps",
        "Decision map",
        "Deferred (green) vs eager (red) per width x height, for each in_patch_limit and 3/4 channels; the blue curve is raw bytes == processed bytes.",
    ),
    (
        "byte_ratio",
        "Processed / raw bytes",
        "log2 of FP32 patch bytes over raw uint8 bytes (RGB): blue is where shipping raw pixels is cheaper; black line = the gate's boundary.",
    ),
    ("tokens", "Token count", "Vision tokens per image size: flat where in_patch_limit binds."),
    (
        "flip_density",
        "Flip density",
        "Decision changes per one-pixel step by image area (left) and along aspect-ratio rays (right): more than one flip on a ray means the byte rule is not monotone in size.",
    ),
    (
        "aggregation",
        "Per-request vs per-image decision",
        "Where deciding once per request overrides the swept image's own decision, with the payload that costs.",
    ),
    (
        "sim_latency",
        "TTFT and throughput vs load (simulator)",
        "Eager (red) vs deferred (green) under SGLang 0.5.23's request path (sim/README.md), 12 offered loads per "
        "scenario from light load past saturation; dotted verticals: each path's capacity. The PR's A/B setting "
        "(pr-ab-*, on one 8-GPU host and on two 4-GPU trays) comes first. Cost model: sim/profiles.",
    ),
    (
        "sim_grid",
        "Does deferral help my topology? (simulator)",
        "Capacity gain of deferral and the P90 TTFT change at half the eager capacity, per TP size and image size "
        "(4 images per request), for each cost profile and for hosts of 8 and of 4 GPUs (TP 8 then spans two nodes "
        "and the features are pickled instead of shared).",
    ),
    (
        "sim_anchors",
        "Model vs the PR's reported numbers (simulator)",
        "Each anchor of PR #33921 next to the model on every cost profile and topology, nothing fitted; the "
        "microbenchmark also as timed from impl's real producers on this machine (deferlab calibrate).",
    ),
    (
        "sim_placement",
        "Owner load imbalance (simulator)",
        "max / mean owner cost over the vision ranks per placement strategy, per shipped scenario.",
    ),
    (
        "sim_payload",
        "Payload alternatives (simulator)",
        "Bytes per copy of the workload's images as FP32 patches, BF16 patches, raw uint8 and encoded files.",
    ),
)


def _plot_steps(
    opts: ReportOptions, runner: StepRunner, stage: Path, sweeps: list | None, sim: list | None
) -> list[dict[str, str]]:
    step = max(1, sweep_report.PLOT_STEP[opts.profile] * opts.max_side // sweeps_mod.MAX_SIDE)
    cfg, lim, side = opts.config, opts.limits, opts.max_side
    makers = {
        "decision_maps": lambda p: plots.decision_maps(cfg, step, p, limits=lim, max_side=side),
        "byte_ratio": lambda p: plots.byte_ratio_maps(cfg, step, p, limits=lim, max_side=side),
        "tokens": lambda p: plots.token_maps(cfg, step, p, limits=lim, max_side=side),
        "flip_density": (lambda p: plots.flip_density(sweeps, p)) if sweeps else None,
        "aggregation": lambda p: plots.aggregation_maps(cfg, step, p, max_side=side),
        "sim_placement": (lambda p: plots_sim.placement_imbalance(sim, p)) if sim else None,
        "sim_latency": (lambda p: plots_sim.latency_vs_load(sim, p)) if sim else None,
        "sim_grid": (lambda p: plots_sim.tp_size_grid(sim, p)) if sim else None,
        "sim_anchors": (lambda p: plots_sim.anchors_chart(sim, p)) if sim else None,
        "sim_payload": (lambda p: plots_sim.payload_alternatives(sim, p)) if sim else None,
    }
    figures = []
    for name, title, caption in FIGURES:
        maker = makers[name]
        if maker is None:
            runner.skipped(f"plot:{name}", "no data: its step was skipped or failed")
            continue
        if runner.run(f"plot:{name}", maker, stage / f"{name}.png", group="plots") is not None:  # None: nothing to draw
            figures.append({"name": name, "file": f"{name}.png", "title": title, "caption": caption})
    return figures


def collect(opts: ReportOptions, runner: StepRunner, stage: Path) -> dict[str, Any]:
    """Run every step into ``stage`` and return the report dict (without regressions)."""
    log = runner.log
    statements = claims.load_claim_statements()
    if "properties" in opts.skip and opts.from_results is None:
        runner.skipped("properties", "--skip")
        runner.skipped("claims", "no results: property suite skipped")
        results = None
    else:
        results = runner.run("properties", _properties_step, opts, log)
        runner.run("claims", lambda: None)  # the table below never fails; recorded so regressions know it ran
    table = served_report.claim_table(results, statements, sglang=opts.sglang is not None, vllm=opts.vllm is not None)
    ipc = runner.run("ipc", simulation.ipc_verdicts, opts.profile)
    if ipc:
        table = claims.merge_rows(table, claims.ipc_claim_rows(ipc, statements.get("C9", {})))
    sweeps = (
        runner.run(
            "sweeps",
            sweep_report.collect_sweeps,
            opts.config,
            limits=opts.limits,
            max_side=opts.max_side,
            progress=runner.say,
        )
        or []
    )
    paths = opts.paths or RunPaths(sglang=opts.sglang, vllm=opts.vllm, media_proc_cfg=opts.media_proc_cfg)
    say = runner.say
    if not {"sweeps", "served"} <= opts.skip:  # load the engines once, timed apart from the steps that use them
        runner.run("paths", paths.get)
    sweeps += (
        runner.run(
            "sweeps:geometry", served_report.geometry_step, opts.config, paths, opts.max_side, say, group="sweeps"
        )
        or []
    )
    served, columns = runner.run("served", served_report.served_step, opts.config, paths, runner.say) or (None, [])
    sim = runner.run("sim", simulation.run_scenarios, runner.say) or []
    bench = runner.run("bench", _bench_step, stage, opts.bench_args, log) or []
    figures = _plot_steps(opts, runner, stage, sweeps, sim)
    if columns:
        figures += runner.run("plot:served", plots_served.served_figures, served, columns, stage, group="plots") or []
    else:
        runner.skipped("plot:served", "no data: the served step was skipped or failed")
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "profile": opts.profile,
        "claims_profile": (results or {}).get("profile"),  # the profile the claim searches ran under
        "impl": _impl_name(opts),
        "system": (results or {}).get("system"),
        "systems": _systems(results, paths, opts),
        "environment": environment.environment(),
        "config": {
            "name": opts.config.name,
            "source": opts.config_source,
            "media_proc_cfg": opts.config.to_media_proc_cfg(),
        },
        "decision_source": sweeps_mod.DECISION_SOURCE,
        "sweep_grid": {"max_side": opts.max_side, "limits": list(opts.limits)},
        "results_from": str(opts.from_results) if opts.from_results else None,
        "claims": table,
        "properties": list((results or {}).get("properties", [])),
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


def _systems(results: dict[str, Any] | None, paths: RunPaths, opts: ReportOptions) -> dict[str, Any] | None:
    """engine -> the system that ran: the claim run's, else what the served paths loaded (a report from results)."""
    found = dict(paths.systems())
    if opts.sglang and (results or {}).get("system") and not (results or {}).get("systems"):
        found["sglang"] = results["system"]
    found.update({k: v for k, v in ((results or {}).get("systems") or {}).items() if v})
    return found or None


def _impl_name(opts: ReportOptions) -> str:
    """``deferlab`` (or ``--impl``), ``sglang:SPEC``, ``vllm:SPEC``, or both engines joined by ``+``."""
    engines = [f"{e}:{s}" for e, s in (("sglang", opts.sglang), ("vllm", opts.vllm)) if s]
    return "+".join(engines) or opts.impl or "deferlab"


EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_STEP_FAILED = 0, 1, 2, 3


def exit_status(report: dict[str, Any]) -> int:
    """0: clean; 1: a regression against the baseline; 3: no regression, but a step failed.

    A failed step never passes for a clean report: its part of the report is
    missing or partial, so the run must not exit 0 (the report is still
    written, with the step and its error listed).
    """
    if report["regressions"]:
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
            regs, notes = compare(report, baseline)
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
    return exit_status(report)


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
    write_text_atomic(directory / "report.json", json.dumps(report, indent=1, default=str) + "\n")
    write_text_atomic(directory / "report.md", render_markdown(report))
