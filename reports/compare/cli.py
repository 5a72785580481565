"""``deferlab compare BASE HEAD``: what a change does to the claims, as a verdict diff of two engine sources.

Both sides are one engine (``--engine``: SGLang by default, or vLLM, whose claims are the served-vs-trained
C13-C15). Each side is a SPEC as ``--sglang`` / ``--vllm`` takes it (a release, ``installed``, a checkout)
or ``PATH@REV``: the checkout PATH at git revision REV, extracted by deferlab (``git archive``) into
``<cache>/checkouts/<sha>`` without touching the user's working tree or repository
(`reports.core.sides`). A SPEC of none of these forms is refused at once, before anything loads; then
both sides are loaded at once (`reports.core.runner.check_loads`), so a side that cannot be loaded is
refused in one line before any claim runs; then the claims run on both at once, through the one runner
(`reports.compare.running`), with progress.

``--model FAMILY`` (one, a comma-separated list, or ``all``; default kimi-k3) names the model families both
sides judge, all in each side's one run; the diff is per (claim, verdict column) (`reports.compare.cells`:
Kimi-K3's default column is the bare claim, every other cell is ``C15 on qwen3-vl:VLLM``), and compare.md
shows each family's changes. Each cell's change, BASE -> HEAD, is the one comparison's (`reports.core.diff`): ``newly failing``,
``newly holding``, ``failing differently``, ``changed``, ``unchanged``. Exit status: 1 when a claim is
newly failing (or, under the strict switch, ``--strict`` or ``DEFERLAB_STRICT=1``, and the derandomized
``ci`` profile, fails differently); 0 otherwise; 2 bad usage; 3 a side could not run its claims, or a
claim test errored (the comparison is still written, with the reason). The output folder
(`reports.compare.render`, written whole or not at all): compare.md, compare.json, compare.png,
compare.xml (JUnit, HEAD's claims), logs/ and repro/ (a reproducer per failing claim, `reports.repro.cli`).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from pathlib import Path
from typing import Any, TextIO

from deferlab.impl.loader import patching
from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.systems import DEFAULT_FAMILY, ENGINES
from deferlab.reference.system.validate import check_choice
from deferlab.reports.compare import running
from deferlab.reports.core import process, videoopts
from deferlab.reports.core import runner as core_runner
from deferlab.reports.core.atomic import check_out_dir
from deferlab.reports.core.claims import PROFILES, add_run_options, default_out_dir, load_claim_statements
from deferlab.reports.core.executor import check_cluster
from deferlab.reports.core.frontdoor import check_junit, refuse_before_first, refuse_unserved
from deferlab.reports.core.runner import STRICT_ENV, Request
from deferlab.reports.core.sides import (
    Side,
    answered_by,
    distinct,
    family_option,
    require_extras,
    resolve_side,
    selected_claims,
    selected_families,
    strict_switch,
)
from deferlab.reports.families.cli import add_model_option

FORMATS = ("md", "json", "junit")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("compare", help="claim verdicts of two engine sources, diffed (compare.md/json/png)")
    p.add_argument(
        "base", metavar="BASE", help="SPEC as --sglang / --vllm takes it (release, checkout, installed) or PATH@REV"
    )
    p.add_argument("head", metavar="HEAD", help="the changed side, same forms as BASE")
    p.add_argument("--out", type=Path, help="output directory (default reports/out/compare-<UTC timestamp>)")
    p.add_argument(
        "--engine", default="sglang", help=f"the engine both sides are: {', '.join(ENGINES)} (default sglang)"
    )
    add_run_options(
        p,
        "a unified diff applied to a copy of HEAD's tree only (never BASE's, never the cache): verify a fix, "
        "e.g. compare 0.5.23 0.5.23 --patch FIX.diff; HEAD's code is named +patch.<sha8>",
    )
    p.add_argument(
        "--claims",
        metavar="IDS",
        help="only these claims, comma-separated (e.g. C4,C9; default every claim of the engine)",
    )
    add_model_option(p, "the model families both sides judge: one, a comma-separated list, or 'all' (default kimi-k3)")
    p.add_argument("--format", default="md", help=f"what goes to stdout: {', '.join(FORMATS)} (default md)")
    p.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML of HEAD's claims to FILE")
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run both sides on a Ray cluster: 'auto', 'ray://HOST:PORT' or 'local' (the cluster extra); a side that "
        "is a path on this machine needs 'local'",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"a claim failing differently (a new signature) fails too, under profile ci (also {STRICT_ENV}=1)",
    )
    return p


def check_args(args: argparse.Namespace, *, cache: Path | None = None) -> tuple[Side, Side]:
    """Every argument checked (UsageError, one line) and both sides resolved, before anything is loaded."""
    engine = getattr(args, "engine", "sglang")
    try:
        check_choice("--profile", args.profile, PROFILES)
        check_choice("--format", args.format, FORMATS)
        check_choice("--engine", engine, tuple(ENGINES))
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None
    videoopts.env(args)  # a bad --video-fps / --video-frames: one line before anything is loaded
    args.out = check_out_dir(args.out or default_out_dir(prefix="compare-"), "--out")
    check_junit(args.junit)
    selected_claims(getattr(args, "claims", None), engine)
    families = require_extras(selected_families(getattr(args, "model", None)))
    family = family_option(families)
    base = dataclasses.replace(resolve_side("BASE", args.base, cache=cache, engine=engine), family=family)
    head = dataclasses.replace(resolve_side("HEAD", args.head, cache=cache, engine=engine), family=family)
    for side in (base, head):  # a release before the engine's Kimi-K3 path: refused without asking the index
        refuse_before_first(side.role, engine, side.spec)
    if getattr(args, "patch", None) is not None:  # HEAD's spec carries it (its load check applies it: one line)
        diff = patching.check_command(args.patch, [engine], getattr(args, "cluster", None))
        head = dataclasses.replace(head, run_spec=f"{head.run_spec}{patching.MARK}{diff.path}",
                                   identity=(*head.identity, f"patch {diff.sha256}"))  # fmt: skip
    distinct(base, head)
    model = getattr(args, "model", None)  # every claim n/a on both sides: refused with versions' n/a line
    refuse_unserved(
        f"--model {model}" if model else f"--model ({family})", [(engine, base.spec), (engine, head.spec)], families
    )
    args.cluster = check_cluster(getattr(args, "cluster", None), "compare")
    for side in (base, head):
        if args.cluster not in (None, "local") and side.kind != "release":
            raise UsageError(
                f"--cluster {args.cluster}: {side.role} {side.spec!r} is a {side.kind} on this machine, which a worker "
                "does not have; accepted with a remote cluster: releases (or --cluster local)"
            )
    process.lock_output(args.out)  # one run a folder, taken once every argument is checked
    return base, head


def run(
    args: argparse.Namespace,
    log: TextIO | None = None,
    *,
    runner: running.Runner = core_runner.run,
    loader: running.Loader = core_runner.check_loads,
) -> int:
    """Compare the two sides; returns the exit status (see the module docstring). ``runner`` / ``loader``
    replace `reports.core.runner.run` / `check_loads` (tests)."""
    from deferlab.reports.compare import render as compare_render

    log = log or sys.stderr
    say = lambda msg: print(f"[deferlab] compare: {msg}", file=log, flush=True)  # noqa: E731
    base, head = check_args(args)
    engine = getattr(args, "engine", "sglang")
    only = selected_claims(getattr(args, "claims", None), engine)
    strict = strict_switch(args)
    names = running.load_both([base, head], say, loader=loader)
    out = args.out
    work = process.temp_dir("compare-")
    request = Request(base.system, args.profile, claims=only, threads=1, strict=strict, env=videoopts.env(args))
    try:
        if args.cluster is None:
            results = running.run_both([base, head], request, work, say, runner=runner)
        else:
            results = running.run_on_cluster([base, head], request, say, args.cluster)
        statements = load_claim_statements()
        families = selected_families(getattr(args, "model", None))
        asked = only or [c for c in statements if answered_by(engine, families, c)]  # the claims asked, not the rest
        statements = {c: statements[c] for c in asked if c in statements}
        doc = compare_render.document({"BASE": base, "HEAD": head}, names, results, args.profile, statements,
                                      strict=strict, fill=DEFAULT_FAMILY in families)  # fmt: skip
        made = compare_render.write(out, doc, results, junit_file=args.junit, log=log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        process.release_output(out)
    say(f"written to {out.resolve()} (compare.md, compare.json, compare.png, {len(made['written'])} reproducers)")
    for line in made["missing"]:
        say(f"no reproducer: {line}")
    for role in doc["sides_not_run"]:
        say(f"{role} could not run its claims: {doc['errors'][role]}")
    for c in doc["claims"]:
        if c["name"] in doc["regressions"]:
            what = "NEWLY FAILING" if c["change"] == "newly failing" else "FAILING DIFFERENTLY (strict)"
            say(f"{what} {c['name']}: {c['base']} -> {c['head']}")
    print(compare_render.stdout_text(out, args.format), end="")
    return int(doc["exit_status"])
