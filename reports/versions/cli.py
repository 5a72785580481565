"""``deferlab versions [VERSION ...]``: run the claims on each SGLang release and write the matrix.

Default: every release from 0.5.17 to the newest on the package index (one
``pip index`` call). ``--newest`` takes only the newest (what CI runs). Each
release runs in its own process, with progress on stderr. Exit status: 0
clean; 1 a verdict changed against the versions baseline; 2 bad usage; 3 a
release could not be loaded or a claim test errored (the matrix is still
written, with the reason).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.validate import check_choice
from deferlab.reports.claims import load_claim_statements
from deferlab.reports.runner import PROFILES, default_out_dir
from deferlab.reports.versions import matrix as versions
from deferlab.reports.versions import render as versions_report


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("versions", help="claim verdicts of real SGLang releases side by side (versions.md/json/png)")
    p.add_argument("versions", nargs="*", metavar="VERSION", help=f"releases (default: {versions.MINIMUM} .. newest)")
    p.add_argument("--newest", action="store_true", help="only the newest release on the index (CI's run)")
    p.add_argument("--out", type=Path, help="output directory (default reports/out/versions-<UTC timestamp>)")
    p.add_argument("--profile", default="ci", help=f"hypothesis profile of the claim searches: {', '.join(PROFILES)}")
    p.add_argument(
        "--baseline",
        default=None,
        help=f"versions baseline JSON, or 'none' (default {versions.BASELINE.name} when present)",
    )
    p.add_argument("--update-baseline", action="store_true", help="write this run's verdicts into the baseline")
    return p


def _check(args: argparse.Namespace) -> tuple[list[str] | None, Path | None, dict[str, dict[str, str]] | None]:
    """The releases asked for (None: every one on the index), the baseline's path and, unless it is about to be
    rewritten (``--update-baseline``: it may not exist yet), its verdicts, read and checked here."""
    try:  # as `deferlab report` checks it (reports.cli imports this module, so not through it)
        check_choice("--profile", args.profile, PROFILES)
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None
    if args.newest and args.versions:
        raise UsageError("--newest takes no VERSION arguments (it picks the newest release itself)")
    bad = [v for v in args.versions if versions.version_key(v) == (10**6,)]
    if bad:
        raise UsageError(f"VERSION must look like 0.5.23 (X.Y.Z or X.Y.Z.postN); got {', '.join(map(repr, bad))}")
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
    return (list(args.versions) or None), baseline, verdicts


def run(args: argparse.Namespace, log: Any = None) -> int:
    """Run the matrix; returns the exit status (see the module docstring)."""
    log = log or sys.stderr
    wanted, baseline, verdicts = _check(args)
    say = lambda msg: print(f"[deferlab] versions: {msg}", file=log, flush=True)  # noqa: E731
    if wanted is None:
        try:
            found = versions.index_versions()
        except RuntimeError as e:
            raise UsageError(str(e)) from None
        wanted = found[-1:] if args.newest else found
    wanted = sorted(dict.fromkeys(wanted), key=versions.version_key)
    say(f"{len(wanted)} release(s): {', '.join(wanted)} (profile {args.profile})")
    out = args.out or default_out_dir(prefix="versions-")
    runs_dir = Path(tempfile.mkdtemp(prefix="deferlab-versions-"))
    runs = []
    try:
        for i, version in enumerate(wanted, 1):
            say(f"{version} ({i}/{len(wanted)}): loading and running the claims")
            r = versions.run_version(version, args.profile, runs_dir, log)
            counts: dict[str, int] = {}
            for v in r["verdicts"].values():
                counts[v] = counts.get(v, 0) + 1
            summary = ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "no verdicts"
            say(f"{version}: {summary} in {r['seconds']} s" + (f"; {r['error']}" if r["error"] else ""))
            runs.append(r)
        doc = versions.matrix(runs, args.profile)
        if verdicts is None and baseline is not None and baseline.is_file():
            verdicts = versions.load_baseline(baseline)  # --update-baseline: not read up front
        regs = versions.compare(doc, verdicts) if verdicts is not None else []
        versions_report.write(out, doc, load_claim_statements(), regs)
        if args.update_baseline:
            target = baseline or versions.BASELINE
            versions.write_baseline(target, doc, verdicts if target == baseline else None)
            say(f"baseline written to {target}")
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)
    say(f"matrix written to {out.resolve()} (versions.md, versions.json, versions.png)")
    for r in regs:
        say(f"REGRESSION {r['name']}: {r['baseline']} -> {r['current']}")
    if regs and not args.update_baseline:
        return 1
    return 3 if doc["errors"] else 0
