"""``deferlab versions [VERSION ...] [--vllm [VERSION ...]]``: run the claims on each engine release, write the matrix.

SGLang: the releases named, else every release from its first with a Kimi-K3 processor
(`EngineFacts.first_release`) to the newest on the package index (one ``pip index`` call). ``--vllm`` adds
vLLM's releases (from its first with a Kimi-K3 image path): those named, else every one on the index; naming
only vLLM releases runs only those. ``--newest`` takes only the newest release of each engine of the run
(what CI runs); ``--claims C1,C2`` only those claims; ``--model FAMILY`` (one, a comma-separated list, or ``all``;
default kimi-k3) the model families judged, every one in the release's one run (a column per family and served
path, `reports.versions.columns`; a family the release does not serve is ``n/a`` with its reason, and a release
serving none of them is not loaded). Each release is loaded (`reports.core.runner.check_loads`) and its claims
run (`reports.core.runner.run`, a child process each), with progress on stderr. A named
release before its engine's first, or neither cached nor on the index, is refused before any release runs
(exit 2, naming the nearest release and the newest ones). Exit status: 0 clean; 1 a verdict changed against
the versions baseline (`reports.versions.gate`); 2 bad usage; 3 a release could not be loaded or a claim
test errored (the matrix is still written, with the reason). ``--format md|json|junit|families`` prints
versions.md, versions.json, the JUnit XML (versions.xml) or families.md (families x engines on the newest
release of each, `reports.versions.families`) to stdout once written; ``--junit FILE`` writes the XML there
too; under GitHub Actions the summary and verdict table are appended to ``$GITHUB_STEP_SUMMARY``.
``--fail-on CLASSES`` (a comma list of semantics §21's classes: crash, sequence, tower-input, float32-only, cost)
adds one reason for exit 1: a failing cell of one of those classes (`reports.versions.gate.fail_on`), with or
without a baseline and under ``--update-baseline`` too; it wins over exit 3, as a regression does. An unknown
class is refused (exit 2) before any release runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from deferlab.impl.loader import patching
from deferlab.reference.system.claims import claim_ids
from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.families import family as family_facts
from deferlab.reference.system.impact import Severity, parse_fail_on
from deferlab.reference.system.systems import (
    DEFAULT_FAMILY,
    ENGINES,
    System,
    at_least,
    column,
    engine,
    is_release,
    sorted_releases,
)
from deferlab.reference.system.validate import check_choice
from deferlab.reports.core import process, videoopts
from deferlab.reports.core import runner as core_runner
from deferlab.reports.core.atomic import check_out_dir
from deferlab.reports.core.baseline import Baseline
from deferlab.reports.core.claims import PROFILES, add_run_options, default_out_dir, load_claim_statements
from deferlab.reports.core.executor import Outcome, Task, check_cluster, executor_for, on_gpu, run_all
from deferlab.reports.core.frontdoor import check_junit
from deferlab.reports.core.runner import LoadError, Request, RunRecord
from deferlab.reports.core.sides import (
    answered_by,
    family_option,
    require_extras,
    run_error,
    selected_claims,
    selected_families,
    strict_switch,
    verdict_counts,
)
from deferlab.reports.families.cli import add_model_option
from deferlab.reports.versions import gate, matrix
from deferlab.reports.versions import render as versions_report

Wanted = dict[str, list[str] | None]  # engine -> the releases named (None: every one on the index)


def _engines() -> tuple[Any, list[Any]]:
    """The engine whose releases are the positional VERSIONs (the registry's first), and the others: each takes its
    own option (``--vllm``, ``--lmdeploy``: its `EngineFacts.option`)."""
    first, *others = ENGINES.values()
    return first, others


def add_parser(sub: Any) -> argparse.ArgumentParser:
    first, others = _engines()
    p = sub.add_parser("versions", help="claim verdicts of real engine releases side by side (versions.md/json/png)")
    p.add_argument(
        "versions",
        nargs="*",
        metavar="VERSION",
        help=f"{first.display} releases (default: {first.first_release} .. newest)",
    )
    for facts in others:
        p.add_argument(
            facts.option,
            dest=facts.name,
            nargs="*",
            default=None,
            metavar="VERSION",
            help=f"also {facts.display} releases (none named: {facts.first_release} .. newest on the index; named "
            f"and no {first.display} VERSION: only these)",
        )
    p.add_argument("--newest", action="store_true", help="only the newest release of each engine (CI's run)")
    p.add_argument("--claims", metavar="IDS", help="only these claims, comma-separated (e.g. C1,C2; default all)")
    add_model_option(
        p,
        "the model families judged: one, a comma-separated list, or 'all' (default kimi-k3); one run of each "
        "release judges them all, a column per family and served path",
    )
    p.add_argument("--out", type=Path, help="output directory (default reports/out/versions-<UTC timestamp>)")
    add_run_options(
        p,
        "a unified diff applied to a copy of every release run of the engine whose package it names (never to "
        "the cache): verify a fix; columns stay the release's, each release's code is named +patch.<sha8>",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help=f"versions baseline JSON, or 'none' (default {gate.BASELINE.name} when present)",
    )
    p.add_argument("--update-baseline", action="store_true", help="write this run's verdicts into the baseline")
    p.add_argument(
        "--fail-on",
        metavar="CLASSES",
        default=None,
        help="exit 1 when a failing cell of these severity classes is present (comma list, semantics §21: "
        f"{', '.join(s.label for s in sorted(Severity, reverse=True))})",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a failing claim failing in a new way regresses too, under profile ci (also DEFERLAB_STRICT=1)",
    )
    p.add_argument(
        "--format",
        default=None,
        help=f"also print one output to stdout: {', '.join(versions_report.FORMATS)} (versions.md, versions.json, "
        "the JUnit XML, families.md); default: nothing on stdout",
    )
    p.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also write the JUnit XML (one testcase per claim and release) to FILE",
    )
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run each release on a Ray cluster: 'auto', 'ray://HOST:PORT' or 'local' (the cluster extra); "
        "default this machine, --jobs releases at a time",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="releases run at once on this machine, each its own child process on one core (default: 2, or 1 "
        "on a one-core machine); 1: one after the other",
    )
    return p


def _check(args: argparse.Namespace) -> tuple[Wanted, Path | None, Baseline | None]:
    """The releases asked for per engine, the baseline's path and, unless it is about to be rewritten
    (``--update-baseline``: it may not exist yet), the baseline, read and checked here."""
    try:
        check_choice("--profile", args.profile, PROFILES)
        if getattr(args, "format", None) is not None:
            check_choice("--format", args.format, versions_report.FORMATS)
        fail_on = getattr(args, "fail_on", None)
        args.fail_on_classes = parse_fail_on(fail_on) if fail_on is not None else frozenset()
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None
    if getattr(args, "jobs", 1) < 1:
        raise UsageError(f"--jobs {args.jobs}: not a number of releases to run at once; accepted: 1 or more")
    videoopts.env(args)  # a bad --video-fps / --video-frames: one line before any release runs
    check_junit(getattr(args, "junit", None))  # its folder too: the XML is written last, after every release has run
    first, others = _engines()
    given = {f.name: getattr(args, f.name, None) for f in others}
    named_others = [v for named in given.values() for v in named or []]
    if args.newest and (args.versions or named_others):
        raise UsageError("--newest takes no VERSION arguments (it picks the newest release itself)")
    bad = [v for v in [*args.versions, *named_others] if not is_release(v)]
    if bad:
        raise UsageError(f"VERSION must look like 0.5.23 (a PEP 440 release); got {', '.join(map(repr, bad))}")
    wanted: Wanted = {}
    if args.versions or not named_others:  # the first engine's named releases, or its default unless only others'
        wanted[first.name] = list(args.versions) or None
    for name, named in given.items():
        if named is not None:
            wanted[name] = list(named) or None
    for name, named in wanted.items():
        facts = engine(name)
        old = [v for v in named or [] if not at_least(v, facts.first_release)]
        if old:
            flag = "" if facts is first else f"{facts.option}: "
            raise UsageError(
                f"{flag}{', '.join(map(repr, old))}: {facts.floor} before {facts.display} {facts.first_release}; "
                f"accepted: {facts.first_release} and later"
            )
    asked, families = selected_claims(getattr(args, "claims", None)), selected_families(getattr(args, "model", None))
    require_extras(families)
    for name in wanted:
        if asked and not any(answered_by(name, families, c) for c in asked):
            known = [c for c in claim_ids() if answered_by(name, families, c)]
            model = f" (model {', '.join(families)})" if families != (DEFAULT_FAMILY,) else ""
            raise UsageError(f"--claims: {engine(name).display} has no verdict for {', '.join(asked)}{model}; "
                             f"accepted: {', '.join(known)}")  # fmt: skip
    args.out = check_out_dir(args.out or default_out_dir(prefix="versions-"), "--out")
    args.cluster = check_cluster(getattr(args, "cluster", None), "versions")
    found = wanted, *_baseline(args)
    if getattr(args, "patch", None) is not None:  # each release's load check applies it (--dry-run first): one line
        patched = patching.check_command(args.patch, list(wanted), getattr(args, "cluster", None))
        os.environ[patching.PATCH_ENV] = str(patched.path)  # every child of the run loads the patched copy
    process.lock_output(args.out)  # one run a folder, taken once every argument is checked
    return found


def _baseline(args: argparse.Namespace) -> tuple[Path | None, Baseline | None]:
    if args.baseline is not None and args.baseline.lower() == "none":
        return None, None
    path = Path(args.baseline) if args.baseline else (gate.BASELINE if gate.BASELINE.is_file() else None)
    if path is None or args.update_baseline:
        return path, None
    try:
        return path, gate.load(path)
    except ValueError as e:
        why = str(e).replace(repr(str(path)), "the file").replace("baseline the file", "the file")
        raise UsageError(
            f"--baseline: {str(path)!r} is not a versions baseline ({why}); accepted: a versions baseline JSON "
            "(schema 1 or 2), or 'none'"
        ) from None


def refuse_unlisted(wanted: Wanted, *, index: Any = matrix.index_versions, cache: Path | None = None) -> None:
    """UsageError (one line) for a named release that is neither cached nor on the package index, naming the
    nearest release and the newest ones, before any release runs. Why here and not per release: a typo in the
    last of seven releases would otherwise cost the six runs before it and end in exit 3. An unreachable index
    refuses nothing (each release then says why it could not be fetched, as it would anyway)."""
    from deferlab.impl.loader.sources import known_releases
    from deferlab.impl.loader.wheels import cached_tree

    for name, named in wanted.items():
        description = importlib.import_module(engine(name).sources).ENGINE
        missing = [v for v in named or [] if cached_tree(description, v, cache) is None]
        if not missing:
            continue
        try:
            listed = index(minimum="0.0.0", engine=name)
        except RuntimeError:
            continue  # this engine's index is unreachable: its releases say why themselves
        unknown = [v for v in missing if v not in listed]
        if unknown:
            facts = engine(name)
            flag = "" if facts is _engines()[0] else f"{facts.option} "
            raise UsageError(
                f"{flag}{unknown[0]!r}: the package index has no {facts.distribution}=={unknown[0]} "
                f"({known_releases(unknown[0], listed)}); accepted: {facts.name} releases "
                f"{facts.first_release} and later on the index"
            )


def releases(wanted: Wanted, newest: bool) -> list[tuple[str, str]]:
    """(engine, release) to run, engines in registry order, each in release order (the index for those unnamed)."""
    todo: list[tuple[str, str]] = []
    for name in (e for e in ENGINES if e in wanted):
        named = wanted[name]
        if named is None:
            try:
                found = matrix.index_versions(engine=name)
            except RuntimeError as e:
                raise UsageError(str(e)) from None
            named = found[-1:] if newest else found
        todo += [(name, v) for v in sorted_releases(named)]
    return todo


def run(
    args: argparse.Namespace,
    log: Any = None,
    *,
    runner: Any = None,
    loader: Any = None,
) -> int:
    """Run the matrix; returns the exit status (see the module docstring). ``runner`` / ``loader`` replace
    `reports.core.runner.run` / `check_loads` (tests)."""
    log = log or sys.stderr
    runner, loader = runner or core_runner.run, loader or core_runner.check_loads
    wanted, path, baseline = _check(args)
    refuse_unlisted(wanted)
    asked = selected_claims(getattr(args, "claims", None))
    strict = strict_switch(args)
    say = lambda msg: print(f"[deferlab] versions: {msg}", file=log, flush=True)  # noqa: E731
    todo = releases(wanted, args.newest)
    families = selected_families(getattr(args, "model", None))
    say(f"{len(todo)} release(s): {', '.join(column(e, v) for e, v in todo)} (profile {args.profile}"
        + (f"; model families {', '.join(families)})" if families != (DEFAULT_FAMILY,) else ")"))  # fmt: skip
    out = args.out
    records: dict[str, RunRecord] = {}
    tasks: list[Task] = []
    # releases side by side on this machine: each child's torch and BLAS on one core, as report and compare run
    # theirs, so that --jobs children do not each spin a pool over every core (None: the library's default)
    threads = 1 if getattr(args, "cluster", None) is None and getattr(args, "jobs", 1) > 1 else None
    for i, (name, version) in enumerate(todo, 1):
        label = column(name, version)
        served = [f for f in families if family_facts(f).not_served(name, version) is None]
        if not served:
            say(f"{label} ({i}/{len(todo)}): serves none of {', '.join(families)}; not loaded (n/a)")
            records[label] = RunRecord(System(name, version, family=family_option(families)), args.profile)
            continue
        system = System(name, version, family=family_option(served))
        claims = tuple(c for c in asked if answered_by(name, served, c))
        request = Request(system, args.profile, claims=claims, strict=strict, env=videoopts.env(args), threads=threads)
        tasks.append(Task(label, request, load=True))
    records.update(_run_tasks(tasks, args, say, runner, loader))
    # each record names every family asked (its run, only those served): the matrix lists the others as n/a
    asked_all = family_option(families)
    records_in_order = [_asking(records[column(e, v)], asked_all) for e, v in todo]
    doc = matrix.matrix(records_in_order, args.profile, asked)
    if baseline is None and path is not None and path.is_file() and args.update_baseline:
        baseline = gate.load(path)  # --update-baseline: not read up front
    regs = gate.compare(doc, baseline, strict=strict) if baseline is not None else []
    versions_report.write(out, doc, load_claim_statements(), regs, baseline=str(path) if baseline else None,
                          junit_file=getattr(args, "junit", None), log=log)  # fmt: skip
    if args.update_baseline:
        target = path or gate.BASELINE
        previous = baseline if target == path else (gate.load(target) if target.is_file() else None)
        gate.save(target, gate.updated(previous, doc))
        say(f"baseline written to {target}")
    say(f"matrix written to {out.resolve()} (versions.md, versions.json, versions.xml, versions.png, families.md)")
    for r in regs:
        say(f"REGRESSION {r['name']}: {r['baseline']} -> {r['current']}")
    if getattr(args, "format", None) is not None:
        print(versions_report.stdout_text(out, args.format), end="")
    hits = gate.fail_on(doc, args.fail_on_classes)
    for hit in hits:
        say(f"FAIL-ON {hit}")
    if (regs and not args.update_baseline) or hits:
        return 1
    return 3 if doc["errors"] else 0


def _asking(record: RunRecord, family: str) -> RunRecord:
    return dataclasses.replace(record, system=dataclasses.replace(record.system, family=family))


def _run_tasks(tasks: list[Task], args: argparse.Namespace, say: Any, runner: Any, loader: Any) -> dict[str, RunRecord]:
    """Every release's task through the executor: this machine ``--jobs`` at a time (``runner`` and ``loader``,
    as tests replace them; each a child process, so threads suffice), or the cluster ``--cluster`` names, all submitted at once; label -> its record."""
    number = {t.key: f"{t.key} ({i}/{len(tasks)})" for i, t in enumerate(tasks, 1)}

    def local(task: Task) -> RunRecord:
        say(f"{number[task.key]}: loading and running the claims")
        return _run_release(task.request, runner, loader)

    if args.cluster is None:
        executor = executor_for(None, getattr(args, "jobs", 1), call=local)
    else:
        executor = executor_for(args.cluster, say=say)
        tasks = on_gpu(executor, tasks, say)
        say(f"{len(tasks)} release(s) submitted to {args.cluster}, each loaded and run on a worker")

    def done(o: Outcome) -> None:
        record = o.record or RunRecord(o.task.request.system, o.task.request.profile, error=o.error)
        error = run_error(record.error, record.failed_tests(), record.mine(), record.test_claims)
        counts = verdict_counts({f"{r.policy}/{r.id}": r.verdict.value for r in record.mine()})
        where = f" on {o.node}{' (CUDA)' if o.cuda else ''}" if args.cluster else ""
        say(f"{o.task.key}: {counts} in {record.seconds:.1f} s{where}" + (f"; {error}" if error else ""))

    found = run_all(executor, tasks, done)
    return {
        k: o.record or RunRecord(o.task.request.system, o.task.request.profile, error=o.error) for k, o in found.items()
    }


def _run_release(request: Request, runner: Any, loader: Any) -> RunRecord:
    """Load the release, then run its claims: its record (a release that cannot be loaded: its loader's line)."""
    try:
        loader(request.system)
    except LoadError as e:
        return RunRecord(request.system, request.profile, error=str(e))
    return runner(request)
