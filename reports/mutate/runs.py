"""Running the claims on a tree: the probed reference run, one mutant's run, and what its outcome is.

Why subprocesses: a process holds one SGLang (its modules cannot be unloaded),
and a mutant may hang or crash; each run is ``pytest <claim tests> --sglang
TREE`` in its own process group with a timeout, so a hang is killed and
recorded as ``timeout`` and a crash is an outcome, never a lost campaign. The
reference runs each claim test alone on a tree whose functions carry probes
(`mutate_select.instrument`), so selection knows which functions each claim
entered. The units run are every test the suite collects on real code: claim
tests (keyed by claim) and ``real_code`` properties (keyed ``P:<test>``,
`mutate_select.unit_of_node`). A mutant is *killed* when a
selected claim's verdict or failure signature (its recorded signature set where
the row carries one, else `reports.core.grouping.failure_signature` of its evidence:
`mutate_select.signature_of`) differs from the reference's, or a selected test
(claim or property) that passed there fails or errors; *killed at load* when
nothing recorded a verdict or a passing test and the mutant tree no longer loads
(`reports.versions.matrix.preflight`); otherwise *survived*. A harness failure
of our own is ``error`` (retried by ``--resume``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.seam import SGLANG_LABEL
from deferlab.reports.mutate import engine, select
from deferlab.reports.report import claims as claims_io
from deferlab.reports.versions.matrix import SGLangLoadError, claims_command, one_line, preflight

WARM_ENV = "DEFERLAB_MUTATE_WARM"
OUTCOMES = ("killed", "killed at load", "timeout", "survived", "error")
_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$")
_LIVE: set[subprocess.Popen] = set()
_WARM: set[Any] = set()  # warm servers with a run in flight (Ctrl-C kills their children)
_LIVE_LOCK = threading.Lock()
STOP = threading.Event()  # set on Ctrl-C: no new claims process starts, and a killed one is not an outcome


class Interrupted(Exception):
    """The campaign is stopping: this run was cut short by us, so it says nothing about the mutant."""


@dataclass
class Runner:
    """How to run claim tests on a tree: the real suite on SGLang (tests swap in a fake engine's script)."""

    profile: str = "ci"
    package: str = "sglang"
    # Runs fork a warm interpreter (`reports.mutate.warm`) unless DEFERLAB_MUTATE_WARM=0; a failed warm run goes cold.
    warm: bool = field(default_factory=lambda: os.environ.get(WARM_ENV, "1").strip() != "0")
    engine: str = "sglang"  # deferlab.impl.<engine>.sources loads the tree in a warm server
    servers: dict[str, Any] = field(default_factory=dict, repr=False)  # scratch folder -> its slot's server
    warm_runs: list[str] = field(default_factory=list, repr=False)  # "warm" / "cold: why" per run, in order
    warm_source: Path | None = None  # the unmutated tree plain runs' servers load (set by `reference`)

    def modules(self) -> list[str]:
        """The engine modules whose functions get probes in the reference run (the driver's)."""
        return select.driver_modules()

    def suite_nodes(self, nodes: Sequence[str]) -> list[str]:
        """Node ids as paths under the installed or checked-out suite (``.../claims/test_x.py::test[...]``)."""
        base = claims_io.suite_path() / "claims"
        return [str(base / n.rsplit("claims/", 1)[-1]) for n in nodes]

    def command(self, tree: Path, nodes: Sequence[str] | None, *, plugin: bool = False) -> list[str]:
        """`reports.versions.matrix.claims_command` on ``tree`` with the suite path replaced by ``nodes``
        (None: collect only), and with ``plugin`` the probes' and first-kill plugin (`mutate_select`)."""
        cmd = claims_command(str(tree), self.profile)
        where = cmd.index(str(claims_io.suite_path() / "claims"))
        cmd[where : where + 1] = self.suite_nodes(nodes) if nodes is not None else [cmd[where], "--collect-only"]
        return cmd + ["-rfE", *(["-p", "deferlab.reports.mutate.select"] if plugin else [])]

    def load_check(self, tree: Path, timeout: float) -> None:
        """Raise `SGLangLoadError` when ``tree`` does not load (the mutant broke an import)."""
        preflight(str(tree), timeout=timeout)


@dataclass
class Run:
    """What one pytest process recorded: per claim its verdict and failure signature, per test its outcome."""

    claims: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> verdict, signature, evidence
    rows: list[dict[str, Any]] = field(default_factory=list)
    tests: dict[str, str] = field(default_factory=dict)  # node id -> passed | failed | skipped
    messages: dict[str, str] = field(default_factory=dict)  # node id -> pytest's one-line reason
    durations: dict[str, float] = field(default_factory=dict)  # node id -> seconds inside the test
    rc: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    recorded: bool = False
    wrote: bool = False  # whether the process wrote a results file at all (a killed one does not)
    hits: list[int] = field(default_factory=list)  # probe ids the process entered (the reference only)
    tail: str = ""


def kill_all() -> None:
    """End every claims process this module started (Ctrl-C on a campaign), by process group."""
    with _LIVE_LOCK:
        for p in list(_LIVE):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
        for server in list(_WARM):
            server.kill_child()


def run_claims(
    runner: Runner, tree: Path, nodes: Sequence[str] | None, scratch: Path, timeout: float, *, trace: bool = False,
    stop_on: Path | None = None,
) -> Run:  # fmt: skip
    """The claim tests ``nodes`` on ``tree`` in a fresh process (its own group, killed at ``timeout``); ``trace``:
    record the probes it hits; ``stop_on``: a reference file, to stop at the first claim that differs from it."""
    results = scratch / "results"
    shutil.rmtree(results, ignore_errors=True)
    scratch.mkdir(parents=True, exist_ok=True)
    # COLUMNS: pytest drops a failure's message from its one-line summary when the line is wider than the terminal
    env = {**os.environ, "DEFERLAB_RESULTS_DIR": str(results), "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "1000"}
    if trace:
        env[select.PROBES_ENV] = str(scratch / "probes.json")
        (scratch / "probes.json").unlink(missing_ok=True)
    if stop_on is not None:
        env[select.STOP_ENV] = str(stop_on)
    out = Run()
    t0 = time.perf_counter()
    if STOP.is_set():
        raise Interrupted()
    cmd = runner.command(tree, nodes, plugin=trace or stop_on is not None)
    done = _run_warm(runner, tree, cmd, env, scratch, timeout, trace) if runner.warm else None
    if done is not None:
        out.rc, out.timed_out = done.rc, done.timed_out
    else:
        _run_cold(cmd, env, scratch, timeout, out)
    if STOP.is_set():
        raise Interrupted()
    out.seconds = round(time.perf_counter() - t0, 2)
    _read_run(out, scratch, results)
    if trace and (scratch / "probes.json").is_file():
        out.hits = json.loads((scratch / "probes.json").read_text())
    return out


def _run_warm(
    runner: Runner, tree: Path, cmd: list[str], env: dict[str, str], scratch: Path, timeout: float, trace: bool
) -> Any:
    """``cmd`` (``python -m pytest ...``) forked from this slot's warm server; None: run it cold (no server, the
    server died, or the child's load record differed from the server's: `reports.mutate.warm`).

    The server's load is the record a run's load must match: for probed runs (the reference) the probed tree
    itself, for the rest the campaign's unmutated source (`Runner.warm_source`), so a mutant that changes what
    loads (a failed body, a new stand-in) runs cold, where the answer is the truth."""
    from deferlab.reports.mutate import warm

    if cmd[1:3] != ["-m", "pytest"]:
        runner.warm_runs.append("cold: not a pytest command")
        return None
    key = f"{scratch}|{'probed' if trace else 'plain'}"
    try:
        server = runner.servers.get(key)
        if server is None:
            spec = str(tree if trace or runner.warm_source is None else runner.warm_source)
            preload = {warm.PRELOAD_ENV: f"{select.__name__}:install_probe"} if trace else {}
            with _env(preload):  # a probed tree calls its probes at import: the builtin must be there
                server = runner.servers[key] = warm.WarmServer(runner.engine, spec, log=scratch / "warm.log")
        with _LIVE_LOCK:
            _WARM.add(server)
        try:
            (scratch / "pytest.log").write_text("")
            got = server.run(cmd[3:], env=env, cwd=scratch, log=scratch / "pytest.log", timeout=timeout, spec=str(tree))
        finally:
            with _LIVE_LOCK:
                _WARM.discard(server)
    except warm.WarmUnavailable as e:
        runner.servers.pop(key, None)
        runner.warm_runs.append(f"cold: {e}")
        return None
    if got.rc == warm.DIFFERS:
        runner.warm_runs.append("cold: the load record differed from the warm server's")
        return None
    runner.warm_runs.append("warm")
    return got


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Any:
    """``os.environ`` with ``values`` set for the block (the warm server inherits it)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_cold(cmd: list[str], env: dict[str, str], scratch: Path, timeout: float, out: Run) -> None:
    out.rc, out.timed_out = run_process(cmd, env=env, cwd=scratch, log=scratch / "pytest.log", timeout=timeout)


def run_process(
    cmd: list[str], *, env: dict[str, str], cwd: Path, log: Path, timeout: float
) -> tuple[int | None, bool]:
    """``cmd`` in its own process group, output to ``log``, registered so Ctrl-C (`kill_all`) ends it, killed with
    its group at ``timeout``: (exit status, timed out). The claims runs and the anchor's unit-test runs use it."""
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        with _LIVE_LOCK:
            _LIVE.add(proc)
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, True
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(proc)


def _read_run(out: Run, scratch: Path, results: Path) -> None:
    """What the finished (or killed) run left: pytest's summary lines and the results file."""
    text = (scratch / "pytest.log").read_text(errors="replace")
    out.tail = "\n".join(text.strip().splitlines()[-15:])
    for line in text.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            out.messages[m.group(2)] = (m.group(3) or m.group(1)).strip()[:400]
    try:
        doc = claims_io.load_results(results)
    except ValueError:
        doc = None
    if doc is not None:
        out.wrote = True
        out.rows = [r for r in doc["claims"] if r["policy"] == SGLANG_LABEL]
        for r in out.rows:
            out.claims[r["id"]] = {"verdict": r["verdict"], "signature": select.signature_of(r), "evidence": r.get("evidence", "")}  # fmt: skip
        out.tests = {p["name"]: p["outcome"] for p in doc.get("properties", [])}
        out.durations = {p["name"]: float(p.get("seconds") or 0) for p in doc.get("properties", [])}
        out.recorded = any(c["verdict"] != "not-run" for c in out.claims.values()) or any(
            o == "passed" and not select.claim_of_node(n) for n, o in out.tests.items()
        )  # a verdict, or a property test that passed (property units record no verdict)


def collect(runner: Runner, tree: Path, scratch: Path, timeout: float) -> list[str]:
    """The node ids of every test the suite runs on ``tree`` (pytest --collect-only): claim tests and
    ``real_code`` properties (`mutate_select.unit_of_node` keys each)."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "DEFERLAB_RESULTS_DIR": str(scratch / "collect")}
    proc = subprocess.run(
        runner.command(tree, None), capture_output=True, text=True, env=env, cwd=scratch, timeout=timeout, check=False
    )
    nodes = [ln.strip() for ln in proc.stdout.splitlines() if "::" in ln and not ln.startswith((" ", "<"))]
    if not any(select.claim_of_node(n) for n in nodes):
        why = one_line(proc.stdout + proc.stderr) or f"pytest exited {proc.returncode}"
        raise RuntimeError(f"collecting the claim tests on {tree} found none ({why})")
    return nodes


@dataclass
class Verdict:
    """A mutant's outcome and why: the units (claims, properties) that saw it, with what each saw."""

    outcome: str
    killed_by: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


def judge(
    reference: dict[str, Any], run: Run, claims: Sequence[str], nodes: dict[str, list[str]],
    load_check: Callable[[], str | None],
) -> Verdict:  # fmt: skip
    """Compare ``run`` with the reference's claims and tests (only the units ``claims``, the ones that ran:
    claim ids and ``P:`` property units; ``nodes``: unit -> its node ids).

    A claim unit sees the mutant when its verdict or signature changed, or one of its tests that passed in the
    reference did not pass; a property unit when one of its tests that passed there did not pass.
    ``load_check()``: None when the mutant tree still loads, else its one-line error (asked only when no
    selected unit recorded anything)."""
    if run.timed_out:
        return Verdict("timeout", reasons={"(run)": f"no end within the timeout ({run.seconds} s)"})
    v = Verdict("survived")
    if not run.wrote:
        error = load_check()
        if error is not None:
            return Verdict("killed at load", reasons={"(load)": error})
        return Verdict("killed", reasons={"(run)": f"the claims process died (exit {run.rc}): {one_line(run.tail)}"})
    for cid in claims:
        ref = reference["claims"].get(cid)
        got = run.claims.get(cid, {"verdict": "not-run", "signature": ""})
        if run.tests and not any(n in run.tests for n in nodes.get(cid, [])):
            continue  # its test never started (--first-kill stopped at an earlier kill)
        if select.is_property(cid):
            broke = [n for n in nodes.get(cid, []) if reference["tests"].get(n) == "passed" and run.tests.get(n, "failed") != "passed"]  # fmt: skip
            if broke:
                why = message_for(run, broke[0])
                v.reasons[cid] = f"its test {run.tests.get(broke[0], 'did not finish')}: {why}".strip()
            continue
        if ref is None:
            continue  # no reference verdict to compare with
        if got["verdict"] != ref["verdict"]:
            v.reasons[cid] = f"verdict {ref['verdict']} -> {got['verdict']}"
        elif got["signature"] != ref["signature"]:
            v.reasons[cid] = f"failure signature {ref['signature'][:160]!r} -> {got['signature'][:160]!r}"
        for node in nodes.get(cid, []):
            if reference["tests"].get(node) == "passed" and run.tests.get(node, "failed") != "passed":
                why = message_for(run, node)
                failed = f"its test {run.tests.get(node, 'did not finish')}: {why}".strip()
                if got["verdict"] == "not-run" or cid not in v.reasons:  # the crash says more than "not-run"
                    v.reasons[cid] = failed
    if not run.recorded:
        error = load_check()
        if error is not None:
            return Verdict("killed at load", reasons={"(load)": error})
        if not v.reasons:
            v.reasons["(run)"] = f"no claim recorded a verdict (pytest exit {run.rc}): {one_line(run.tail)}"
    if v.reasons:
        v.outcome = "killed"
        v.killed_by = sorted((c for c in v.reasons if not c.startswith("(")), key=select.claim_order)
    return v


def message_for(run: Run, node: str) -> str:
    """pytest's one-line reason for ``node`` from the run's summary, whose node ids may be printed relative to
    another directory (the claims process runs in its scratch folder): matched on the file's name and the rest."""
    if node in run.messages:
        return run.messages[node]
    tail = node.rsplit("/", 1)[-1]
    return next((m for n, m in run.messages.items() if n in node or n.rsplit("/", 1)[-1] == tail), "")


def load_error(runner: Runner, tree: Path, timeout: float) -> str | None:
    """`Runner.load_check` as a value: None when ``tree`` loads, else the loader's one line."""
    try:
        runner.load_check(tree, timeout)
    except SGLangLoadError as e:
        return one_line(str(e))
    except subprocess.TimeoutExpired:
        return f"loading did not finish within {timeout} s"
    return None


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
        self.tree = engine.WorkTree.make(source, parent, package)
        self.probed = False


class Pool:
    """``jobs`` worker threads, each holding a slot (its tree made once, on first use), running tasks."""

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
        """``done(item, result)`` in the calling thread as each finishes; Ctrl-C kills every claims process."""
        with ThreadPoolExecutor(max_workers=self.jobs) as ex:
            futures = {ex.submit(self._task, fn, it): it for it in items}
            try:
                for f in as_completed(futures):
                    done(futures[f], f.result())
            except BaseException:
                STOP.set()
                ex.shutdown(wait=False, cancel_futures=True)
                kill_all()
                raise


def reference(
    pool: Pool, runner: Runner, claims: list[str] | None, timeout: float, say: Callable,
    probes: dict[str, tuple[str, dict[int, str]]],
) -> dict:  # fmt: skip
    """Each unit's tests alone (a claim test; a property's nodes together) on an unmutated copy carrying ``probes``
    (file -> instrumented text, id -> function): verdicts, signatures, test outcomes, the functions each unit
    entered, seconds. ``claims``: only these units (claim ids, ``P:`` names); None: every one collected. A
    property none of whose tests passed here can see no mutant and is dropped. The probes are taken out of
    every worker tree afterwards."""
    nodes: list[str] = []
    pool.map(lambda slot, _: nodes.extend(collect(runner, slot.tree.path, slot.scratch, timeout)), [0], lambda *a: None)
    every = list(nodes)
    nodes = [n for n in nodes if claims is None or select.unit_of_node(n) in claims]
    units = select.nodes_by_unit(nodes)
    unknown = [c for c in claims or [] if select.is_property(c) and c not in units]
    if unknown:
        known = ", ".join(u for u in select.nodes_by_unit(every) if select.is_property(u)) or "none"
        raise UsageError(f"--claims: no property {', '.join(unknown)} runs on real code (the suite's: {known})")
    runner.warm_source = pool.source
    doc: dict[str, Any] = {"claims": {}, "rows": [], "tests": {}, "called": {}, "seconds": {}, "durations": {}}
    doc["errors"] = []
    doc.update(nodes=nodes, instrumented=sorted(probes), properties={})
    key = {n: k for _, ids in probes.values() for n, k in ids.items()}

    def one(slot: Slot, unit: str) -> Run:
        if not slot.probed:
            for file, (text, _) in probes.items():
                slot.tree.apply(file, text)
            slot.probed = True
        return run_claims(runner, slot.tree.path, units[unit], slot.scratch, timeout, trace=True)

    def done(unit: str, run: Run) -> None:
        share = run.seconds / max(1, len(units[unit]))  # one process for the unit's nodes: its start shared
        for node in units[unit]:
            doc["seconds"][node] = round(share, 2)
            doc["durations"][node] = run.durations.get(node, share)
        doc["tests"].update(run.tests)
        doc["called"].setdefault(unit, set()).update(key[h] for h in run.hits if h in key)
        if select.is_property(unit):
            outcomes = [run.tests.get(n, "did not finish") for n in units[unit]]
            doc["properties"][unit] = "passed" if "passed" in outcomes else (outcomes[0] if outcomes else "not-run")
            say(f"reference {unit}: {', '.join(outcomes)} in {run.seconds} s")
            return
        got = run.claims.get(unit)
        if got is None or got["verdict"] == "not-run" or run.timed_out:
            why = "timed out" if run.timed_out else one_line(run.tail)
            doc["errors"].append(f"{unit}: recorded no verdict ({why})")
        else:
            doc["claims"][unit] = got
            doc["rows"] += [r for r in run.rows if r["id"] == unit]
        say(f"reference {unit}: {got['verdict'] if got else 'nothing recorded'} in {run.seconds} s")

    try:
        pool.map(one, list(units), done)
    finally:
        for slot in pool.made:
            for file in probes if slot.probed else ():
                slot.tree.restore(file)
            slot.probed = False
        for key in [k for k in runner.servers if k.endswith("|probed")]:
            runner.servers.pop(key).close()  # the probes are gone: no later run matches that load
    if not doc["claims"]:
        raise RuntimeError("the reference run recorded no verdict: " + "; ".join(doc["errors"])[:600])
    dead = [u for u, o in doc["properties"].items() if o != "passed"]
    if dead:
        doc["errors"].append(f"properties that passed no test here (no mutant can break them; not run): {', '.join(dead)}")  # fmt: skip
    doc["nodes"] = [n for n in nodes if select.unit_of_node(n) not in dead]
    doc["called"] = {c: sorted(v) for c, v in doc["called"].items() if c not in dead}
    return doc


CONTROL = "(control)"  # the unmutated tree, run as a mutant is: every unit, warm where the mutants are


def control_task(
    runner: Runner, reference: dict[str, Any], slot: Slot, timeout: Callable[[list[str]], float], stop_on: Path | None
) -> dict[str, Any]:
    """Run every unit on ``slot``'s unmutated tree the way a mutant runs and judge it like one: it must
    survive. A control that is "killed" names the units whose outcome changed with nothing mutated (warm runs
    that disagree with the cold reference, or a claim that is not deterministic), so their kills are suspect."""
    units = units_of(reference)
    nodes_of = select.nodes_by_unit(reference["nodes"])
    nodes = [n for u in units for n in nodes_of.get(u, [])]
    before = len(runner.warm_runs)
    run = run_claims(runner, slot.tree.path, nodes, slot.scratch, timeout(nodes), stop_on=stop_on)
    v = judge(reference, run, units, nodes_of, lambda: load_error(runner, slot.tree.path, 600))
    how = "warm" if runner.warm_runs[before:] == ["warm"] else "cold"
    return {"outcome": v.outcome, "seen_by": v.killed_by, "reasons": v.reasons, "seconds": run.seconds, "run": how}


def warm_summary(runner: Runner) -> dict[str, Any]:
    """How the campaign's runs ran: warm forks, and cold ones with why (`reports.mutate.warm`)."""
    why: dict[str, int] = {}
    for r in runner.warm_runs:
        if r != "warm":
            why[r] = why.get(r, 0) + 1
    return {"enabled": runner.warm, "warm": runner.warm_runs.count("warm"), "cold": why}


def units_of(reference: dict[str, Any]) -> list[str]:
    """The reference's units in claim order: its claims with a verdict, then its passing properties."""
    props = [u for u, o in reference.get("properties", {}).items() if o == "passed"]
    return sorted([*reference["claims"], *props], key=select.claim_order)


# --- the per-mutant results file (append as each finishes; a resumed campaign skips what it holds) -------------------
class ResultsFile:
    """``mutants.jsonl``: one JSON object per finished mutant, appended and fsynced under a lock; a torn last
    line (a kill mid-write) is ignored on reading."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def read(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if not self.path.is_file():
            return out
        for line in self.path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "id" in rec:
                out[rec["id"]] = rec
        return out

    def append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, sort_keys=True) + "\n").encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as fh:
                if fh.tell() and not self._ends_with_newline():
                    fh.write(b"\n")  # the torn line of an interrupted write stays alone on its line
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"


def pending(ids: Iterable[str], done: dict[str, dict[str, Any]]) -> list[str]:
    """The mutants still to run: not in the results file, or recorded as a harness ``error`` (retried)."""
    return [i for i in ids if i not in done or done[i].get("outcome") == "error"]
