"""``deferlab mutate --sglang SPEC`` (or ``--vllm SPEC``): how tight is the claims' net? Mutate the engine's own
code and count what the claims notice (mutate.md / mutate.json / mutate.png).

Steps: every argument is checked first (targets exist, a campaign has mutants,
the baseline and the equivalents file read, SPEC loads); then the reference:
each claim test once on an unmutated copy of the tree, alone, its functions
carrying probes (cached under ``~/.cache/deferlab/mutate`` by tree, suite and
profile), whose recorded provenance names the default targets and whose probes
pick each mutant's claims; then a fixed-seed sample of cosmic-ray mutants, each in a worker's
private copy of the tree, the results appended to ``mutants.jsonl`` as each
finishes (``--resume`` continues an interrupted campaign). A bigger campaign
than one box runs as ``--target`` slices on several machines (cosmic-ray's
own HTTP workers distribute its test command the same way); ``--mutants
ID,...`` (or ``@FILE``, one id a line) runs exactly those mutants, as
``mutate.json`` names them (to re-run a campaign's survivors). What runs on a
mutant is every unit the suite runs on real code whose test entered its
function: claim tests by claim, ``real_code`` properties by test
(``P:<test>``; `mutate_select`), and kills are counted per unit. ``--vllm``
runs vLLM's served claims on vLLM's code (`mutate_vllm`); ``--anchor`` runs
the same mutants against a checkout's own unit tests too, side by side
(`mutate_anchor`). Exit status: 0; 1 a mutant the baseline saw detected now
survives; 2 bad usage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deferlab.reference.system import claims as claim_registry
from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.core.claims import PROFILES, default_out_dir
from deferlab.reports.mutate import anchor as manchor
from deferlab.reports.mutate import engine, render, select, vllm
from deferlab.reports.mutate import runs as mrun

PLAN, REFERENCE, RESULTS, CONTROL = "campaign.json", "reference.json", "mutants.jsonl", "control.json"
RESUME_KEYS = ("engine", "spec", "profile", "seed", "sample", "targets_asked", "claims", "mutants_asked", "anchor_asked")  # fmt: skip
RESUME_DEFAULTS = {"engine": "sglang"}  # what a plan written before the key existed meant
REFERENCE_FORMAT = 2  # units (claims and properties); a cached reference of another format is not reused


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("mutate", help="mutation campaign on the engine's own code: what the claims notice")
    p.add_argument("--sglang", metavar="SPEC", help="mutate SGLang: 'installed', a checkout path, or a version")
    p.add_argument("--vllm", metavar="SPEC", help="mutate vLLM instead, run by its served claims C13-C15")
    p.add_argument(
        "--anchor",
        nargs="*",
        metavar="TESTS",
        default=None,
        help="also run each mutant against the checkout's own unit tests of its file (or these), side by side",
    )
    p.add_argument("--target", action="append", default=[], metavar="FILE[:FUNCTION]", help="mutate this (repeat)")
    p.add_argument("--sample", type=int, default=100, help="mutants drawn with the seed (default 100)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument(
        "--claims",
        default=None,
        metavar="C1,C3",
        help="only these units (claims, or P:<test> properties; reference and mutants); default every one",
    )
    p.add_argument(
        "--mutants",
        default=None,
        metavar="ID,...|@FILE",
        help="run exactly these mutants (ids as mutate.json gives them; @FILE: one a line), not a sample",
    )
    p.add_argument("--out", type=Path, help="campaign directory (default reports/out/mutate-<UTC timestamp>)")
    p.add_argument("--baseline", default=None, metavar="FILE", help="a newly surviving mutant is a regression")
    p.add_argument(
        "--update-baseline", action="store_true", help=f"write outcomes to FILE (default {render.BASELINE.name})"
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds per mutant (default 5x its claims' reference)")
    p.add_argument("--resume", action="store_true", help="continue the campaign in --out where it stopped")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="workers (default min(2, CPUs))")
    p.add_argument("--profile", default="ci", help=f"hypothesis profile: {', '.join(PROFILES)} (default ci)")
    p.add_argument(
        "--first-kill",
        action="store_true",
        help="stop a mutant's run at the first claim that sees it (faster; kills per claim then count the first)",
    )
    p.add_argument("--compare-selection", type=int, default=0, metavar="K", help="run K mutants with every claim too")
    return p


@dataclass
class Front:
    """What the front door read and checked, before any long work."""

    engine: str  # sglang | vllm
    spec: str
    root: Path
    version: str
    targets: list[engine.Target]
    claims: list[str] | None
    mutants: list[engine.Mutant] | None
    baseline: dict[str, Any] | None
    baseline_path: Path | None
    equivalent: dict[str, dict[str, str]]
    out: Path
    anchor: manchor.Anchor | None = None


def _check(args: argparse.Namespace, package: str) -> Front:
    """Every argument, refused in one line (exit 2) before anything runs."""
    try:
        import cosmic_ray.plugins  # noqa: F401  - the operators
    except ImportError:
        raise UsageError("deferlab mutate needs cosmic-ray's operators: pip install 'deferlab[mutate]'") from None
    for flag, value, least in (("--sample", args.sample, 1), ("--jobs", args.jobs, 1), ("--compare-selection", args.compare_selection, 0)):  # fmt: skip
        if value < least:
            raise UsageError(f"{flag} must be an int >= {least}, got {value}")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a number of seconds > 0, got {args.timeout}")
    if args.profile not in PROFILES:
        raise UsageError(f"--profile must be one of {', '.join(map(repr, PROFILES))}; got {args.profile!r}")
    kind, spec = vllm.engine_of(args)
    if args.anchor is not None:
        manchor.front(kind, spec, None, None, args.anchor)
    claims = None
    if args.claims is not None:
        known = claim_registry.claim_ids() if kind == "sglang" else tuple(vllm.served_claims())
        claims = [c.strip() if select.is_property(c.strip()) else c.strip().upper() for c in args.claims.split(",") if c.strip()]  # fmt: skip
        bad = [c for c in claims if c not in known and not (select.is_property(c) and len(c) > 2)]
        bad = bad or ([] if claims else ["(none)"])
        if bad:
            raise UsageError(
                f"--claims: unknown claim(s) {', '.join(bad)}; "
                + (f"claims.toml has {', '.join(known)}" if kind == "sglang" else f"vLLM runs {', '.join(known)}")
                + " (a property is P:<test function>)"
            )
    out = args.out or default_out_dir(prefix="mutate-")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {str(out)!r} exists and is not a directory")
    if args.resume and not (out / PLAN).is_file():
        raise UsageError(f"--resume: {str(out)!r} holds no campaign ({PLAN}); give the --out of an interrupted one")
    if not args.resume and (out / PLAN).is_file():
        raise UsageError(
            f"--out: {str(out)!r} already holds a campaign; add --resume to continue it, or pick a new --out"
        )
    if args.update_baseline and not args.baseline and kind != "sglang":
        raise UsageError(f"--update-baseline with --{kind} needs --baseline FILE (the default, {render.BASELINE.name}, is SGLang's CI sample)")  # fmt: skip
    baseline_path = Path(args.baseline) if args.baseline else (render.BASELINE if args.update_baseline else None)
    baseline = None
    if baseline_path is not None and not args.update_baseline:
        try:
            baseline = render.load_baseline(baseline_path)
        except ValueError as e:
            raise UsageError(f"--baseline: {e}") from None
    try:
        equivalent = render.load_equivalent()
    except ValueError as e:
        raise UsageError(str(e)) from None
    from deferlab.impl.loader.sources import resolve

    try:
        found = resolve(vllm.engine_module(kind), spec)
    except DeferlabInputError as e:
        raise UsageError(f"--{kind}: {str(e).splitlines()[0]}") from None
    bench = None if args.anchor is None else manchor.front(kind, spec, found.kind, found.root, args.anchor)
    targets = [engine.parse_target(found.root, t, package) for t in args.target]
    for t in targets:
        if not engine.mutants_in(found.root, t):
            raise UsageError(f"--target {t.label}: cosmic-ray's operators find no mutant in it; nothing to run")
    mutants = None if args.mutants is None else engine.asked_mutants(found.root, args.mutants, targets, package)
    if bench is not None:
        bench.check([t.file for t in targets] + [m.file for m in mutants or []])
    return Front(kind, spec, found.root, found.version, targets, claims, mutants, baseline, baseline_path, equivalent, out, bench)  # fmt: skip


# --- the reference ---------------------------------------------------------------------------------------------------
# What the claim tests' outcome depends on, of deferlab's own code (its other tests and the CLI do not count).
SUITE = ("impl", "reference", "properties/claims", "properties/strategies", "properties/*.py")


def _fingerprint(root: Path, package: str, profile: str, claims: list[str] | None, runner: mrun.Runner, files: list[str]) -> str:  # fmt: skip
    """The reference's cache key: the tree's files (path, size, mtime), the suite's code (`SUITE`), profile,
    claims, and the files probed beyond the driver's modules."""
    h = hashlib.sha256(json.dumps([REFERENCE_FORMAT, str(root), profile, claims, type(runner).__name__, sorted(set(files))]).encode())  # fmt: skip
    here = Path(__file__).resolve().parents[2]
    paths = [p for pattern in SUITE for p in sorted(here.glob(pattern))]
    for base in [root / package, *paths]:
        walk = os.walk(base) if base.is_dir() else [(str(base.parent), [], [base.name])]
        for dirpath, dirnames, names in walk:
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(n for n in names if n.endswith((".py", ".toml"))):
                st = (Path(dirpath) / name).stat()
                h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def _reach(ref: dict, index: select.CodeIndex) -> dict[str, select.Reach]:
    """Per unit: the functions its recorded provenance names (a property's: none), and those its test entered
    (the probes)."""
    named = select.named_functions(ref["rows"], index)
    out = {}
    for cid in mrun.units_of(ref):
        names, unresolved = named.get(cid, (set(), []))
        out[cid] = select.Reach(cid, names, set(ref["called"].get(cid, [])) or None, unresolved)
    return out


def _cost_model(ref: dict) -> Callable[..., float]:
    """Seconds a run of ``nodes`` should take: one process start (the reference's largest) plus their tests."""
    overhead = max((ref["seconds"][n] - ref["durations"].get(n, 0) for n in ref["seconds"]), default=30.0)

    def cost(nodes: list[str], overhead_only: bool = False) -> float:
        return overhead if overhead_only else overhead + sum(ref["durations"].get(n, 30.0) for n in nodes)

    return cost


def _add_wall(out: Path, seconds: float) -> float:
    """The campaign's wall time over every session (a resumed one adds its own), kept in ``timing.json``."""
    path = out / "timing.json"
    total = (json.loads(path.read_text()).get("wall_seconds", 0.0) if path.is_file() else 0.0) + seconds
    write_text_atomic(path, json.dumps({"wall_seconds": round(total, 1)}) + "\n")
    return round(total, 1)


def _add_runs(out: Path, now: dict) -> dict:
    """How the runs ran over every session (a resumed one adds its own), kept in ``runs.json``."""
    path = out / "runs.json"
    total = json.loads(path.read_text()) if path.is_file() else {"warm": 0, "cold": {}}
    total["enabled"], total["warm"] = now["enabled"], total["warm"] + now["warm"]
    for why, n in now["cold"].items():
        total["cold"][why] = total["cold"].get(why, 0) + n
    write_text_atomic(path, json.dumps(total) + "\n")
    return total


def _targets_reached(targets: list[engine.Target], reach: dict[str, select.Reach], probed: list[str]) -> None:
    """A target in a probed file that no claim test entered in the reference would measure nothing: refused."""
    if any(not r.can_say for r in reach.values()):
        return
    called = set().union(*(r.called or set() for r in reach.values()))
    for t in (t for t in targets if t.file in probed):
        hit = f"{t.file}:{t.function}" in called if t.function else any(k.startswith(t.file + ":") for k in called)
        if not hit:
            raise UsageError(
                f"--target {t.label}: no claim test entered it in the reference run; nothing would be measured"
            )


# --- one mutant ------------------------------------------------------------------------------------------------------
def _mutant_task(ctx: dict, slot: mrun.Slot, m: engine.Mutant) -> dict[str, Any]:
    """Apply, run the selected units (and every unit when measuring selection), judge, restore."""
    rec: dict[str, Any] = {**asdict(m), "id": m.id, "node": list(m.node)}
    ref, runner = ctx["reference"], ctx["runner"]
    key = f"{m.file}:{m.function}" if m.function else None
    chosen = select.claims_for(key, ctx["reach"])
    every = mrun.units_of(ref)
    claims = chosen or every
    nodes_of = select.nodes_by_unit(ref["nodes"])
    try:
        code = ctx["sources"].mutated(m)
        rec["diff"] = engine.diff(ctx["sources"].text(m.file), code or "", m.file)
        slot.tree.apply(m.file, code)
        try:
            for label, wanted in (("", claims), ("all_claims", every if ctx["compare"](m) else None)):
                if wanted is None:
                    continue
                nodes = sorted((n for c in wanted for n in nodes_of.get(c, [])), key=ctx["cost"])  # quick ones first
                run = mrun.run_claims(
                    runner, slot.tree.path, nodes, slot.scratch, ctx["timeout"](nodes), stop_on=ctx["stop_on"]
                )
                v = mrun.judge(ref, run, wanted, nodes_of, lambda: mrun.load_error(runner, slot.tree.path, 600))
                part = {"outcome": v.outcome, "killed_by": v.killed_by, "reasons": v.reasons, "seconds": run.seconds}
                if label:
                    rec[label] = part
                else:
                    rec.update(part)
            if ctx["anchor"] is not None:  # the checkout's own unit tests of the file, on the same mutant
                rec["anchor"] = manchor.run_mutant(ctx["anchor"], slot, m.file)
        finally:
            slot.tree.restore(m.file)
        rec["claims_run"] = chosen  # the units run (claims, P: properties); None: every one (probes could not say)
    except mrun.Interrupted:
        raise
    except Exception as e:  # a harness failure of ours: recorded, retried by --resume
        if slot.tree.swapped:  # a tree that could not be restored is made again, never reused mutated
            slot.rebuild()
        rec.update(outcome="error", killed_by=[], reasons={"(harness)": f"{type(e).__name__}: {e}"[:400]}, seconds=0)
    return rec


def run(args: argparse.Namespace, log: Any = None, runner: mrun.Runner | None = None) -> int:
    """The campaign; returns the exit status (see the module docstring)."""
    log = log or sys.stderr
    say = lambda msg: print(f"[deferlab] mutate: {msg}", file=log, flush=True)  # noqa: E731
    runner = runner or vllm.runner_for(vllm.engine_of(args)[0], args.profile)
    front = _check(args, runner.package)
    if front.anchor is not None:  # how the unit tests' process loads a tree (a test's runner may name another)
        front.anchor.loader = getattr(runner, "anchor_loader", manchor.LOAD)
    mrun.STOP.clear()
    say(f"loading {front.engine} {front.spec} ({front.root})")
    err = mrun.load_error(runner, front.spec, 1200)
    if err is not None:
        raise UsageError(f"--{front.engine}: {err}")
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="deferlab-mutate-"))
    pool = mrun.Pool(front.root, work, args.jobs, runner.package)
    try:
        return _campaign(args, front, runner, pool, say, t0)
    except KeyboardInterrupt:  # during the reference run (the campaign's own loop says more)
        again = f"--resume --out {front.out}" if (front.out / PLAN).is_file() else "the same arguments"
        say(f"interrupted before the campaign finished; run again with {again}")
        return 130
    finally:
        for slot in pool.made:
            slot.tree.remove()
        shutil.rmtree(work, ignore_errors=True)


def _campaign(
    args: argparse.Namespace, front: Front, runner: mrun.Runner, pool: mrun.Pool, say: Callable, t0: float
) -> int:
    from deferlab.impl.loader.wheels import deferlab_cache

    front.out.mkdir(parents=True, exist_ok=True)
    index = select.CodeIndex.build(front.root, runner.modules(), runner.package)
    cached = (
        deferlab_cache()
        / "mutate"
        / f"reference-{_fingerprint(front.root, runner.package, args.profile, front.claims, runner, [t.file for t in front.targets])}.json"
    )
    if (front.out / REFERENCE).is_file():
        ref = json.loads((front.out / REFERENCE).read_text())
    elif cached.is_file():
        ref = json.loads(cached.read_text())
        say(f"reference run read from the cache ({cached})")
    else:
        say("reference run: each claim test alone on an unmutated copy whose functions carry probes")
        t = time.perf_counter()
        probes = select.probes(front.root, [*index.files.values(), *(t.file for t in front.targets)])
        ref = mrun.reference(pool, runner, front.claims, args.timeout or 3600, say, probes)
        ref["wall_seconds"] = round(time.perf_counter() - t, 1)
        write_text_atomic(cached, json.dumps(ref) + "\n")
    write_text_atomic(front.out / REFERENCE, json.dumps(ref) + "\n")
    reach = _reach(ref, index)
    plan = _plan(args, front, ref, reach, index, say)
    bench = _anchor_reference(args, front, plan, pool, say)
    results = mrun.ResultsFile(front.out / RESULTS)
    todo = {i: engine.Mutant(**{**d, "node": tuple(d["node"])}) for i, d in plan.pop("mutant_specs").items()}
    left = mrun.pending(todo, results.read())
    say(f"{len(todo)} mutants, {len(todo) - len(left)} already done, {len(left)} to run on {args.jobs} worker(s)")
    nodes_of = select.nodes_by_unit(ref["nodes"])
    cost = _cost_model(ref)
    guess = sum(
        cost([n for c in (select.claims_for(f"{m.file}:{m.function}" if m.function else None, reach) or mrun.units_of(ref)) for n in nodes_of.get(c, [])])
        for m in (todo[i] for i in left)
    )  # fmt: skip
    say(
        f"expected about {guess / 60:.0f} mutant-minutes, {guess / 60 / args.jobs:.0f} min of wall time (reference timings)"
    )
    first = set(random.Random(args.seed).sample(sorted(todo), min(args.compare_selection, len(todo))))
    ctx = {
        "reference": ref, "runner": runner, "reach": reach, "sources": engine.Sources(front.root),
        "compare": lambda m: m.id in first, "cost": lambda n: ref["durations"].get(n, 30.0),
        "stop_on": pool.work / "stop.json" if args.first_kill else None,
        "timeout": lambda nodes: args.timeout or 60 + 2 * cost(nodes, overhead_only=True) + 4 * cost(nodes),
        "anchor": bench,
    }  # fmt: skip
    if args.first_kill:
        write_text_atomic(pool.work / "stop.json", json.dumps({"claims": ref["claims"], "tests": ref["tests"]}))
    finished = [0]

    def done(_: str, rec: dict[str, Any]) -> None:
        results.append(rec)
        finished[0] += 1
        el = time.perf_counter() - t0
        eta = el / finished[0] * (len(left) - finished[0])
        by = f" by {', '.join(rec['killed_by'])}" if rec.get("killed_by") else ""
        say(
            f"{finished[0]}/{len(left)} {rec['outcome']}{by}: {rec['id']} ({rec['seconds']} s); {el / 60:.1f} min, ~{eta / 60:.0f} min left"
        )

    control = _read_json(front.out / CONTROL)

    def task(slot: mrun.Slot, i: str) -> dict[str, Any]:
        if i == mrun.CONTROL:
            return mrun.control_task(runner, ref, slot, ctx["timeout"], ctx["stop_on"])
        return _mutant_task(ctx, slot, todo[i])

    def finished_one(i: str, rec: dict[str, Any]) -> None:
        if i != mrun.CONTROL:
            return done(i, rec)
        write_text_atomic(front.out / CONTROL, json.dumps(rec) + "\n")
        control.update(rec)
        seen = f": outcome changed with nothing mutated in {', '.join(rec['seen_by'])}" if rec["seen_by"] else ""
        say(f"control (the unmutated tree, {rec['run']}): {rec['outcome']}{seen} ({rec['seconds']} s)")

    try:
        runner.warm_source = front.root  # warm servers load the unmutated tree (`mutate_run._run_warm`)
        pool.map(task, ([mrun.CONTROL] if not control and left else []) + left, finished_one)
    except KeyboardInterrupt:
        _add_wall(front.out, time.perf_counter() - t0)
        say(f"interrupted: {finished[0]} of {len(left)} finished; continue with --resume --out {front.out}")
        return 130
    eq = render.equivalent_for(front.equivalent, front.version)
    wall = _add_wall(front.out, time.perf_counter() - t0)
    plan["timing"] = {"wall_seconds": wall, "reference_seconds": ref.get("wall_seconds", 0)}
    plan["control"], plan["runs"] = control or None, _add_runs(front.out, mrun.warm_summary(runner))
    if bench is not None:
        plan["anchor"] = manchor.summary(bench)
    cuda = render.equivalent_for(front.equivalent, front.version, "needs CUDA")
    doc = render.document(plan, list(results.read().values()), eq, cuda)
    regs, better = render.compare(doc, front.baseline) if front.baseline else ([], [])
    render.write(front.out, doc, regs, better)
    if args.update_baseline and front.baseline_path is not None:
        render.write_baseline(front.baseline_path, doc)
        say(f"baseline written to {front.baseline_path}")
    c = doc["counts"]
    say(
        f"kill rate {doc['kill_rate']}: "
        + ", ".join(f"{k} {n}" for k, n in c.items())
        + f"; written to {front.out.resolve()}"
    )
    for r in regs:
        say(f"REGRESSION {r['id']}: {r['baseline']} -> survived")
    return 1 if regs and not args.update_baseline else 0


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def _anchor_reference(
    args: argparse.Namespace, front: Front, plan: dict, pool: mrun.Pool, say: Callable
) -> dict[str, Any] | None:
    """With ``--anchor``: which of the checkout's unit tests of the targeted files pass unmutated here
    (`mutate_anchor.reference`), run once per campaign and reread by ``--resume``; None without it."""
    if front.anchor is None:
        return None
    path = front.out / manchor.ANCHOR
    if path.is_file():
        return json.loads(path.read_text())
    files = sorted({t["target"].split(":", 1)[0] for t in plan["targets"]})
    front.anchor.check(files)
    say("anchor reference: the checkout's unit tests of the targeted files, each file alone on an unmutated copy")
    ref = manchor.reference(front.anchor, pool, files, args.timeout or 600, say)
    write_text_atomic(path, json.dumps(ref) + "\n")
    return ref


def _plan(
    args: argparse.Namespace, front: Front, ref: dict, reach: dict, index: select.CodeIndex, say: Callable
) -> dict[str, Any]:
    """The campaign's plan (targets, population, the sample), written once and reread by --resume."""
    asked = [t.label for t in front.targets]
    mine = {"engine": front.engine, "spec": front.spec, "profile": args.profile, "seed": args.seed, "sample": args.sample, "targets_asked": asked, "claims": front.claims, "mutants_asked": _asked_ids(front), "anchor_asked": args.anchor}  # fmt: skip
    if (front.out / PLAN).is_file():
        plan = json.loads((front.out / PLAN).read_text())
        diff = [k for k in RESUME_KEYS if plan.get(k, RESUME_DEFAULTS.get(k)) != mine[k]]
        if diff:
            raise UsageError(f"--resume: {front.out} was started with other {', '.join(diff)}; give the same arguments")
        return plan
    targets = front.targets
    if front.mutants is not None:  # exactly these: their functions are the targets
        targets = list(dict.fromkeys([*targets, *(engine.holder(front.root, m, front.engine) for m in front.mutants)]))
    elif targets:
        _targets_reached(targets, reach, ref.get("instrumented", []))
    else:
        named = sorted(set().union(*(r.named for r in reach.values())))
        targets = [engine.function_target(index.funcs[k]) for k in named]
        if not targets:
            raise UsageError(
                "no claim's recorded provenance names an engine function: no default targets; give --target"
            )
    pool_ = engine.population(front.root, targets)
    if not pool_:
        raise UsageError("the targets hold no mutant of cosmic-ray's operators: a campaign with no mutants")
    if front.mutants is not None:
        chosen, dropped = sorted(front.mutants, key=lambda m: (m.file, m.line, m.col, m.operator, m.index, m.nth)), 0
        say(f"{len(chosen)} mutants asked for by --mutants (no sample drawn)")
    else:
        chosen, dropped = engine.sample(pool_, args.sample, args.seed, engine.Sources(front.root))
        say(f"{len(chosen)} of {len(pool_)} mutants drawn (seed {args.seed}) from {len(targets)} target(s)")
    if front.baseline is not None and not {m.id for m in chosen} & set(front.baseline["outcomes"]):
        raise UsageError(
            f"--baseline {front.baseline_path}: it shares no mutant with this campaign (other seed, sample or targets)"
        )
    plan = {
        **mine, "jobs": args.jobs, "first_kill": args.first_kill, "population": len(pool_), "incompetent": dropped,
        "operators": len(engine.operator_names()),
        "system": {"root": str(front.root), "version": front.version, "name": f"{front.engine}-{front.version}"},
        "targets": [{"target": t.label, "start": t.start, "end": t.end, "population": sum(m.file == t.file and t.start <= m.line <= t.end for m in pool_)} for t in targets],
        "reference": {"verdicts": {c: v["verdict"] for c, v in ref["claims"].items()}, "seconds": ref["seconds"], "errors": ref["errors"],
                      "properties": {u: o for u, o in ref.get("properties", {}).items() if o == "passed"},
                      "called": {c: sorted(r.called or []) for c, r in reach.items()},
                      "named": {c: sorted(r.named) for c, r in reach.items()},
                      "unresolved": {c: r.unresolved for c, r in reach.items() if r.unresolved}},
        "mutant_specs": {m.id: {k: v for k, v in asdict(m).items()} for m in chosen},
    }  # fmt: skip
    write_text_atomic(front.out / PLAN, json.dumps(plan, indent=1) + "\n")
    return json.loads(json.dumps(plan))


def _asked_ids(front: Front) -> list[str] | None:
    return None if front.mutants is None else [m.id for m in front.mutants]
