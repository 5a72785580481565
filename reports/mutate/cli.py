"""``deferlab mutate --sglang SPEC`` (or ``--vllm SPEC``): how tight is the claims' net? Mutate the engine's own
code and count what the claims notice (mutate.md / mutate.json / mutate.png).

Steps: every argument is checked first (targets exist, a campaign has mutants, the baseline and the
equivalents file read, SPEC loads); then the reference: each unit once on an unmutated copy of the tree,
alone, its functions carrying probes (cached by tree, suite and profile, `plan.reference`), whose recorded
provenance names the default targets and whose probes pick each mutant's units; then a fixed-seed sample
of cosmic-ray mutants, each in a worker's private copy of the tree, every run through the one runner
(`runs`), forked from a warm interpreter where it can be (`fork`), each result committed to the campaign's
store (``campaign.sqlite``, `store`) as it finishes; ``--resume`` runs what is pending, and the outputs are
rendered from the store alone. A bigger campaign than one box runs as ``--target`` slices on several
machines, or with ``--cluster ADDRESS`` as one Ray task per mutant (`remote`: the reference on this machine,
each mutant's tree made on its worker, judged here); ``--mutants ID,...`` (or ``@FILE``) runs exactly those
mutants. What runs on a mutant is every unit the suite runs on real code whose test entered its function:
claim tests by claim, ``real_code`` properties by test (``P:<test>``). ``--vllm`` runs the claims vLLM answers on vLLM's code; ``--model FAMILY``
(one, a comma-separated list, or ``all``; default kimi-k3) runs the claim columns of those model families (a
claim's verdicts in every column it has, joined, `runs.claims_of`), its default targets the engine functions
their recorded provenance names (vLLM's ``FusedMMInputNorm.forward_native``, SGLang InternVL's
``dynamic_preprocess``); only the engine's own code is ever mutated, never a companion's; ``--anchor``
runs the same mutants against a checkout's own unit tests too, side by side (`anchor`). Exit status: 0;
1 a mutant whose outcome changed since the baseline; 2 bad usage; 130 Ctrl-C, 143 SIGTERM (resumable).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deferlab.reference.system import claims as claim_registry
from deferlab.reference.system.errors import DeferlabInputError, UsageError
from deferlab.reference.system.systems import ENGINES
from deferlab.reference.system.systems import engine as engine_facts
from deferlab.reports.core import process
from deferlab.reports.core.atomic import check_out_dir, write_text_atomic
from deferlab.reports.core.claims import PROFILES, default_out_dir
from deferlab.reports.core.executor import check_cluster, executor_for
from deferlab.reports.core.sides import family_option, require_extras, selected_families
from deferlab.reports.mutate import anchor as manchor
from deferlab.reports.mutate import columns, engine, plan, remote, render, select
from deferlab.reports.mutate import runs as mrun
from deferlab.reports.mutate.fork import Forks
from deferlab.reports.mutate.store import NAME, Store


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("mutate", help="mutation campaign on the engine's own code: what the claims notice")
    p.add_argument("--sglang", metavar="SPEC", help="mutate SGLang: 'installed', a checkout path, or a version")
    p.add_argument("--vllm", metavar="SPEC", help="mutate vLLM instead, run by the claims vLLM answers")
    p.add_argument("--model", metavar="FAMILY", default=None,
                   help="the model families whose claim columns run: one, a comma-separated list, or 'all' (default kimi-k3)")  # fmt: skip
    p.add_argument("--anchor", nargs="*", metavar="TESTS", default=None,
                   help="also run each mutant against the checkout's own unit tests of its file (or these), side by side")  # fmt: skip
    p.add_argument("--target", action="append", default=[], metavar="FILE[:FUNCTION]", help="mutate this (repeat)")
    p.add_argument("--sample", type=int, default=100, help="mutants drawn with the seed (default 100)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--claims", default=None, metavar="C1,C3",
                   help="only these units (claims, or P:<test> properties; reference and mutants); default every one")  # fmt: skip
    p.add_argument("--mutants", default=None, metavar="ID,...|@FILE",
                   help="run exactly these mutants (ids as mutate.json gives them; @FILE: one a line), not a sample")  # fmt: skip
    p.add_argument("--out", type=Path, help="campaign directory (default reports/out/mutate-<UTC timestamp>)")
    p.add_argument("--baseline", default=None, metavar="FILE", help="a mutant whose outcome changed is a regression")
    p.add_argument("--update-baseline", action="store_true", help=f"write outcomes to FILE (default {render.BASELINE.name})")  # fmt: skip
    p.add_argument("--timeout", type=float, default=None, help="seconds per mutant (default 5x its claims' reference)")
    p.add_argument("--resume", action="store_true", help="continue the campaign in --out where it stopped")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                   help="workers (default min(2, CPUs)); with --cluster local, the local Ray instance's CPUs")  # fmt: skip
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run each mutant as a task on a Ray cluster: 'auto', 'ray://HOST:PORT' or 'local' (the cluster extra); a path SPEC needs 'local'")  # fmt: skip
    p.add_argument("--profile", default="ci", help=f"hypothesis profile: {', '.join(PROFILES)} (default ci)")
    p.add_argument("--first-kill", action="store_true",
                   help="stop a mutant's run at the first claim that sees it (faster; kills per claim then count the first)")  # fmt: skip
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
    baseline: Any
    baseline_path: Path | None
    equivalent: dict[str, dict[str, str]]
    out: Path
    anchor: manchor.Anchor | None = None

    @property
    def baseline_ids(self) -> set[str]:
        return render.baseline_ids(self.baseline) if self.baseline is not None else set()


def engine_of(args: argparse.Namespace) -> tuple[str, str]:
    """(engine, SPEC) of ``--sglang`` / ``--vllm``: exactly one is given (UsageError in one line otherwise)."""
    given = [(e, getattr(args, e)) for e in ENGINES if getattr(args, e, None) is not None]
    if len(given) > 1:
        raise UsageError("--sglang and --vllm are mutually exclusive: a campaign mutates one engine's code; give one")
    if not given:
        raise UsageError("deferlab mutate needs --sglang SPEC or --vllm SPEC (the engine whose code is mutated)")
    name, spec = given[0]
    if not spec.strip():
        raise UsageError(f"--{name}: an empty SPEC; give 'installed', a checkout path or a version")
    return name, spec.strip()


def _claims(text: str, kind: str) -> list[str]:
    """``--claims``: claim ids the engine answers, or ``P:<test>`` properties; UsageError naming what is known."""
    facts = engine_facts(kind)
    known = facts.claims or claim_registry.claim_ids()
    claims = [c.strip() if select.is_property(c.strip()) else c.strip().upper() for c in text.split(",") if c.strip()]
    bad = [c for c in claims if c not in known and not (select.is_property(c) and len(c) > 2)] or ([] if claims else ["(none)"])  # fmt: skip
    if bad:
        has = f"{facts.display} runs {', '.join(known)}" if facts.claims else f"claims.toml has {', '.join(known)}"
        raise UsageError(f"--claims: unknown claim(s) {', '.join(bad)}; {has} (a property is P:<test function>)")
    return claims


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
    kind, spec = engine_of(args)
    require_extras(selected_families(getattr(args, "model", None)))
    if args.anchor is not None:
        manchor.front(kind, spec, None, None, args.anchor)
    claims = None if args.claims is None else _claims(args.claims, kind)
    args.cluster = check_cluster(getattr(args, "cluster", None), "mutate")
    out = process.lock_output(check_out_dir(args.out or default_out_dir(prefix="mutate-")))  # one campaign a folder
    if args.resume and not Store.holds_campaign(out):
        raise UsageError(f"--resume: {str(out)!r} holds no campaign ({NAME}); give the --out of an interrupted one")
    if not args.resume and Store.holds_campaign(out):
        raise UsageError(f"--out: {str(out)!r} already holds a campaign; add --resume to continue it, or pick a new --out")  # fmt: skip
    if args.update_baseline and not args.baseline and not engine_facts(kind).mutate_baseline:
        raise UsageError(f"--update-baseline with --{kind} needs --baseline FILE (the default, {render.BASELINE.name}, is SGLang's CI sample)")  # fmt: skip
    baseline_path = Path(args.baseline) if args.baseline else (render.BASELINE if args.update_baseline else None)
    try:
        baseline = render.load_baseline(baseline_path) if baseline_path and not args.update_baseline else None
    except ValueError as e:
        raise UsageError(f"--baseline: {e}") from None
    try:
        equivalent = render.load_equivalent()
    except ValueError as e:
        raise UsageError(str(e)) from None
    remote.front(args.cluster, kind, spec, args.anchor)  # before a release is fetched
    from deferlab.impl.loader.sources import resolve

    try:
        found = resolve(importlib.import_module(engine_facts(kind).sources).ENGINE, spec)
    except DeferlabInputError as e:
        raise UsageError(f"--{kind}: {str(e).splitlines()[0]}") from None
    bench = None if args.anchor is None else manchor.front(kind, spec, found.kind, found.root, args.anchor)
    targets = [engine.parse_target(found.root, t, package) for t in args.target]
    for t in targets:
        if not engine.mutants_in(found.root, t):
            raise UsageError(f"--target {t.label}: cosmic-ray's operators find no mutant in it; nothing to run")
    mutants = None if args.mutants is None else plan.asked_mutants(found.root, args.mutants, targets, package)
    if bench is not None:
        bench.check([t.file for t in targets] + [m.file for m in mutants or []])
    return Front(kind, spec, found.root, found.version, targets, claims, mutants, baseline, baseline_path, equivalent, out, bench)  # fmt: skip


def harness_for(engine_name: str, profile: str) -> mrun.Harness:
    """How the campaign runs things on the engine's trees (tests give a fake engine's)."""
    return mrun.Harness(engine_name, profile)


def run(args: argparse.Namespace, log: Any = None, harness: mrun.Harness | None = None) -> int:
    """The campaign; returns the exit status (see the module docstring)."""
    log = log or sys.stderr
    say = lambda msg: print(f"[deferlab] mutate: {msg}", file=log, flush=True)  # noqa: E731
    harness = harness or harness_for(engine_of(args)[0], args.profile)
    harness.use_family(family_option(selected_families(getattr(args, "model", None))))
    front = _check(args, harness.package)
    mrun.STOP.clear()
    t0 = time.perf_counter()
    store = Store(front.out) if args.resume else None
    if store is not None:
        plan.check_resume(store.get("plan"), plan.asked(args, front), front.out)
        if not store.pending() and store.get("control") is not None:
            return _finish(args, front, store, say)  # nothing left to run: rendered from the store alone
    cores = {"num_cpus": args.jobs} if args.cluster == "local" else {}
    executor = None if args.cluster is None else executor_for(args.cluster, say=say, **cores)  # joined, or exit 2
    try:
        return _run(args, front, harness, store, executor, say, t0)
    finally:
        if executor is not None:
            executor.close()  # a local instance stopped, every process its tasks started killed


def _run(
    args: argparse.Namespace, front: Front, harness: mrun.Harness, store: Store | None, executor: Any, say: Callable,
    t0: float,
) -> int:  # fmt: skip
    """The campaign after the front door: the load check, then the runs (`_campaign`), then the outputs."""
    say(f"loading {front.engine} {front.spec} ({front.root})")
    err = harness.load_error(front.spec, 1200)
    if err is not None:
        raise UsageError(f"--{front.engine}: {err}")
    front.out.mkdir(parents=True, exist_ok=True)
    store = store or Store(front.out)
    work = process.temp_dir("mutate-")
    pool = mrun.Pool(front.root, work, args.jobs, harness.package)
    warm = bool(harness.warm) and executor is None  # a cluster's runs are cold
    forks = Forks(harness.engine, front.root, enabled=warm, cold=harness.launcher, stop=mrun.STOP)
    harness.launcher = forks
    stopped = 0
    try:
        _campaign(args, front, harness, pool, store, say, lambda s: forks.last.get(str(s.scratch), "cold"), executor)
    except (KeyboardInterrupt, process.Stopped) as e:
        mrun.STOP.set()
        again = "--resume --out " + str(front.out) if store.get("plan") is not None else "the same arguments"
        say(f"stopped before the campaign finished; run again with {again}")
        stopped = 130 if isinstance(e, KeyboardInterrupt) else 143
    finally:
        forks.close()
        if store.get("plan") is not None:
            store.add_session(time.perf_counter() - t0, forks.summary())
        for slot in pool.made:
            slot.tree.remove()
        shutil.rmtree(work, ignore_errors=True)
    if stopped:
        store.close()
        return stopped
    return _finish(args, front, store, say)


def _campaign(
    args: argparse.Namespace, front: Front, harness: mrun.Harness, pool: mrun.Pool, store: Store, say: Callable,
    how: Callable[[mrun.Slot], str], executor: Any = None,
) -> None:  # fmt: skip
    """The reference, the plan, the anchor's reference, then the control and every pending mutant."""
    index = select.CodeIndex.build(front.root, harness.modules(), harness.package)
    ref = store.get("reference") or plan.reference(front, harness, pool, index, args.timeout or 3600, say)
    harness.launcher.close(probed_only=True)  # type: ignore[attr-defined] - the probes are gone from the trees
    reach = plan.reach(ref, index)
    if store.get("plan") is None:
        drawn, mutants = plan.draw(args, front, ref, reach, index, say)
        store.put("reference", ref)
        store.plan_mutants({m.id: plan.spec_of(m) for m in mutants})
        store.put("plan", drawn)
    bench = _anchor_reference(args, front, harness, pool, store, say)
    todo = {i: plan.mutant_of(s) for i, s in store.specs().items()}
    left = store.pending()
    where = f"{args.jobs} worker(s)" if executor is None else f"the cluster {args.cluster}, one task each"
    say(f"{len(todo)} mutants, {len(todo) - len(left)} already done, {len(left)} to run on {where}")
    guess = plan.expected_seconds(ref, reach, [todo[i] for i in left])
    say(f"expected about {guess / 60:.0f} mutant-minutes, {guess / 60 / args.jobs:.0f} min of wall time (reference timings)")  # fmt: skip
    cost = plan.cost_model(ref)
    stop_on = pool.work / "stop.json" if args.first_kill else None
    if stop_on is not None:
        write_text_atomic(stop_on, json.dumps(columns.stop_document(ref)))
    campaign = mrun.Campaign(
        harness, ref, reach, engine.Sources(front.root),
        timeout=lambda nodes: args.timeout or 60 + 2 * cost(nodes, overhead_only=True) + 4 * cost(nodes),
        stop_on=stop_on, both_ways=set(random.Random(args.seed).sample(sorted(todo), min(args.compare_selection, len(todo)))),
        anchor=None if bench is None else lambda slot, file: manchor.run_mutant(bench, slot, file, harness), how=how,
    )  # fmt: skip
    t0, finished = time.perf_counter(), [0]

    def task(slot: mrun.Slot, i: str) -> dict[str, Any]:
        return campaign.control(slot) if i == mrun.CONTROL else campaign.mutant(slot, todo[i])

    def done(i: str, rec: dict[str, Any]) -> None:
        if i == mrun.CONTROL:
            store.put("control", rec)
            seen = f": outcome changed with nothing mutated in {', '.join(rec['seen_by'])}" if rec["seen_by"] else ""
            return say(f"control (the unmutated tree, {rec['run']}): {rec['outcome']}{seen} ({rec['seconds']} s)")
        store.finish(rec)
        finished[0] += 1
        el = time.perf_counter() - t0
        by = f" by {', '.join(rec['killed_by'])}" if rec.get("killed_by") else ""
        say(f"{finished[0]}/{len(left)} {rec['outcome']}{by}: {rec['id']} ({rec['seconds']} s); {el / 60:.1f} min, ~{el / finished[0] * (len(left) - finished[0]) / 60:.0f} min left")  # fmt: skip

    keys = ([mrun.CONTROL] if store.get("control") is None else []) + left
    if executor is None:
        return pool.map(task, keys, done)
    source, fetch = (str(front.root), False) if args.cluster == "local" else (front.spec, True)
    stop = stop_on.read_text() if stop_on is not None else None
    cuda_only = frozenset(render.equivalent_for(front.equivalent, front.version, "needs CUDA"))
    on = remote.Remote(campaign, source, fetch, launcher=getattr(harness.launcher, "cold", harness.launcher), stop=stop,
                       cuda_only=cuda_only, gpu=executor.gpu_demand())  # fmt: skip
    on.run(executor, todo, keys, done, say)


def _anchor_reference(
    args: argparse.Namespace, front: Front, harness: mrun.Harness, pool: mrun.Pool, store: Store, say: Callable
) -> dict[str, Any] | None:  # fmt: skip
    """With ``--anchor``: which of the checkout's unit tests of the targeted files pass unmutated here
    (`anchor.reference`), run once per campaign and kept in the store; None without it."""
    if front.anchor is None:
        return None
    if store.get("anchor") is None:
        files = sorted({t["target"].split(":", 1)[0] for t in store.get("plan")["targets"]})
        front.anchor.check(files)
        say("anchor reference: the checkout's unit tests of the targeted files, each file alone on an unmutated copy")
        store.put("anchor", manchor.reference(front.anchor, harness, pool, files, args.timeout or 600, say))
    return store.get("anchor")


def _finish(args: argparse.Namespace, front: Front, store: Store, say: Callable) -> int:
    """mutate.json/md/png from the store alone, the baseline's changes, the optional new baseline."""
    doc = render.from_store(store, front.equivalent)
    store.close()
    regs = render.compare(doc, front.baseline) if front.baseline is not None else []
    render.write(front.out, doc, regs)
    if args.update_baseline and front.baseline_path is not None:
        render.write_baseline(front.baseline_path, doc)
        say(f"baseline written to {front.baseline_path}")
    counts = ", ".join(f"{k} {n}" for k, n in doc["counts"].items())
    say(f"kill rate {doc['kill_rate']}: {counts}; written to {front.out.resolve()}")
    for r in regs:
        say(f"REGRESSION {r['id']}: {r['baseline']} -> {r['current']}")
    return 1 if regs and not args.update_baseline else 0
