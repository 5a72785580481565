"""``deferlab versions [VERSION ...] [--vllm [VERSION ...]]``: run the claims on each engine release, write the matrix.

SGLang: the releases named, else every release from 0.5.17 to the newest on
the package index (one ``pip index`` call). ``--vllm`` adds vLLM's releases
(from 0.27.0, the first with a Kimi-K3 image path): those named, else every
one on the index; naming only vLLM releases runs only those. ``--newest``
takes only the newest release of each engine of the run (what CI runs). Each
release runs in its own process, with progress on stderr. A named release
before the first with a Kimi-K3 path, or neither cached nor on the index, is
refused before any release runs (exit 2, naming the nearest release and the
newest ones). Exit status: 0
clean; 1 a verdict changed against the versions baseline; 2 bad usage; 3 a
release could not be loaded or a claim test errored (the matrix is still
written, with the reason). ``--format md|json|junit`` prints versions.md,
versions.json or the JUnit XML (versions.xml) to stdout once written;
``--junit FILE`` writes the XML there too; under GitHub Actions the summary
and verdict table are appended to ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.validate import check_choice
from deferlab.reports.core.claims import PROFILES, default_out_dir, load_claim_statements
from deferlab.reports.versions import matrix as versions
from deferlab.reports.versions import render as versions_report


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("versions", help="claim verdicts of real engine releases side by side (versions.md/json/png)")
    p.add_argument(
        "versions", nargs="*", metavar="VERSION", help=f"SGLang releases (default: {versions.MINIMUM} .. newest)"
    )
    p.add_argument(
        "--vllm",
        nargs="*",
        default=None,
        metavar="VERSION",
        help=f"also vLLM releases (none named: {versions.VLLM_MINIMUM} .. newest on the index; named and no SGLang "
        "VERSION: only these)",
    )
    p.add_argument("--newest", action="store_true", help="only the newest release of each engine (CI's run)")
    p.add_argument("--out", type=Path, help="output directory (default reports/out/versions-<UTC timestamp>)")
    p.add_argument("--profile", default="ci", help=f"hypothesis profile of the claim searches: {', '.join(PROFILES)}")
    p.add_argument(
        "--baseline",
        default=None,
        help=f"versions baseline JSON, or 'none' (default {versions.BASELINE.name} when present)",
    )
    p.add_argument("--update-baseline", action="store_true", help="write this run's verdicts into the baseline")
    p.add_argument(
        "--format",
        default=None,
        help=f"also print one output to stdout: {', '.join(versions_report.FORMATS)} (versions.md, versions.json, "
        "the JUnit XML); default: nothing on stdout",
    )
    p.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also write the JUnit XML (one testcase per claim and release) to FILE",
    )
    return p


Wanted = dict[str, list[str] | None]  # engine -> the releases named (None: every one on the index)


def _check(args: argparse.Namespace) -> tuple[Wanted, Path | None, dict[str, dict[str, str]] | None]:
    """The releases asked for per engine, the baseline's path and, unless it is about to be rewritten
    (``--update-baseline``: it may not exist yet), its verdicts, read and checked here."""
    try:  # as `deferlab report` checks it (reports.cli imports this module, so not through it)
        check_choice("--profile", args.profile, PROFILES)
        if getattr(args, "format", None) is not None:
            check_choice("--format", args.format, versions_report.FORMATS)
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None
    junit_file = getattr(args, "junit", None)
    if junit_file is not None and Path(junit_file).is_dir():
        raise UsageError(f"--junit: {str(junit_file)!r} is a directory; accepted: a file path for the XML")
    vllm = getattr(args, "vllm", None)
    if args.newest and (args.versions or vllm):
        raise UsageError("--newest takes no VERSION arguments (it picks the newest release itself)")
    bad = [v for v in [*args.versions, *(vllm or [])] if versions.version_key(v) == (10**6,)]
    if bad:
        raise UsageError(f"VERSION must look like 0.5.23 (X.Y.Z or X.Y.Z.postN); got {', '.join(map(repr, bad))}")
    old = [v for v in vllm or [] if versions.version_key(v) < versions.version_key(versions.VLLM_MINIMUM)]
    if old:
        raise UsageError(
            f"--vllm: {', '.join(map(repr, old))} has no Kimi-K3 image path; accepted: {versions.VLLM_MINIMUM} and later"
        )
    minimum = [v for v in args.versions if versions.version_key(v) < versions.version_key(versions.MINIMUM)]
    if minimum:
        raise UsageError(
            f"{', '.join(map(repr, minimum))}: no Kimi-K3 multimodal processor before SGLang {versions.MINIMUM}; "
            f"accepted: {versions.MINIMUM} and later"
        )
    wanted: Wanted = {}
    if args.versions or not vllm:  # named SGLang releases, or SGLang's default unless only vLLM ones are named
        wanted["sglang"] = list(args.versions) or None
    if vllm is not None:
        wanted["vllm"] = list(vllm) or None
    verdicts = None
    if args.baseline is not None and args.baseline.lower() == "none":
        baseline = None
    else:
        baseline = (
            Path(args.baseline) if args.baseline else (versions.BASELINE if versions.BASELINE.is_file() else None)
        )
        if baseline is not None and not args.update_baseline:
            try:
                verdicts = versions.load_baseline(baseline)
            except ValueError as e:
                raise UsageError(f"--baseline: {e}") from None
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out: {str(args.out)!r} exists and is not a directory")
    return wanted, baseline, verdicts


def refuse_unlisted(wanted: Wanted, *, index: Any = versions.index_versions, cache: Path | None = None) -> None:
    """UsageError (one line) for a named release that is neither cached nor on the package index, naming the
    nearest release and the newest ones, before any release runs. Why here and not per release: a typo in the
    last of seven releases would otherwise cost the six runs before it and end in exit 3. An unreachable index
    refuses nothing (each release then says why it could not be fetched, as it would anyway)."""
    from deferlab.impl.loader.sources import known_releases
    from deferlab.impl.loader.wheels import cached_tree

    for engine, named in wanted.items():
        if not named:
            continue
        description = importlib.import_module(f"deferlab.impl.{engine}.sources").ENGINE
        missing = [v for v in named if cached_tree(description, v, cache) is None]
        if not missing:
            continue
        try:
            listed = index(minimum="0.0.0", engine=engine)
        except RuntimeError:
            continue  # this engine's index is unreachable: its releases say why themselves
        unknown = [v for v in missing if v not in listed]
        if unknown:
            flag = "--vllm " if engine == "vllm" else ""
            raise UsageError(
                f"{flag}{unknown[0]!r}: the package index has no {engine}=={unknown[0]} "
                f"({known_releases(unknown[0], listed)}); accepted: {engine} releases "
                f"{versions.ENGINE_MINIMUM[engine]} and later on the index"
            )


def run(args: argparse.Namespace, log: Any = None) -> int:
    """Run the matrix; returns the exit status (see the module docstring)."""
    log = log or sys.stderr
    wanted, baseline, verdicts = _check(args)
    refuse_unlisted(wanted)
    say = lambda msg: print(f"[deferlab] versions: {msg}", file=log, flush=True)  # noqa: E731
    todo: list[tuple[str, str]] = []
    for engine, named in wanted.items():
        if named is None:
            try:
                found = versions.index_versions(engine=engine)
            except RuntimeError as e:
                raise UsageError(str(e)) from None
            named = found[-1:] if args.newest else found
        todo += [(engine, v) for v in sorted(dict.fromkeys(named), key=versions.version_key)]
    labels = [versions.column(e, v) for e, v in todo]
    say(f"{len(todo)} release(s): {', '.join(labels)} (profile {args.profile})")
    out = args.out or default_out_dir(prefix="versions-")
    runs_dir = Path(tempfile.mkdtemp(prefix="deferlab-versions-"))
    runs = []
    try:
        for i, ((engine, version), label) in enumerate(zip(todo, labels, strict=True), 1):
            say(f"{label} ({i}/{len(todo)}): loading and running the claims")
            r = versions.run_version(version, args.profile, runs_dir, log, engine=engine)
            counts: dict[str, int] = {}
            for v in r["verdicts"].values():
                counts[v] = counts.get(v, 0) + 1
            summary = ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "no verdicts"
            say(f"{label}: {summary} in {r['seconds']} s" + (f"; {r['error']}" if r["error"] else ""))
            runs.append(r)
        doc = versions.matrix(runs, args.profile)
        if verdicts is None and baseline is not None and baseline.is_file():
            verdicts = versions.load_baseline(baseline)  # --update-baseline: not read up front
        regs = versions.compare(doc, verdicts) if verdicts is not None else []
        versions_report.write(
            out,
            doc,
            load_claim_statements(),
            regs,
            baseline=str(baseline) if verdicts is not None else None,
            junit_file=getattr(args, "junit", None),
            log=log,
        )
        if args.update_baseline:
            target = baseline or versions.BASELINE
            versions.write_baseline(target, doc, verdicts if target == baseline else None)
            say(f"baseline written to {target}")
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)
    say(f"matrix written to {out.resolve()} (versions.md, versions.json, versions.xml, versions.png)")
    for r in regs:
        say(f"REGRESSION {r['name']}: {r['baseline']} -> {r['current']}")
    if getattr(args, "format", None) is not None:
        print(versions_report.stdout_text(out, args.format), end="")
    if regs and not args.update_baseline:
        return 1
    return 3 if doc["errors"] else 0
