"""``deferlab report`` and its companions: ``sweep``, ``sim``, ``bench``, ``test``, ``calibrate``, ``claims``,
``baseline`` (their parsers and what each runs; `reports.cli` is the one entry point).

Exit codes: 0 success / no regression, 1 a regression (or a part that failed when run alone), 2 bad usage, 3 a
report was written but one of its steps failed (``reports.report.run.exit_status``). Every argument is checked
before any work starts, and a bad one gets a message naming the option, the value and what is accepted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from deferlab.impl.compiled import numba_missing
from deferlab.impl.loader.patching import PATCH_ENV
from deferlab.impl.loader.patching import check_command as check_patch
from deferlab.reference.system import claims as registry
from deferlab.reference.system.config import PreprocessConfig
from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.impact import parse_fail_on
from deferlab.reference.system.profiles import profile as load_profile
from deferlab.reference.system.profiles import profile_names
from deferlab.reference.system.served import CHECKPOINT_ENV
from deferlab.reference.system.systems import DEFAULT_FAMILY, System
from deferlab.reference.system.validate import check_positive_int
from deferlab.reports.core import process, runner
from deferlab.reports.core.atomic import check_out_dir, write_text_atomic
from deferlab.reports.core.baseline import save as save_baseline
from deferlab.reports.core.claims import PROFILES, default_out_dir, load_claim_statements
from deferlab.reports.core.frontdoor import check_junit, check_out_file
from deferlab.reports.core.sides import family_option, require_extras, selected_families
from deferlab.reports.families.cli import add_model_option
from deferlab.reports.report import benchmarks, claims, render
from deferlab.reports.report.engine_options import ENGINES, add_engine_options, engine_specs, engines_or, with_spec
from deferlab.reports.report.front import check_calibrate, check_impl, refuse_all_na
from deferlab.reports.report.front import check_max_side as _check_max_side
from deferlab.reports.report.front import check_profile as _check_profile
from deferlab.reports.report.front import checkpoint_family_of as _checkpoint_family
from deferlab.reports.report.front import load_or_refuse as _load_or_refuse
from deferlab.reports.report.front import load_vllm_or_refuse as _load_vllm_or_refuse
from deferlab.reports.report.front import read_checkpoint as _checkpoint
from deferlab.reports.report.front import results as _results
from deferlab.reports.report.front import usage as _usage
from deferlab.reports.report.regressions import DEFAULT_BASELINE, load_baseline, make_baseline
from deferlab.reports.report.run import STEPS, ReportOptions, run_report
from deferlab.reports.report.served.paths import KIMI_PATHS
from deferlab.reports.report.sweeps import collect as sweep_report
from deferlab.reports.report.sweeps.compute import SWEEP_LIMITS
from deferlab.sim.calibrate import run as calibrate_cmd


def _add_config_args(p: argparse.ArgumentParser) -> Any:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--config", metavar="FILE", help="preprocessor_config.json (flat or under media_proc_cfg)")
    g.add_argument("--preset", metavar="NAME", help=f"named profile: {', '.join(profile_names())} (default kimi-k3)")
    return g


def add_parsers(sub: Any) -> None:
    """The report's subcommands: report, sweep, sim, bench, test, claims, calibrate, baseline."""
    rep = sub.add_parser(
        "report",
        help="run everything and write report.md / report.json / PNGs",
        description="The claims of the system under test, the sweeps, the skew table, the simulator and the "
        "figures, gated on the baseline (exit 1 on a changed verdict or sweep counter). Benchmarks are opt-in "
        "(--bench: minutes) and never gate.",
    )
    rep.add_argument(
        "--profile",
        default="ci",
        help=f"hypothesis profile and sweep resolution: {', '.join(PROFILES)} (default ci: derandomized, the same "
        "verdicts on every run; dev: fewer, random examples, for exploring)",
    )
    rep.add_argument(
        "--strict",
        action="store_true",
        help="the strict switch (also DEFERLAB_STRICT=1): a failure claims.toml does not document fails its claim "
        "test, and a new failure signature against the baseline regresses (under the ci profile)",
    )
    _add_config_args(rep).add_argument(
        "--checkpoint",
        metavar="DIR",
        help="a downloaded model snapshot folder: its preprocessor_config.json (fill stage included) is the config "
        "of the sweeps and the skew table, and vLLM's processor is built from its media_proc_cfg as read",
    )
    impl_group = rep.add_mutually_exclusive_group()
    impl_group.add_argument("--impl", help="implementation under test, passed to pytest as --impl")
    add_engine_options(rep, impl_group)
    rep.add_argument(
        "--patch",
        metavar="FILE",
        help=f"a unified diff applied to a copy of the engine's tree whose package it names ({engines_or()}; "
        "never to the cache) before its claims run: verify a fix; the code is named +patch.<sha8>",
    )
    add_model_option(
        rep,
        "the model families the claims judge on the engines named: one, a comma-separated list, or 'all' "
        "(default kimi-k3; `deferlab families` lists them); with an engine, the skew table and figures per family",
    )
    rep.add_argument("--out", type=Path, help="report directory (default reports/out/<UTC timestamp>)")
    rep.add_argument("--baseline", help=f"baseline JSON, or 'none' (default {DEFAULT_BASELINE.name} when present)")
    rep.add_argument(
        "--from-results", type=Path, metavar="DIR", help="read DIR/verdicts.json instead of running pytest"
    )
    rep.add_argument("--skip", nargs="+", default=[], metavar="STEP", help=f"steps to skip: {', '.join(STEPS)}")
    rep.add_argument(
        "--bench",
        action="store_true",
        help="also run the benchmarks (minutes; their ratios are shown against the baseline, never gated)",
    )
    rep.add_argument("--bench-arg", action="append", default=[], help="extra pytest argument for the bench step")
    rep.add_argument("--sweep-max-side", type=int, default=4096, help="sweep sizes 1..N per side (default 4096)")
    rep.add_argument("--sweep-limits", type=int, nargs="+", metavar="L", help="in_patch_limit values to sweep")
    rep.add_argument(
        "--junit", type=Path, metavar="FILE", help="also write a JUnit XML, one testcase per (claim, column), to FILE"
    )
    rep.add_argument("--fail-on", metavar="CLASSES", default=None,
                     help="exit 1 when a failing claim is of one of these severity classes (semantics §21: crash, "
                          "sequence, tower-input, float32-only, cost), comma-separated")  # fmt: skip

    sw = sub.add_parser("sweep", help="boundary sweeps alone: counters on stdout, PNGs with --out")
    _add_config_args(sw)
    sw.add_argument("--profile", default="dev", help=f"plot resolution: {', '.join(PROFILES)}")
    sw.add_argument("--out", type=Path, help="directory for sweeps.json and the PNGs")
    sw.add_argument("--max-side", type=int, default=4096, help="largest side swept (default 4096)")

    sm = sub.add_parser("sim", help="the simulator's CLI (sim.cli.main)", add_help=False)
    sm.add_argument("sim_args", nargs=argparse.REMAINDER)

    be = sub.add_parser("bench", help="run the pytest-benchmark suites and print their ratios")
    be.add_argument("--json", type=Path, default=Path(".benchmarks/deferlab-bench.json"), help="benchmark JSON path")
    be.add_argument("bench_args", nargs=argparse.REMAINDER, help="extra pytest arguments")

    ts = sub.add_parser("test", help="run the property suite (installed or checkout) with pytest", add_help=False)
    ts.add_argument("pytest_args", nargs=argparse.REMAINDER)

    cl = sub.add_parser("claims", help="print the claim verdict table from a results directory")
    cl.add_argument("--from-results", type=Path, default=registry.RESULTS_DIR, metavar="DIR")

    calibrate_cmd.add_parser(sub)

    bl = sub.add_parser("baseline", help="write a baseline from a report.json")
    bl.add_argument("--from", dest="source", type=Path, required=True, metavar="REPORT_JSON")
    bl.add_argument("--out", type=Path, default=DEFAULT_BASELINE, help=f"default {DEFAULT_BASELINE}")


def resolve_config(args: argparse.Namespace) -> tuple[PreprocessConfig, str]:
    """--config FILE, --checkpoint DIR or --preset NAME (default kimi-k3), as a validated config and where it came
    from."""
    if getattr(args, "checkpoint", None):
        return _checkpoint(args.checkpoint)[0], f"checkpoint {args.checkpoint}"
    try:
        if getattr(args, "config", None):
            return PreprocessConfig.from_json(args.config), f"file {args.config}"
        name = getattr(args, "preset", None) or "kimi-k3"
        return load_profile(name), f"preset {name}"
    except DeferlabInputError as e:
        flag = "--config" if getattr(args, "config", None) else "--preset"
        raise UsageError(f"{flag}: {e}") from None


def _report(args: argparse.Namespace) -> int:
    profile = _check_profile(args.profile)
    unknown = [s for s in args.skip if s not in STEPS]
    if unknown:
        raise UsageError(f"--skip: unknown step(s) {', '.join(unknown)}; accepted: {', '.join(STEPS)}")
    specs = engine_specs(args)
    named = _checkpoint_family(args) if args.checkpoint else None
    kimi = named in (None, DEFAULT_FAMILY)
    config, source = resolve_config(args) if kimi else (load_profile(DEFAULT_FAMILY), f"preset {DEFAULT_FAMILY}")
    raw_cfg = _checkpoint(args.checkpoint)[1] if args.checkpoint and kimi else None
    if args.checkpoint and kimi:  # the claim runs are child processes: the served claims read the snapshot from here
        os.environ[CHECKPOINT_ENV] = str(Path(args.checkpoint).resolve())
    if args.from_results is not None:
        _results(args.from_results)
    if args.baseline is None:
        # The committed baseline pins deferlab's model; real SGLang is gated by `deferlab versions` instead.
        real = bool(specs)
        baseline = DEFAULT_BASELINE if DEFAULT_BASELINE.is_file() and not real else None
    elif args.baseline.lower() == "none":
        baseline = None
    else:
        baseline = Path(args.baseline)
    if baseline is not None:
        try:
            load_baseline(baseline)
        except ValueError as e:
            raise UsageError(f"--baseline: {e}") from None
    family = family_option(require_extras(selected_families(getattr(args, "model", None) or named)))
    if family != DEFAULT_FAMILY and not specs and args.from_results is None:
        what = f"--model {args.model}" if args.model else f"--checkpoint {args.checkpoint} ({family})"
        raise UsageError(f"{what}: deferlab's model serves Kimi-K3 only; accepted with {with_spec()}")
    if args.from_results is None:  # every claim n/a: refused with versions' n/a line, before the report runs
        refuse_all_na(args, named)
    out = check_out_dir(args.out if args.out is not None else default_out_dir())
    check_junit(args.junit)
    try:  # --fail-on: the classes known before any step runs (one line otherwise)
        fail_on = parse_fail_on(args.fail_on) if args.fail_on is not None else frozenset()
    except ValueError as e:
        raise UsageError(str(e)) from None
    max_side = _check_max_side(args.sweep_max_side, "--sweep-max-side")
    limits = tuple(_usage(check_positive_int, "--sweep-limits", v) for v in (args.sweep_limits or SWEEP_LIMITS))
    if getattr(args, "patch", None) is not None:  # applied (--dry-run first) by the load check below: one line
        if not specs or args.from_results is not None:
            raise UsageError("--patch: no engine's tree is loaded to patch (deferlab's model, or --from-results); "
                             f"accepted with {with_spec()}, without --from-results")  # fmt: skip
        os.environ[PATCH_ENV] = str(check_patch(args.patch, list(specs)).path)  # the claims' children load the copy
    process.lock_output(out)  # one run a folder: a second report into it is refused here, before any work
    if args.impl is not None and args.from_results is None:  # resolved once, not failed in every claim test
        check_impl(args.impl)
    for name, spec in specs.items():
        if name in KIMI_PATHS and not ENGINES[name].seam:  # its Kimi-K3 path runs here, even from results
            _load_vllm_or_refuse(spec)  # in a short child: this process loads no engine (report.served.kimi)
        elif args.from_results is None:  # a report from results runs no claims of it
            _load_or_refuse(System(name, spec))
    opts = ReportOptions(
        profile=profile,
        config=config,
        config_source=source,
        out=out,
        baseline=baseline,
        from_results=args.from_results,
        impl=args.impl,
        skip=set(args.skip),
        bench=args.bench,
        bench_args=list(args.bench_arg),
        max_side=max_side,
        limits=limits,
        strict=args.strict or os.environ.get(runner.STRICT_ENV) == "1",
        engines=specs,
        family=family,
        checked=True,  # every engine named was loaded once above
        media_proc_cfg=raw_cfg,
        junit=args.junit,
        fail_on=fail_on,
    )
    return run_report(opts)


def _sweep(args: argparse.Namespace) -> int:
    from deferlab.reports.report.plots import figures as plots

    profile = _check_profile(args.profile)
    _check_max_side(args.max_side, "--max-side")
    config, _ = resolve_config(args)
    if args.out is not None:  # before the sweeps run (minutes), not after
        check_out_dir(args.out)
    records = sweep_report.collect_sweeps(config, max_side=args.max_side, progress=lambda m: print(m, file=sys.stderr))
    for r in records:
        print(f"{r['name']:<48} " + " ".join(f"{k}={v}" for k, v in r["key_counters"].items()))
    if args.out is not None:
        step = sweep_report.PLOT_STEP[profile]
        write_text_atomic(args.out / "sweeps.json", json.dumps(records, indent=1) + "\n")
        step = max(1, step * args.max_side // 4096)
        kw = {"max_side": args.max_side}
        plots.decision_maps(config, step, args.out / "decision_maps.png", **kw)
        plots.byte_ratio_maps(config, step, args.out / "byte_ratio.png", **kw)
        plots.token_maps(config, step, args.out / "tokens.png", **kw)
        plots.flip_density(records, args.out / "flip_density.png")
        plots.aggregation_maps(config, step, args.out / "aggregation.png", **kw)
        print(f"sweeps written to {args.out}", file=sys.stderr)
    return 0


def _sim(args: argparse.Namespace) -> int:
    try:
        from deferlab.sim.cli import main as sim_main
    except ImportError as e:
        print(f"deferlab sim: the simulator CLI is not available ({e})", file=sys.stderr)
        return 1
    return int(sim_main(list(args.sim_args)) or 0)


def attached(cmd: list[str], env: dict[str, str] | None = None) -> int:
    """``cmd`` with this terminal as its output (`reports.core.process`: its own group, ended with the command)."""
    proc = process.spawn(cmd, env=env)
    try:
        return proc.wait()
    finally:
        process.reap(proc)


def _bench(args: argparse.Namespace) -> int:
    """``deferlab bench``: every benchmark, its ratios printed (the checkpoint-vs-vLLM one left out, with one
    line, when its extra is missing)."""
    check_out_file(args.json, "--json", ".json")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    if (why := numba_missing()) is not None:
        print(f"deferlab bench: the checkpoint-vs-vLLM benchmark is skipped: it {why}", file=sys.stderr)
    cmd = benchmarks.bench_command(args.json, args.bench_args, without_vllm=why is not None)
    rc = attached(cmd, benchmarks.bench_env())
    for b in benchmarks.load_benchmarks(args.json) if args.json.is_file() else []:
        ratios = " ".join(f"{k}={v:.3g}" for k, v in b["ratios"].items())
        print(f"{b['name']}: median {b['median_s']:.4g} s {ratios}")
    return 0 if rc == 0 else 1


def _test(args: argparse.Namespace) -> int:
    """``deferlab test [pytest args]``: the shipped checks wherever the package is installed, from any directory."""
    return attached(
        [sys.executable, "-m", "pytest", str(runner.suite_path()), "-p", "no:cacheprovider", *args.pytest_args]
    )


def _claims(args: argparse.Namespace) -> int:
    table = claims.claim_table(_results(args.from_results), load_claim_statements())
    print("\n".join(render.verdict_table(table)))
    return 0


def _baseline(args: argparse.Namespace) -> int:
    """``deferlab baseline --from REPORT_JSON``: the baseline it implies, written in schema 2 (benchmark ratios
    kept from the baseline it replaces when the report has none)."""
    try:
        report = json.loads(args.source.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"--from: cannot read report {str(args.source)!r}: {e}") from None
    if not isinstance(report, dict) or "claims" not in report or "sweeps" not in report:
        raise UsageError(f"--from: {str(args.source)!r} is not a deferlab report.json (no claims/sweeps)")
    check_out_file(args.out, "--out", ".json")
    try:
        previous = load_baseline(args.out) if args.out.is_file() else None
    except ValueError:
        previous = None
    save_baseline(args.out, make_baseline(report, previous))
    print(f"baseline written to {args.out}", file=sys.stderr)
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    """``deferlab calibrate``: `sim.calibrate.run` measures and builds the profile; it is written here, atomically.
    Its arguments are checked first (`reports.report.front.check_calibrate`), before any measurement."""
    check_calibrate(args)
    return calibrate_cmd.run(args, write_text_atomic)


def pass_through(command: str, args: list[str]) -> int:
    """``deferlab sim ...`` / ``deferlab test ...``: every argument after the command is the simulator's or
    pytest's (their own ``--help`` included)."""
    if command == "sim":
        return _sim(argparse.Namespace(sim_args=args))
    return _test(argparse.Namespace(pytest_args=args))


COMMANDS = {
    "report": _report,
    "sweep": _sweep,
    "sim": _sim,
    "bench": _bench,
    "test": _test,
    "calibrate": _calibrate,
    "claims": _claims,
    "baseline": _baseline,
}
