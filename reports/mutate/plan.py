"""A campaign's plan: the reference (run, or read from its cache), what each unit reaches, the targets and the
fixed-seed sample, each mutant's expected cost; written once into the store, reread by ``--resume``.

Why a cache for the reference: it runs every unit alone on a probed tree (minutes on real SGLang) and
depends only on the tree's files, deferlab's checks and the profile, so a campaign of another sample or
seed on the same tree reads it from ``~/.cache/deferlab/mutate`` (keyed by all of those, `fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.systems import DEFAULT_FAMILY
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.core.runner import RunRecord
from deferlab.reports.core.sides import family_option, selected_families
from deferlab.reports.mutate import engine, select
from deferlab.reports.mutate import runs as mrun

REFERENCE_FORMAT = 3  # 3: node ids under the rootdir they were collected in; a cached one of another is not reused
# What the checks' outcome depends on, of deferlab's own code (its other tests and the CLI do not count).
SUITE = ("impl", "reference", "properties/claims", "properties/strategies", "properties/*.py")
# What a resumed campaign must be asked again exactly as it was started.
RESUME_KEYS = ("engine", "spec", "profile", "seed", "sample", "targets_asked", "claims", "mutants_asked", "anchor_asked", "model")  # fmt: skip


def fingerprint(root: Path, package: str, profile: str, claims: list[str] | None, harness: Any, files: list[str]) -> str:  # fmt: skip
    """The reference's cache key: the tree's files (path, size, mtime), the checks' code (`SUITE`), profile,
    claims, the harness, and the files probed beyond the driver's modules."""
    family = getattr(harness, "family", DEFAULT_FAMILY)
    key = [REFERENCE_FORMAT, str(root), profile, claims, type(harness).__name__, sorted(set(files))]
    key += [family] if family != DEFAULT_FAMILY else []  # another family's columns: a reference of its own
    h = hashlib.sha256(json.dumps(key).encode())
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


def reference(
    front: Any, harness: mrun.Harness, pool: mrun.Pool, index: select.CodeIndex, timeout: float, say: Callable
) -> dict[str, Any]:  # fmt: skip
    """The reference run, from the cache when this tree, suite, profile and claims ran before."""
    from deferlab.impl.loader.wheels import deferlab_cache

    files = [t.file for t in front.targets]
    key = fingerprint(front.root, harness.package, harness.profile, front.claims, harness, files)
    cached = deferlab_cache() / "mutate" / f"reference-{key}.json"
    if cached.is_file():
        say(f"reference run read from the cache ({cached})")
        return json.loads(cached.read_text())
    say("reference run: each unit alone on an unmutated copy whose functions carry probes")
    t = time.perf_counter()
    ref = run_reference(pool, harness, front.claims, timeout, say, select.probes(front.root, [*index.files.values(), *files]))  # fmt: skip
    ref["wall_seconds"] = round(time.perf_counter() - t, 1)
    write_text_atomic(cached, json.dumps(ref) + "\n")
    return ref


def run_reference(
    pool: mrun.Pool, harness: mrun.Harness, claims: list[str] | None, timeout: float, say: Callable,
    probes: dict[str, tuple[str, dict[int, str]]],
) -> dict[str, Any]:  # fmt: skip
    """Each unit's tests alone (a claim test; a property's nodes together) on an unmutated copy carrying ``probes``
    (file -> instrumented text, id -> function): verdicts, signatures, test outcomes, the functions each unit
    entered, seconds. ``claims``: only these units; None: every one collected. A property none of whose
    tests passed here can see no mutant and is dropped. The probes are taken out of the trees afterwards."""
    found: list[tuple[str, list[str]]] = []
    pool.map(lambda slot, _: found.append(harness.collect(slot.tree.path, slot.scratch, timeout)), [0], lambda *a: None)
    (rootdir, every) = found[0]
    nodes = [n for n in every if claims is None or select.unit_of_node(n) in claims]
    units = select.nodes_by_unit(nodes)
    unknown = [c for c in claims or [] if select.is_property(c) and c not in units]
    if unknown:
        known = ", ".join(u for u in select.nodes_by_unit(every) if select.is_property(u)) or "none"
        raise UsageError(f"--claims: no property {', '.join(unknown)} runs on real code (the suite's: {known})")
    doc: dict[str, Any] = {"claims": {}, "rows": [], "tests": {}, "called": {}, "seconds": {}, "durations": {}}
    doc.update(errors=[], nodes=nodes, rootdir=rootdir, instrumented=sorted(probes), properties={})
    key = {n: k for _, ids in probes.values() for n, k in ids.items()}

    def one(slot: mrun.Slot, unit: str) -> tuple[RunRecord, list[int]]:
        if not slot.probed:
            for file, (text, _) in probes.items():
                slot.tree.apply(file, text)
            slot.probed = True
        hits = slot.scratch / "probes.json"
        hits.unlink(missing_ok=True)
        record = harness.claims(slot.tree.path, mrun.absolute(doc, units[unit]), slot.scratch, timeout, {mrun.PROBES_ENV: str(hits)})  # fmt: skip
        return record, json.loads(hits.read_text()) if hits.is_file() else []

    def done(unit: str, got: tuple[RunRecord, list[int]]) -> None:
        record, hits = got
        share = record.seconds / max(1, len(units[unit]))  # one process for the unit's nodes: its start shared
        for node in units[unit]:
            doc["seconds"][node] = round(share, 2)
            doc["durations"][node] = record.tests[node].seconds if node in record.tests else share
        doc["tests"].update({n: t.outcome for n, t in record.tests.items()})
        doc["called"].setdefault(unit, set()).update(key[h] for h in hits if h in key)
        if select.is_property(unit):
            outcomes = [record.tests[n].outcome if n in record.tests else "did not finish" for n in units[unit]]
            doc["properties"][unit] = "passed" if "passed" in outcomes else (outcomes[0] if outcomes else "not-run")
            return say(f"reference {unit}: {', '.join(outcomes)} in {record.seconds} s")
        got_claim = mrun.claims_of(record).get(unit)
        if got_claim is None or got_claim["verdict"] == "not-run" or record.timed_out:
            doc["errors"].append(f"{unit}: recorded no verdict ({record.error or mrun.last_line(record.log)})")
        else:
            doc["claims"][unit] = got_claim
            doc["rows"] += [r.to_dict() for r in record.mine() if r.id == unit]  # the reference's JSON rows
        say(f"reference {unit}: {got_claim['verdict'] if got_claim else 'nothing recorded'} in {record.seconds} s")

    try:
        pool.map(one, list(units), done)
    finally:
        for slot in pool.made:
            for file in probes if slot.probed else ():
                slot.tree.restore(file)
            slot.probed = False
    if not doc["claims"] and not doc["properties"]:  # a campaign of properties alone (--claims P:...) is one
        raise RuntimeError("the reference run recorded no verdict: " + "; ".join(doc["errors"])[:600])
    dead = [u for u, o in doc["properties"].items() if o != "passed"]
    if dead:
        doc["errors"].append(f"properties that passed no test here (no mutant can break them; not run): {', '.join(dead)}")  # fmt: skip
    doc["nodes"] = [n for n in nodes if select.unit_of_node(n) not in dead]
    doc["called"] = {c: sorted(v) for c, v in doc["called"].items() if c not in dead}
    return doc


def reach(ref: dict[str, Any], index: select.CodeIndex) -> dict[str, select.Reach]:
    """Per unit: the functions its recorded provenance names (a property's: none), and those its test entered."""
    named = select.named_functions(ref["rows"], index)
    out = {}
    for cid in mrun.units_of(ref):
        names, unresolved = named.get(cid, (set(), []))
        out[cid] = select.Reach(cid, names, set(ref["called"].get(cid, [])) or None, unresolved)
    return out


def cost_model(ref: dict[str, Any]) -> Callable[..., float]:
    """Seconds a run of ``nodes`` should take: one process start (the reference's largest) plus their tests."""
    overhead = max((ref["seconds"][n] - ref["durations"].get(n, 0) for n in ref["seconds"]), default=30.0)

    def cost(nodes: list[str], overhead_only: bool = False) -> float:
        return overhead if overhead_only else overhead + sum(ref["durations"].get(n, 30.0) for n in nodes)

    return cost


def expected_seconds(ref: dict[str, Any], reach_: dict[str, select.Reach], mutants: list[engine.Mutant]) -> float:
    """The reference's estimate of the mutants' runs, each with the units its function's probes select."""
    cost, nodes_of = cost_model(ref), select.nodes_by_unit(ref["nodes"])
    total = 0.0
    for m in mutants:
        units = select.claims_for(f"{m.file}:{m.function}" if m.function else None, reach_) or mrun.units_of(ref)
        total += cost([n for u in units for n in nodes_of.get(u, [])])
    return total


def _targets_reached(targets: list[engine.Target], reach_: dict[str, select.Reach], ref: dict[str, Any]) -> None:
    """A target in a probed file that no unit entered in the reference would measure nothing: refused (with what
    the reference could not run, often why)."""
    probed, errors = ref.get("instrumented", []), "; ".join(ref.get("errors", []))
    if any(not r.can_say for r in reach_.values()):
        return
    called = set().union(*(r.called or set() for r in reach_.values()))
    for t in (t for t in targets if t.file in probed):
        hit = f"{t.file}:{t.function}" in called if t.function else any(k.startswith(t.file + ":") for k in called)
        if not hit:
            why = f" (the reference: {errors[:300]})" if errors else ""
            raise UsageError(f"--target {t.label}: no claim test entered it in the reference run; nothing would be measured{why}")  # fmt: skip


def asked(args: Any, front: Any) -> dict[str, Any]:
    """What the campaign was asked (`RESUME_KEYS`)."""
    ids = None if front.mutants is None else [m.id for m in front.mutants]
    return {"engine": front.engine, "spec": front.spec, "profile": args.profile, "seed": args.seed, "sample": args.sample,
            "targets_asked": [t.label for t in front.targets], "claims": front.claims, "mutants_asked": ids,
            "anchor_asked": args.anchor, "model": family_option(selected_families(getattr(args, "model", None)))}  # fmt: skip


def check_resume(plan: dict[str, Any], mine: dict[str, Any], out: Path) -> None:
    was = {**plan, "model": plan.get("model", DEFAULT_FAMILY)}  # a campaign started before --model: Kimi-K3's
    diff = [k for k in RESUME_KEYS if was.get(k) != mine[k]]
    if diff:
        raise UsageError(f"--resume: {out} was started with other {', '.join(diff)}; give the same arguments")


def draw(
    args: Any, front: Any, ref: dict[str, Any], reach_: dict[str, select.Reach], index: select.CodeIndex, say: Callable
) -> tuple[dict[str, Any], list[engine.Mutant]]:  # fmt: skip
    """The campaign's plan (targets, population, the sample) and its mutants."""
    targets = front.targets
    if front.mutants is not None:  # exactly these: their functions are the targets
        targets = list(dict.fromkeys([*targets, *(holder(front.root, m, front.engine) for m in front.mutants)]))
    elif targets:
        _targets_reached(targets, reach_, ref)
    else:
        targets = [engine.function_target(index.funcs[k]) for k in sorted(set().union(*(r.named for r in reach_.values())))]  # fmt: skip
        if not targets:
            raise UsageError("no claim's recorded provenance names an engine function: no default targets; give --target")  # fmt: skip
    population = engine.population(front.root, targets)
    if not population:
        raise UsageError("the targets hold no mutant of cosmic-ray's operators: a campaign with no mutants")
    if front.mutants is not None:
        chosen, dropped = sorted(front.mutants, key=lambda m: (m.file, m.line, m.col, m.operator, m.index, m.nth)), 0
        say(f"{len(chosen)} mutants asked for by --mutants (no sample drawn)")
    else:
        chosen, dropped = engine.sample(population, args.sample, args.seed, engine.Sources(front.root))
        say(f"{len(chosen)} of {len(population)} mutants drawn (seed {args.seed}) from {len(targets)} target(s)")
    if front.baseline is not None and not {m.id for m in chosen} & front.baseline_ids:
        raise UsageError(
            f"--baseline {front.baseline_path}: it shares no mutant with this campaign (other seed, sample or targets)"
        )
    plan = {
        **asked(args, front), "jobs": args.jobs, "first_kill": args.first_kill, "population": len(population),
        "incompetent": dropped, "operators": len(engine.operator_names()),
        "system": {"root": str(front.root), "version": front.version, "name": f"{front.engine}-{front.version}"},
        "targets": [{"target": t.label, "start": t.start, "end": t.end, "population": sum(m.file == t.file and t.start <= m.line <= t.end for m in population)} for t in targets],
        "reference": {"verdicts": {c: v["verdict"] for c, v in ref["claims"].items()}, "seconds": ref["seconds"], "errors": ref["errors"],
                      "properties": {u: o for u, o in ref.get("properties", {}).items() if o == "passed"},
                      "called": {c: sorted(r.called or []) for c, r in reach_.items()},
                      "named": {c: sorted(r.named) for c, r in reach_.items()},
                      "unresolved": {c: r.unresolved for c, r in reach_.items() if r.unresolved}},
    }  # fmt: skip
    return plan, chosen


# --- the mutants --mutants names ------------------------------------------------------------------------------
def mutant_ids(text: str) -> list[str]:
    """``--mutants``: ``ID,ID,...`` or ``@FILE`` (one id a line, ``#`` comments); UsageError in one line."""
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            body = path.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--mutants: cannot read {str(path)!r}: {e.strerror or e}") from None
        ids = [ln.split("#", 1)[0].strip() for ln in body.splitlines()]
    else:
        ids = [i.strip() for i in text.split(",")]
    ids = list(dict.fromkeys(i for i in ids if i))
    if not ids:
        raise UsageError(f"--mutants: {text!r} names no mutant")
    bad = [i for i in ids if not engine.MUTANT_ID.match(i)]
    if bad:
        raise UsageError(f"--mutants: {bad[0]!r} is not a mutant id (FILE.py:LINE:COL:OPERATOR:INDEX[:NTH], as mutate.json gives them)")  # fmt: skip
    return ids


def asked_mutants(root: Path, text: str, targets: list[engine.Target], package: str) -> list[engine.Mutant]:
    """The mutants ``--mutants`` names, each found in the population of its function (or of ``--target``)."""
    ids = mutant_ids(text)
    where = list(targets)
    for i in ids:
        m = engine.MUTANT_ID.match(i)
        assert m is not None
        file = engine.normalize_file(root, m["file"], package)
        funcs = engine.functions(file, (root / file).read_text(encoding="utf-8"))
        inner = engine.innermost(funcs, int(m["line"]))
        where.append(engine.function_target(inner) if inner else engine.parse_target(root, file, package))
    by_id = {m.id: m for m in engine.population(root, list(dict.fromkeys(where)))}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise UsageError(
            f"--mutants: {missing[0]!r} is not one of cosmic-ray's mutants of that line in this tree"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    return [by_id[i] for i in ids]


def holder(root: Path, m: engine.Mutant, package: str = "sglang") -> engine.Target:
    """The target a ``--mutants`` mutant is drawn from: its innermost function, or its file at module level."""
    if m.function is None:
        return engine.parse_target(root, m.file, package)
    funcs = engine.functions(m.file, (root / m.file).read_text(encoding="utf-8"))
    return engine.function_target(next(f for f in funcs if f.qualname == m.function))


def mutant_of(spec: dict[str, Any]) -> engine.Mutant:
    return engine.Mutant(**{**spec, "node": tuple(spec["node"])})


def spec_of(m: engine.Mutant) -> dict[str, Any]:
    return asdict(m)
