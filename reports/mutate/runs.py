"""Running the checks on a worker's tree through the one runner, and what a mutant's outcome is.

Every run is `reports.core.runner.run` on ``System(engine, TREE)`` (its node ids, the campaign's pytest plugin
``deferlab.properties.probes`` by name where a run needs it, its timeout), started by the campaign's launcher
(warm forks, `reports.mutate.fork`), and judged from its `RunRecord`: per claim its verdict and failure
signature (`select.signature_of`), per test its outcome and failure line. The reference runs each unit alone
on a tree whose functions carry probes, so selection knows which functions each unit entered. The units
are every test the suite runs on real code: claim tests (keyed by claim) and ``real_code`` properties (keyed
``P:<test>``, `select.unit_of_node`).

A mutant is *killed* when a selected claim's verdict or failure signature differs from the reference's, or
a selected test that passed there fails or errors; *killed at load* when nothing recorded a verdict or a
passing test and the tree no longer loads (`runner.check_loads`); *timeout* when the run did not end in
time; otherwise *survived*. A harness failure of our own is ``error`` (retried by ``--resume``).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deferlab.reference.system.systems import DEFAULT_FAMILY, LABELS, System, claim_key
from deferlab.reports.core import process, runner
from deferlab.reports.core.executor import each
from deferlab.reports.core.runner import Launcher, LoadError, Request, RunRecord
from deferlab.reports.core.sides import answered_by, selected_families
from deferlab.reports.mutate import columns, engine, select

OUTCOMES = ("killed", "killed at load", "timeout", "survived", "error")
PROBES = "deferlab.properties.probes"  # the campaign's pytest plugin, named (the CLI never imports the checks)
# its switches (`properties.probes`): the probes' hits, --first-kill's reference, a collection, unit-test outcomes
PROBES_ENV, STOP_ENV = "DEFERLAB_MUTATE_PROBES", "DEFERLAB_MUTATE_STOP_ON"
COLLECT_ENV, OUTCOMES_ENV = "DEFERLAB_MUTATE_COLLECT", "DEFERLAB_MUTATE_OUTCOMES"
WARM_ENV = "DEFERLAB_MUTATE_WARM"
INCOMPETENT = "the mutation changes nothing or does not compile (cosmic-ray's incompetent)"
CONTROL = "(control)"  # the unmutated tree, run as a mutant is: every unit, warm where the mutants are
STOP = threading.Event()  # set when the command stops: no new process starts, and a killed run is no outcome
OUTSIDE_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)  # a stop sent to the run, not a mutant's crash


class Interrupted(Exception):
    """The campaign is stopping: this run was cut short by us, so it says nothing about the mutant."""


def _warm_default(engine_name: str) -> bool:
    """Warm forks unless ``DEFERLAB_MUTATE_WARM=0``, for an engine whose plugin says a fork of a loaded server
    runs as a new process would (`EngineFacts.warm_fork`: not vLLM, whose fork's load record differs from the
    server's on every run of 0.33.0, so each run paid the server and the guard, then ran cold anyway)."""
    from deferlab.reference.system.engines import engine

    return os.environ.get(WARM_ENV, "1").strip() != "0" and engine(engine_name).warm_fork


@dataclass
class Harness:
    """How a campaign runs things on a tree of ``engine``: the checks through `runner.run` (started by
    ``launcher``), the load check (`runner.check_loads`) and a checkout's own unit tests
    (`runner.run_with_engine`). Tests give a fake engine's."""

    engine: str
    profile: str = "ci"
    launcher: Launcher = runner.cold
    warm: bool | None = None  # None: `_warm_default`
    family: str = DEFAULT_FAMILY  # the model families the checks judge (``--model``: `System.family`)

    def __post_init__(self) -> None:
        self.warm = _warm_default(self.engine) if self.warm is None else self.warm

    def use_family(self, family: str) -> None:
        """Judge ``family`` (one name, a list, ``all``): its claim columns, its paths' modules probed; no warm forks
        for another family than Kimi-K3 (a server warms the engine without the companions a family path loads)."""
        self.family = family
        if family != DEFAULT_FAMILY:
            self.warm = False

    @property
    def package(self) -> str:
        return self.engine  # the engine's top-level package in its tree

    def modules(self) -> list[str]:
        """The engine modules the reference probes: the driver's, and the family paths' (`select.family_modules`)."""
        return select.probed_modules(self.engine) + select.family_modules(self.engine, self.family)

    def system(self, tree: Path | str) -> System:
        return System(self.engine, str(tree), family=self.family)

    def suite_root(self) -> Path:
        """Where the checks' node ids are anchored on this machine (a cluster worker re-anchors them here)."""
        return runner.suite_path()

    def run(self, request: Request, scratch: Path) -> RunRecord:
        """``request`` in ``scratch`` (its log and results there); `Interrupted` when stopping."""
        if STOP.is_set():
            raise Interrupted()
        (scratch / "pytest.log").unlink(missing_ok=True)
        record = runner.run(request, work=scratch, launcher=self.launcher)
        if STOP.is_set():
            raise Interrupted()
        return record

    def claims(self, tree: Path, nodes: Sequence[str], scratch: Path, timeout: float, env: dict[str, str] | None = None) -> RunRecord:  # fmt: skip
        """The tests ``nodes`` (absolute node ids) on ``tree``; ``env``: the plugin's switches (then it is loaded)."""
        request = Request(self.system(tree), self.profile, nodes=tuple(nodes), timeout=timeout,
                          plugins=(PROBES,) if env else (), env=env or {})  # fmt: skip
        return self.run(request, scratch)

    def collect(self, tree: Path, scratch: Path, timeout: float) -> tuple[str, list[str]]:
        """(rootdir, node ids relative to it) of every test the system's shipped checks run on ``tree``: claim
        tests and ``real_code`` properties (the campaign's plugin writes them, after the suite's deselection)."""
        out = scratch / "collect.json"
        out.unlink(missing_ok=True)
        request = Request(self.system(tree), self.profile, collect_only=True, timeout=timeout,
                          plugins=(PROBES,), env={COLLECT_ENV: str(out)})  # fmt: skip
        record = self.run(request, scratch)
        doc = json.loads(out.read_text()) if out.is_file() else {"nodes": []}
        # its claim tests of claims no column of the engine and families has a verdict for skip on it: not units
        families = selected_families(self.family)
        units = {n: select.unit_of_node(n) for n in doc["nodes"]}
        nodes = [n for n, u in units.items() if select.is_property(u) or answered_by(self.engine, families, u)]
        if not any(select.claim_of_node(n) for n in nodes):
            why = record.error or last_line(record.log) or f"pytest exited {record.rc}"
            raise RuntimeError(f"collecting the claim tests on {tree} found none ({why})")
        return doc["rootdir"], nodes

    def load_error(self, tree: Path | str, timeout: float = 600) -> str | None:
        """None when ``tree`` loads, else the loader's one line (`check`)."""
        if STOP.is_set():
            raise Interrupted()
        try:
            self.check(tree, timeout)
        except LoadError as e:
            return str(e)
        return None

    def check(self, tree: Path | str, timeout: float) -> None:
        runner.check_loads(self.system(tree), timeout=timeout)

    def unit_tests(self, tree: Path, args: Sequence[str], cwd: Path, timeout: float, env: dict[str, str]) -> tuple[int | None, str]:  # fmt: skip
        """pytest ``args`` in a child that loaded ``tree`` first (`with_engine`): (exit status or None at the
        timeout, the last line of its output); `LoadError` when the tree does not load."""
        if STOP.is_set():
            raise Interrupted()
        rc, out, err = self.with_engine(tree, args, cwd, timeout, env)
        return rc, last_line(out + err)

    def with_engine(self, tree: Path, args: Sequence[str], cwd: Path, timeout: float, env: dict[str, str]) -> tuple[int | None, str, str]:  # fmt: skip
        return runner.run_with_engine(self.system(tree), args, cwd=cwd, timeout=timeout, env=env)


def last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1][:300]


def claims_of(record: RunRecord) -> dict[str, dict[str, str]]:
    """Per claim of the run's system: its verdict, failure signature and evidence. A claim with verdicts in more
    than one column (a family's served paths, ``--model``) joins them, each named by its column
    (``qwen3-vl:VLLM=fails; qwen3-vl:VLLM host-normalized=holds``), so a mutant that moves one column is seen."""
    by_claim: dict[str, list[dict[str, Any]]] = {}
    for r in record.mine():
        by_claim.setdefault(str(r["id"]), []).append(r)
    out = {}
    for cid, rows in by_claim.items():
        if len(rows) == 1:
            r = rows[0]
            out[cid] = {"verdict": str(r["verdict"]), "signature": select.signature_of(r),
                        "evidence": str(r.get("evidence", ""))}  # fmt: skip
            continue
        named = sorted(rows, key=lambda r: (str(r.get("policy")) not in LABELS.values(), str(r.get("policy"))))
        out[cid] = {
            "verdict": "; ".join(f"{r.get('policy')}={r['verdict']}" for r in named),
            "signature": " || ".join(f"{r.get('policy')}: {select.signature_of(r)}" for r in named if select.signature_of(r)),
            "evidence": " || ".join(f"{r.get('policy')}: {r.get('evidence', '')}" for r in named),
        }  # fmt: skip
    return out


@dataclass
class Verdict:
    """A mutant's outcome and why: the units (claims, properties) that saw it, with what each saw."""

    outcome: str
    killed_by: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


def judge(
    reference: dict[str, Any], record: RunRecord, units: Sequence[str], nodes: dict[str, list[str]],
    load_error: Callable[[], str | None],
) -> Verdict:  # fmt: skip
    """Compare ``record`` with the reference's claims and tests, for the units that ran (``nodes``: unit -> its
    node ids). A claim unit sees the mutant when its verdict or signature changed, or one of its tests that
    passed in the reference did not pass; a property unit when one of its tests that passed there did not.
    ``load_error()`` (asked only when nothing was recorded): None when the mutant tree still loads."""
    if record.timed_out:
        return Verdict("timeout", reasons={"(run)": f"no end within the timeout ({record.seconds} s)"})
    signalled = record.rc is not None and -record.rc in OUTSIDE_SIGNALS
    if signalled or STOP.is_set() or process.stopping():  # stopped from outside: no verdict on the mutant
        why = f"the claims process was stopped from outside (signal {-record.rc})" if signalled else (
            "the campaign was stopping")  # fmt: skip
        return Verdict("error", reasons={"(harness)": f"{why}: not a verdict; --resume runs it again"})
    if not record.wrote:
        error = load_error()
        if error is not None:
            return Verdict("killed at load", reasons={"(load)": error})
        return Verdict("killed", reasons={"(run)": f"the claims process died (exit {record.rc}): {last_line(record.log)}"})  # fmt: skip
    v, got_claims, tests = Verdict("survived"), claims_of(record), record.tests
    for unit in units:
        mine = nodes.get(unit, [])
        if tests and not any(n in tests for n in mine):
            continue  # its test never started (--first-kill stopped at an earlier kill)
        broke = [n for n in mine if reference["tests"].get(n) == "passed" and (n in tests or not tests) and getattr(tests.get(n), "outcome", "") != "passed"]  # fmt: skip
        failed = ""
        if broke:
            t = tests.get(broke[0])
            failed = f"its test {t.outcome if t else 'did not finish'}: {t.message if t else ''}".strip()
        ref = reference["claims"].get(unit)
        if select.is_property(unit) or ref is None:
            if failed and select.is_property(unit):
                v.reasons[unit] = failed
            continue
        got = got_claims.get(unit, {"verdict": "not-run", "signature": ""})
        if tests and not all(n in tests for n in mine) and reference.get("rows"):
            got, ref = columns.ran_columns(
                reference, record, unit
            )  # --first-kill stopped inside it: its run columns only
        if got["verdict"] != ref["verdict"]:
            v.reasons[unit] = f"verdict {ref['verdict']} -> {got['verdict']}"
        elif got["signature"] != ref["signature"]:
            v.reasons[unit] = f"failure signature {ref['signature'][:160]!r} -> {got['signature'][:160]!r}"
        if failed and (got["verdict"] == "not-run" or unit not in v.reasons):  # a crash says more than "not-run"
            v.reasons[unit] = failed
    if not record.recorded():
        error = load_error()
        if error is not None:
            return Verdict("killed at load", reasons={"(load)": error})
        if not v.reasons:
            v.reasons["(run)"] = f"no claim recorded a verdict (pytest exit {record.rc}): {last_line(record.log)}"
    if v.reasons:
        v.outcome = "killed"
        v.killed_by = sorted((c for c in v.reasons if not c.startswith("(")), key=claim_key)
    return v


# --- worker slots: a private tree copy and a scratch folder each -----------------------------------------------------
@dataclass
class Slot:
    tree: engine.WorkTree
    scratch: Path
    probed: bool = False  # whether its tree carries the reference's probes

    def rebuild(self) -> None:
        """A fresh copy of the tree in place of this one (after a mutant could not be taken out)."""
        source, parent, package = self.tree.source, self.tree.path.parent, self.tree.package
        self.tree.remove()
        self.tree, self.probed = engine.WorkTree.make(source, parent, package), False


class Pool:
    """``jobs`` worker slots (a tree made once, on first use, and a scratch folder each) lent to the runs of the
    one local scheduler (`reports.core.executor.each`).

    Why the slots stay here and the executor gains none: an executor task is one picklable runner call that can
    run anywhere (a cluster worker makes its own tree from the mutated text: `reports.mutate.remote`), while a
    slot is this machine's mutable state that several runs in a row reuse (apply, run, restore), so it belongs to
    the campaign, not to the protocol every command shares. The threads, their order, and how a stop kills the
    children are the executor's."""

    def __init__(self, source: Path, work: Path, jobs: int, package: str) -> None:
        self.source, self.work, self.jobs, self.package = source, work, jobs, package
        self.slots: queue.Queue[Slot | None] = queue.Queue()
        self.made: list[Slot] = []
        for _ in range(jobs):
            self.slots.put(None)

    def _task(self, fn: Callable[[Slot, Any], Any], item: Any) -> Any:
        slot = self.slots.get()
        if slot is None:
            tree = engine.WorkTree.make(self.source, self.work, self.package)
            slot = Slot(tree, Path(tempfile.mkdtemp(prefix="scratch-", dir=self.work)))
            self.made.append(slot)
        try:
            return fn(slot, item)
        finally:
            self.slots.put(slot)

    def map(self, fn: Callable[[Slot, Any], Any], items: Iterable[Any], done: Callable[[Any, Any], None]) -> None:
        """``done(item, result)`` in the calling thread as each finishes. Stopped (Ctrl-C, SIGTERM, an error):
        no new run starts (`STOP`), every child is killed until each worker has returned, then the stop goes on."""
        each(items, lambda item: self._task(fn, item), done, self.jobs, on_stop=lambda _e: STOP.set())


# --- the reference ----------------------------------------------------------------------------------------------------
def part(label: str, v: Verdict, seconds: float) -> dict[str, Any]:
    """A run's verdict as a mutant's record holds it: at its top ("" label) or under its label."""
    got = {"outcome": v.outcome, "killed_by": v.killed_by, "reasons": v.reasons, "seconds": seconds}
    return {label: got} if label else got


def absolute(reference: dict[str, Any], nodes: Iterable[str]) -> list[str]:
    """Node ids as the runner takes them: under the rootdir they were collected in."""
    return [f"{reference['rootdir']}/{n}" for n in nodes]


def units_of(reference: dict[str, Any]) -> list[str]:
    """The reference's units in claim order: its claims with a verdict, then its passing properties."""
    props = [u for u, o in reference.get("properties", {}).items() if o == "passed"]
    return sorted([*reference["claims"], *props], key=claim_key)


# --- one mutant, and the control -------------------------------------------------------------------------------------
@dataclass
class Campaign:
    """What every mutant's run needs: the reference, the probes' reach, the sources, the per-run timeout,
    ``--first-kill``'s reference file, the mutants run with every unit too, the anchor's run of a mutated file."""

    harness: Harness
    reference: dict[str, Any]
    reach: dict[str, select.Reach]
    sources: engine.Sources
    timeout: Callable[[list[str]], float]
    stop_on: Path | None = None
    both_ways: set[str] = field(default_factory=set)
    anchor: Callable[[Slot, str], dict[str, Any]] | None = None  # `anchor.run_mutant` with its reference
    how: Callable[[Slot], str] = lambda slot: "cold"  # how a slot's last run ran (the launcher's count)

    def nodes(self, units: list[str]) -> list[str]:
        """The node ids of ``units``, quick tests first (relative to the reference's rootdir)."""
        nodes_of = select.nodes_by_unit(self.reference["nodes"])
        return sorted((n for u in units for n in nodes_of.get(u, [])), key=lambda n: self.reference["durations"].get(n, 30.0))  # fmt: skip

    def verdict(self, record: RunRecord, units: list[str], load_error: Callable[[], str | None]) -> Verdict:
        return judge(self.reference, record, units, select.nodes_by_unit(self.reference["nodes"]), load_error)

    def judged(self, slot: Slot, units: list[str]) -> tuple[Verdict, float]:
        """``units`` on ``slot``'s tree, quick tests first, judged."""
        nodes = self.nodes(units)
        env = {STOP_ENV: str(self.stop_on)} if self.stop_on else None
        record = self.harness.claims(slot.tree.path, absolute(self.reference, nodes), slot.scratch, self.timeout(nodes), env)  # fmt: skip
        return self.verdict(record, units, lambda: self.harness.load_error(slot.tree.path)), record.seconds

    def runs_of(self, m: engine.Mutant) -> tuple[list[str] | None, list[tuple[str, list[str]]]]:
        """(the units the probes chose for ``m``, None: they could not say; its runs: label -> units), the first
        run's label "" (the chosen units, or every one), then "all_claims" when it is measured both ways."""
        chosen = select.claims_for(f"{m.file}:{m.function}" if m.function else None, self.reach)
        every = units_of(self.reference)
        return chosen, [("", chosen or every)] + ([("all_claims", every)] if m.id in self.both_ways else [])

    def mutant(self, slot: Slot, m: engine.Mutant) -> dict[str, Any]:
        """Apply, run the selected units (and every unit when measuring selection), judge, restore."""
        rec: dict[str, Any] = {**asdict(m), "id": m.id, "node": list(m.node)}
        chosen, runs = self.runs_of(m)
        try:
            code = self.sources.mutated(m)
            if code is None:
                raise ValueError(INCOMPETENT)
            rec["diff"] = engine.diff(self.sources.text(m.file), code, m.file)
            slot.tree.apply(m.file, code)
            try:
                for label, wanted in runs:
                    v, seconds = self.judged(slot, wanted)
                    rec.update(part(label, v, seconds))
                if self.anchor is not None:  # the checkout's own unit tests of the file, on the same mutant
                    rec["anchor"] = self.anchor(slot, m.file)
            finally:
                slot.tree.restore(m.file)
            rec["claims_run"] = chosen  # the units run; None: every one (probes could not say)
        except Interrupted:
            raise
        except Exception as e:  # a harness failure of ours: recorded, retried by --resume
            if slot.tree.swapped:  # a tree that could not be restored is made again, never reused mutated
                slot.rebuild()
            rec.update(outcome="error", killed_by=[], reasons={"(harness)": f"{type(e).__name__}: {e}"[:400]}, seconds=0)  # fmt: skip
        return rec

    def control(self, slot: Slot) -> dict[str, Any]:
        """Every unit on the unmutated tree, run and judged as a mutant is: it must survive. A control that is
        "killed" names the units whose outcome changed with nothing mutated (warm runs that disagree with the
        cold reference, a claim that is not deterministic): their kills are suspect."""
        v, seconds = self.judged(slot, units_of(self.reference))
        how = "warm" if self.how(slot) == "warm" else "cold"
        return {"outcome": v.outcome, "seen_by": v.killed_by, "reasons": v.reasons, "seconds": seconds, "run": how}
