"""``deferlab compare BASE HEAD``: what a change does to the claims, as a verdict diff of two engine sources.

Both sides are one engine (``--engine``: SGLang by default, or vLLM, whose
claims are the served-vs-trained C13-C15). Each side is a SPEC as ``--sglang``
/ ``--vllm`` takes it (a release, ``installed``, a checkout) or ``PATH@REV``: the checkout PATH at git revision REV, extracted
by deferlab (``git archive``) into ``<cache>/checkouts/<sha>`` without
touching the user's working tree or repository. Both sides are loaded first
(`matrix.preflight`, at once), so a side that cannot be resolved or loaded is
refused in one line before any claim runs; then the claim tests run on both,
one subprocess each, both at once where two cores are there, with progress.

Each claim's change, BASE -> HEAD: ``newly failing`` (HEAD fails, BASE held,
held with a caveat or had no such feature: a feature that arrives broken is
a regression too), ``newly holding``, ``failing differently`` (both fail, with
different `grouping.failure_signature`), ``changed`` (any other verdict
change, e.g. to ``n/a`` or ``not-run``), ``unchanged``. Exit status: 1 when a
claim is newly failing; 0 otherwise, including a claim failing differently
(it was broken before; the new signature is shown, not gated, as a searched
counterexample's wording is not a contract); 2 bad usage; 3 a side could not
run its claims, or a claim test errored (the comparison is still written,
with the reason). The output folder (`compare_render`, written whole or not at
all): compare.md, compare.json, compare.png, compare.xml (JUnit, HEAD's
claims), logs/ and repro/ (a reproducer per failing claim, `reports.repro.cli`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.validate import check_choice
from deferlab.reports.core.claims import PROFILES, default_out_dir, load_claim_statements
from deferlab.reports.versions import matrix

FORMATS = ("md", "json", "junit")
ENGINES = ("sglang", "vllm")
_EXAMPLE = {"sglang": ("0.5.23", "an SGLang"), "vllm": ("0.33.0", "a vLLM")}


def accepted(engine: str = "sglang") -> str:
    """What a SPEC of ``engine`` may be, for the one-line refusals."""
    release, which = _EXAMPLE.get(engine, _EXAMPLE["sglang"])
    return (
        f"accepted: a release such as {release}, 'installed', {which} checkout path, "
        "or PATH@REV (that git checkout at a commit, branch or tag)"
    )


RUN_SIDE = (
    "import json, sys\n"
    "from pathlib import Path\n"
    "from deferlab.reports.versions.matrix import run_version\n"
    "with open(sys.argv[3], 'a') as log:\n"
    "    ids = [c for c in sys.argv[5].split(',') if c]\n"
    "    out = run_version(sys.argv[1], sys.argv[2], Path('runs'), log, engine=sys.argv[4], claim_ids=ids or None,\n"
    "                      preflighted=True)  # compare loaded both sides before any claim ran\n"
    "print('RESULT:' + json.dumps(out))\n"
)


# Each side's torch runs one thread: the two sides already fill two cores, and torch's default of a thread per
# core in each would oversubscribe them (the claim tests' tensors are small, so a side loses nothing by it).
SIDE_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the SPEC as given, what ``--sglang`` gets, and what makes it that code."""

    role: str  # "BASE" | "HEAD"
    spec: str
    kind: str  # "release" | "installed" | "checkout" | "revision"
    run_spec: str
    identity: tuple[str, ...]
    revision: str | None = None  # PATH@REV: the commit REV names
    repo: str | None = None  # PATH@REV: the checkout's top level
    engine: str = "sglang"


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
    p.add_argument("--profile", default="ci", help=f"hypothesis profile of the claim searches: {', '.join(PROFILES)}")
    p.add_argument(
        "--claims",
        metavar="IDS",
        help="only these claims, comma-separated (e.g. C4,C9; default every claim of the engine)",
    )
    p.add_argument("--format", default="md", help=f"what goes to stdout: {', '.join(FORMATS)} (default md)")
    p.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML of HEAD's claims to FILE")
    return p


# --- the sides ------------------------------------------------------------------------------------------------------
def checkouts_root() -> Path:
    """Where ``PATH@REV`` trees go: ``checkouts/`` beside the wheel cache (``DEFERLAB_CACHE`` moves both)."""
    from deferlab.impl.loader.wheels import deferlab_cache

    return deferlab_cache() / "checkouts"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(args, 1, "", f"git could not run: {e}")


def resolve_side(role: str, spec: str, *, cache: Path | None = None, engine: str = "sglang") -> Side:
    """The `Side` ``spec`` names, read without importing anything (loading is `matrix.preflight`'s job);
    ``PATH@REV`` is extracted here. UsageError (one line) for a revision that cannot be had."""
    spec = str(spec).strip()
    if not spec:
        raise UsageError(f"{role}: an empty SPEC; {accepted(engine)}")
    if spec == "installed":
        return Side(role, spec, "installed", spec, ("installed",), engine=engine)
    path = Path(spec).expanduser()
    if path.exists():
        return Side(role, spec, "checkout", str(path.resolve()), ("tree", _tree_key(path, engine)), engine=engine)
    if "@" in spec:
        left, rev = spec.rsplit("@", 1)
        where = Path(left).expanduser()
        if where.exists() or "/" in left or left.startswith((".", "~")):
            return _revision_side(role, spec, where, rev, cache, engine)
    return Side(role, spec, "release", spec, ("release", spec), engine=engine)


def _engine(engine: str) -> Any:
    """The loader's `Engine` description of ``engine`` (its package, where it sits in a checkout)."""
    import importlib

    return importlib.import_module(f"deferlab.impl.{engine}.sources").ENGINE


def _tree_key(path: Path, engine: str = "sglang") -> str:
    """The folder holding the package (``sglang/``, ``vllm/``) for a checkout (so PATH and PATH/python are one
    tree); else PATH itself."""
    from deferlab.impl.loader.sources import checkout_root

    try:
        return str(checkout_root(_engine(engine), str(path), path))
    except DeferlabInputError:
        return str(path.resolve())  # not a checkout: preflight refuses it in the driver's words


def _revision_side(role: str, spec: str, where: Path, rev: str, cache: Path | None, engine: str = "sglang") -> Side:
    ok = accepted(engine)
    if not where.exists():
        raise UsageError(f"{role}: {spec!r}: no such path {str(where)!r}; {ok}")
    if not rev.strip():
        raise UsageError(f"{role}: {spec!r}: no revision after '@'; {ok}")
    top = _git(["rev-parse", "--show-toplevel"], where if where.is_dir() else where.parent)
    if top.returncode != 0:
        why = matrix.last_line(top.stderr) or f"git exited {top.returncode}"
        raise UsageError(f"{role}: {spec!r}: {str(where)!r} is not a git checkout ({why}); {ok}")
    repo = Path(top.stdout.strip()).resolve()
    found = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], repo)
    sha = found.stdout.strip()
    if found.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise UsageError(
            f"{role}: {spec!r}: unknown revision {rev!r} in the git checkout {str(repo)!r} "
            f"(git rev-parse --verify found no commit); accepted: a commit, branch or tag of that checkout"
        )
    rel = where.resolve().relative_to(repo).as_posix()
    subdir = _engine(engine).checkout_subdir or ""
    tree = extract_revision(repo, sha, rel, cache or checkouts_root(), subdir=subdir)
    return Side(role, spec, "revision", str(tree), ("revision", sha, rel), sha, str(repo), engine)


def extract_revision(repo: Path, sha: str, rel: str, cache: Path, *, subdir: str = "python") -> Path:
    """``<cache>/<sha>/<sub>``: the tree of ``sub`` at ``sha`` (``rel/<subdir>`` where the commit has it: SGLang's
    ``python`` package folder; else ``rel``), from ``git archive``; extracted aside and renamed in, so it is
    whole or absent."""
    sub = rel if rel not in ("", ".") else ""
    python = (f"{sub}/{subdir}" if sub else subdir) if subdir else ""
    if python and _git(["cat-file", "-t", f"{sha}:{python}"], repo).stdout.strip() == "tree":
        sub = python
    final = cache / sha / sub if sub else cache / sha / "tree"
    if final.is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}.partial-", dir=cache))
    try:
        archive = subprocess.Popen(
            ["git", "-C", str(repo), "archive", "--format=tar", sha, *([sub] if sub else [])], stdout=subprocess.PIPE
        )
        untar = subprocess.run(["tar", "-x", "-C", str(scratch)], stdin=archive.stdout, capture_output=True)
        archive.stdout.close()  # type: ignore[union-attr]
        if archive.wait() != 0 or untar.returncode != 0:
            raise UsageError(
                f"git archive of {sha[:12]}:{sub or '.'} in {str(repo)!r} failed "
                f"({matrix.last_line(untar.stderr.decode(errors='replace')) or 'git archive exited nonzero'})"
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(scratch / sub if sub else scratch, final)
        except OSError:
            if not final.is_dir():  # a concurrent run put the same tree there first: use it
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


def check_args(args: argparse.Namespace, *, cache: Path | None = None) -> tuple[Side, Side]:
    """Every argument checked (UsageError, one line) and both sides resolved, before anything is loaded."""
    engine = getattr(args, "engine", "sglang")
    try:
        check_choice("--profile", args.profile, PROFILES)
        check_choice("--format", args.format, FORMATS)
        check_choice("--engine", engine, ENGINES)
    except DeferlabInputError as e:
        raise UsageError(str(e)) from None
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out: {str(args.out)!r} exists and is not a directory")
    if args.junit is not None and args.junit.is_dir():
        raise UsageError(f"--junit: {str(args.junit)!r} is a directory; accepted: a file path for the XML")
    selected_claims(args)
    base = resolve_side("BASE", args.base, cache=cache, engine=engine)
    head = resolve_side("HEAD", args.head, cache=cache, engine=engine)
    if base.identity == head.identity:
        raise UsageError(
            f"BASE and HEAD are the same source ({args.base!r} and {args.head!r} resolve to {base.run_spec!r}); "
            "accepted: two different releases, checkouts or revisions"
        )
    return base, head


def selected_claims(args: argparse.Namespace) -> tuple[str, ...]:
    """``--claims`` as claim ids in registry order (() for every claim); UsageError naming an unknown one."""
    text = getattr(args, "claims", None)
    if text is None:
        return ()
    from deferlab.reference.system.claims import load_claims

    known = list(load_claims())
    asked = [c.strip().upper() for c in str(text).split(",") if c.strip()]
    unknown = [c for c in asked if c not in known]
    if not asked or unknown:
        raise UsageError(
            f"--claims: {', '.join(map(repr, unknown)) or repr(text)} is no claim; accepted: comma-separated ids "
            f"among {', '.join(known)}"
        )
    return tuple(c for c in known if c in asked)


def preflight_both(sides: list[Side], say: Any, *, loader: Any = matrix.preflight) -> dict[str, str]:
    """Load both sides at once (a fresh process each); their names, or UsageError naming the side."""
    say("loading " + " and ".join(f"{s.role} {s.spec}" for s in sides) + " (an uncached release downloads once)")
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(sides)) as pool:
        futures = {s.role: pool.submit(loader, s.run_spec, engine=s.engine) for s in sides}
    names = {}
    for s in sides:
        try:
            names[s.role] = futures[s.role].result()
        except (matrix.SGLangLoadError, subprocess.TimeoutExpired) as e:
            raise UsageError(f"{s.role}: {matrix.one_line(str(e))}") from None
    return names


# --- running the claims ---------------------------------------------------------------------------------------------
def run_side(side: Side, profile: str, work: Path, log_path: Path, claim_ids: tuple[str, ...] = ()) -> dict[str, Any]:
    """`matrix.run_version` on one side, in a child process whose working folder is ``work``.

    Why the child: ``run_version`` names its results folder after the spec (``runs_dir / spec``), which for a
    path spec is the tree itself; here a path reaches the tree through the relative link ``work/tree``, so
    verdicts land in ``work/runs/tree`` and nothing is written into the checkout.
    """
    work.mkdir(parents=True, exist_ok=True)
    spec = side.run_spec
    if side.kind in ("checkout", "revision"):
        (work / "tree").symlink_to(side.run_spec, target_is_directory=True)
        spec = "tree"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RUN_SIDE, spec, profile, str(log_path.resolve()), side.engine, ",".join(claim_ids)],
        cwd=work,
        env={**os.environ, **SIDE_THREADS},
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith("RESULT:")), None)
    if line is None:
        why = matrix.one_line(proc.stderr) or f"exit {proc.returncode}"
        return {"version": side.spec, "verdicts": {}, "rows": [], "system": None, "error": f"the side runner: {why}",
                "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    return {**json.loads(line[len("RESULT:") :]), "version": side.spec}


def tests_done(log_path: Path) -> int:
    """Claim tests pytest has reported in ``log_path`` so far (its ``-q`` progress characters)."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return 0
    return sum(
        len(re.sub(r"\s*\[\s*\d+%\]$", "", x))
        for x in text.splitlines()
        if re.fullmatch(r"[.FEsxX]+(\s*\[\s*\d+%\])?", x)
    )


def run_sides(
    sides: list[Side], profile: str, work: Path, say: Any, *, runner: Any = run_side, heartbeat: float = 20.0
) -> dict[str, dict[str, Any]]:
    """Both sides' claims at once (one at a time on a single core), with a progress line every ``heartbeat`` s."""
    workers = 2 if (os.cpu_count() or 1) >= 2 else 1
    logs = {s.role: work / f"{s.role.lower()}.log" for s in sides}
    for p in logs.values():
        p.touch()
    t0 = time.perf_counter()
    say(
        f"running the claims on {' and '.join(s.role + ' ' + s.spec for s in sides)} ({workers} at once, profile {profile})"
    )
    done = threading.Event()

    def beat() -> None:
        while not done.wait(heartbeat):
            parts = [f"{s.role} {tests_done(logs[s.role])} claim tests done" for s in sides]
            say(f"{time.perf_counter() - t0:.0f} s: " + ", ".join(parts))

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {s.role: pool.submit(runner, s, profile, work / s.role.lower(), logs[s.role]) for s in sides}
            results = {}
            for s in sides:
                results[s.role] = futures[s.role].result()
                r = results[s.role]
                say(
                    f"{s.role} {s.spec}: {_counts(r['verdicts'])} in {r['seconds']} s"
                    + (f"; {r['error']}" if r["error"] else "")
                )
    finally:
        done.set()
    for s in sides:
        results[s.role]["log"] = logs[s.role].read_text(errors="replace") if logs[s.role].is_file() else ""
    return results


def _counts(verdicts: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for v in verdicts.values():
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "no verdicts"


# --- the command ----------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace, log: TextIO | None = None, *, runner: Any = run_side, loader: Any = None) -> int:
    """Compare the two sides; returns the exit status (see the module docstring). ``runner`` / ``loader``
    replace `run_side` / `matrix.preflight` (tests)."""
    from deferlab.reports.compare import render as compare_render

    log = log or sys.stderr
    say = lambda msg: print(f"[deferlab] compare: {msg}", file=log, flush=True)  # noqa: E731
    base, head = check_args(args)
    only = selected_claims(args)
    if only:
        runner = functools.partial(runner, claim_ids=only)
    sides = {"BASE": base, "HEAD": head}
    names = preflight_both([base, head], say, loader=loader or matrix.preflight)
    for side in (base, head):  # an extracted revision is no git checkout: name its commit as the loader would
        if side.revision and "+g" not in names[side.role]:
            names[side.role] += f"+g{side.revision[:9]}"
    out = args.out or default_out_dir(prefix="compare-")
    work = Path(tempfile.mkdtemp(prefix="deferlab-compare-"))
    try:
        results = run_sides([base, head], args.profile, work, say, runner=runner)
        statements = load_claim_statements()
        if only:  # the claims asked for, not the rest as "not run"
            statements = {c: statements[c] for c in only if c in statements}
        doc = compare_render.document(sides, names, results, args.profile, statements)
        made = compare_render.write(out, doc, results, junit_file=args.junit, log=log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"written to {out.resolve()} (compare.md, compare.json, compare.png, {len(made['written'])} reproducers)")
    warmed = _warm_reproducers(doc, made)
    if warmed:
        say(f"reproducers' engines kept warm for `deferlab repro` ({', '.join(warmed)}; ends after 10 min idle)")
    for line in made["missing"]:
        say(f"no reproducer: {line}")
    for role in doc["sides_not_run"]:
        say(f"{role} could not run its claims: {doc['errors'][role]}")
    for cid in doc["changes"]["newly failing"]:
        row = next(c for c in doc["claims"] if c["id"] == cid)
        say(f"NEWLY FAILING {cid}: {row['base']} -> fails")
    print(compare_render.stdout_text(out, args.format), end="")
    return int(doc["exit_status"])


def _warm_reproducers(doc: dict[str, Any], made: dict[str, list[str]]) -> list[str]:
    """Start the warm daemon (`reports.mutate.warm.prestart`) for each side that got reproducers, so the reviewer's first
    ``deferlab repro`` forks from a loaded engine; not under CI, nor with ``DEFERLAB_REPRO_WARM=0``."""
    from deferlab.reports.mutate import warm
    from deferlab.reports.repro import cli as repro

    if not made["written"] or os.environ.get("CI") or os.environ.get(repro.WARM_ENV, "1").strip() == "0":
        return []
    started = []
    for role in ("base", "head"):
        side = doc[role]
        if side.get("run_spec") and warm.prestart(side.get("engine") or "sglang", side["run_spec"]):
            started.append(side["run_spec"])
    return started


def main(argv: list[str] | None = None) -> int:
    """``python -m deferlab.reports.compare.cli BASE HEAD ...``: the subcommand alone (what ``deferlab compare`` runs)."""
    parser = argparse.ArgumentParser(prog="deferlab")
    add_parser(parser.add_subparsers(dest="command", required=True))
    try:
        return run(parser.parse_args(["compare", *(sys.argv[1:] if argv is None else argv)]))
    except UsageError as e:
        print(f"deferlab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
