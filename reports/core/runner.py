"""The one runner: the checks of one system under test, in a child process, read back as a typed record.

Every command goes through `run` (``report``, ``versions``, ``compare``, ``mutate``) or `check_loads` (every
command that names an engine, before any long work) or `run_with_engine` (``repro``, the anchor of a
campaign). A run is ``python -m pytest <the system's checks> <its option>`` in a child of its own process
group (`reports.core.process`), with ``DEFERLAB_RESULTS_DIR`` pointing at a folder of the run's own; the
suite's recorder writes the versioned results file there (``verdicts.json``, `reference.system.claims`),
and `RunRecord` is read from it: per claim its verdict row (evidence, counterexample, provenance, failure
signatures), per test its outcome and failure line, the system that ran. Nothing is read from pytest's
output: it goes to the run's log, for people.

Why a child: a process holds one copy of an engine (its modules cannot be unloaded), a run may hang or
crash, and a crash must be an outcome, not a lost command. `Launcher` is how the child starts: a new
process (`cold`, the default) or a fork of a warm interpreter (a mutation campaign's, `reports.mutate.fork`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from deferlab.reference.system import claims as registry
from deferlab.reference.system.errors import DeferlabInputError
from deferlab.reference.system.rows import Row, Verdict
from deferlab.reference.system.systems import System
from deferlab.reports.core import process

RESULTS_ENV = "DEFERLAB_RESULTS_DIR"
STRICT_ENV = "DEFERLAB_STRICT"
OUTCOMES = ("passed", "failed", "error", "skipped")


class LoadError(DeferlabInputError):
    """A system under test cannot be loaded: the loader's one line (what was tried, what is accepted)."""


# --- what a run asks -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One run: which system, which checks, under which profile, and how the child is started.

    ``claims``: only these claims' tests (empty: every check of the system); ``nodes``: exactly these test
    node ids (relative to the ``properties`` folder, or absolute; mutation campaigns), instead of the
    system's checks; ``collect_only``: list the tests instead of running them; ``workers``: pytest-xdist
    processes (1: none); ``strict``: the strict switch (semantics §17.1); ``plugins``: extra ``-p`` plugins;
    ``env``: extra environment; ``threads``: torch's intra-op threads in the child (None: its default)."""

    system: System
    profile: str = "ci"
    claims: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    collect_only: bool = False
    workers: int = 1
    strict: bool = False
    timeout: float | None = None
    plugins: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    threads: int | None = None

    def with_(self, **changes: Any) -> Request:
        return replace(self, **changes)


def suite_path() -> Path:
    """The folder of the shipped checks (the ``deferlab.properties`` package), checkout or installed.

    Given to pytest as a path (not ``--pyargs``) so its conftest is an initial conftest: the xdist
    controller, which collects nothing, must load the hooks that merge the workers' verdicts."""
    spec = importlib.util.find_spec("deferlab.properties")  # found, not imported: the CLI never loads the tests
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the deferlab.properties package (the shipped checks) is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def command(request: Request) -> list[str]:
    """The child's command line (``python -m pytest ...``) for ``request``."""
    base = suite_path()
    targets = [n if os.path.isabs(n.split("::")[0]) else str(base / n) for n in request.nodes]
    cmd = [sys.executable, "-m", "pytest", *(targets or [str(base / request.system.suite)])]
    cmd += ["-q", "-p", "no:cacheprovider", f"--hypothesis-profile={request.profile}", "-rN"]
    cmd += request.system.pytest_options()
    if request.claims and not request.nodes:
        cmd += ["-k", registry.selection(request.claims)]
    if request.collect_only:
        cmd.append("--collect-only")
    elif request.workers > 1 and importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", str(request.workers)]
    for plugin in request.plugins:
        cmd += ["-p", plugin]
    return cmd


def environment(request: Request, results: Path) -> dict[str, str]:
    """The child's environment: ours, the results folder, the strict switch, the torch threads, ``env``."""
    env = {**os.environ, RESULTS_ENV: str(results), "PYTHONDONTWRITEBYTECODE": "1"}
    env[STRICT_ENV] = "1" if request.strict else "0"
    if request.threads is not None:
        env.update(OMP_NUM_THREADS=str(request.threads), MKL_NUM_THREADS=str(request.threads))
    env.update(request.env)
    return env


# --- what a run gives ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TestResult:
    """One test of the run: ``passed`` / ``failed`` / ``error`` / ``skipped``, its seconds, and (unless it
    passed) its failure line or skip reason as the recorder saw it (its claim: `RunRecord.claim_of`)."""

    outcome: str
    seconds: float = 0.0
    message: str = ""
    examples: int | None = None


@dataclass
class RunRecord:
    """What one run of one system's checks gave (schema of the results file: `reference.system.claims`; its
    rows typed: `reference.system.rows.Row`, which still answers ``row["id"]`` for a reader of the old dicts)."""

    system: System
    profile: str
    rows: list[Row] = field(default_factory=list)
    tests: dict[str, TestResult] = field(default_factory=dict)
    # node id -> the claim its test checks: its ``claim`` marker as the recorder wrote it (a results file before
    # schema 3: claims.toml's ``property``, else the test's name; `reference.system.claims.claim_of_node`)
    test_claims: dict[str, str] = field(default_factory=dict)
    described: dict[str, Any] | None = None  # the code that ran (real engines: version, commit, stand-ins)
    strict: bool = False
    rc: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    error: str | None = None  # one line: why the run gave no (or not all) verdicts
    wrote: bool = False  # whether the child wrote a results file at all (a killed one does not)
    log: str = ""  # the tail of the child's output, for a reader (never parsed)
    schema_version: int | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "rows":  # a row given as its JSON dict (a caller's fake run, an old reader) is typed here; one
            # that is no row (no id or column, a verdict outside the vocabulary) is left out, as `read_results` does
            value = [row for r in value if (row := r if isinstance(r, Row) else _row(r)) is not None]
        super().__setattr__(name, value)

    @property
    def label(self) -> str | None:
        return self.system.label

    def mine(self, column: str | None = None) -> list[Row]:
        """The rows of this system: those of ``column`` (``[FAMILY:]LABEL[ PATH]``), else of its label's columns
        (a real engine: every family and served path of it), or every policy's (the model)."""
        if column is not None:
            return [r for r in self.rows if r.policy == str(column)]
        label = self.label
        return [r for r in self.rows if label is None or r.column.label == label]

    def columns(self) -> list[str]:
        """The verdict columns of the run, in the order recorded."""
        return list(dict.fromkeys(r.policy for r in self.mine()))

    def verdicts(self, column: str | None = None) -> dict[str, str]:
        """claim id -> verdict in ``column`` (default the engine's own label: Kimi-K3 on its default path)."""
        return {r.id: r.verdict.value for r in self.mine(column or self.label)}

    def claim_of(self, node: str) -> str | None:
        """The claim test ``node`` checks (None: a test of no claim)."""
        return self.test_claims.get(node)

    def failed_tests(self) -> dict[str, str]:
        """node id -> failure line, for every test that failed or errored."""
        return {n: t.message for n, t in self.tests.items() if t.outcome in ("failed", "error")}

    def recorded(self) -> bool:
        """Whether the run said anything: a verdict, or a test that passed."""
        return any(r.verdict is not Verdict.NOT_RUN for r in self.mine()) or any(
            t.outcome == "passed" for t in self.tests.values()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.system.key,
            "profile": self.profile,
            "rows": [r.to_dict() for r in self.rows],
            "tests": {n: vars(t) for n, t in self.tests.items()},
            "described": self.described,
            "strict": self.strict,
            "rc": self.rc,
            "timed_out": self.timed_out,
            "seconds": self.seconds,
            "error": self.error,
            "wrote": self.wrote,
            "schema_version": self.schema_version,
        }


def read_results(record: RunRecord, results: Path) -> RunRecord:
    """Fill ``record`` from the results file in ``results`` (a missing or unreadable one leaves it empty)."""
    try:
        doc = registry.load_results(results)
    except ValueError:
        return record
    record.wrote = True
    record.schema_version = doc.get("schema_version")
    record.rows = doc.get("claims", [])  # typed as set (`RunRecord.__setattr__`)
    record.described = doc.get("system")
    record.strict = bool(doc.get("strict", False))
    for p in doc.get("properties", []):
        name = str(p["name"])
        record.tests[name] = TestResult(
            str(p.get("outcome", "")), float(p.get("seconds") or 0.0), str(p.get("message") or ""), p.get("examples")
        )
        claim = p.get("claim") or registry.claim_of_node(name)
        if claim:
            record.test_claims[name] = str(claim)
    return record


def _row(raw: Any) -> Row | None:
    """A results file's row, typed; None for one that is no row (no id, column or known verdict): left out, as a
    row that is no object always was."""
    try:
        return Row.from_dict(raw) if isinstance(raw, Mapping) else None
    except ValueError:
        return None


# --- how the child starts ------------------------------------------------------------------------------------------
Launcher = Callable[[Request, list[str], dict[str, str], Path, Path], process.Finished]


def cold(request: Request, cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> process.Finished:
    """A new process (the default): nothing shared with any other run."""
    return process.run(cmd, env=env, cwd=cwd, log=log, timeout=request.timeout)


def run(request: Request, *, work: Path | None = None, launcher: Launcher = cold, log: Path | None = None) -> RunRecord:
    """Run ``request`` in a child and read back its record.

    ``work``: the child's working folder (its results go to ``work/results``; a temporary folder, removed
    afterwards, when None); ``log``: where the child's output goes (default ``work/pytest.log``). A child
    that timed out, crashed or recorded nothing gives a record with ``error`` set, never an exception."""
    own = work is None
    work = process.temp_dir("run-") if work is None else Path(work)
    results = work / "results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True, exist_ok=True)
    log = log or work / "pytest.log"
    try:
        done = launcher(request, command(request), environment(request, results), work, log)
        record = RunRecord(request.system, request.profile, rc=done.rc, timed_out=done.timed_out, seconds=done.seconds)
        read_results(record, results)
        asked = set(request.claims)
        record.rows = [
            r
            for r in record.rows
            if request.system.answers(r.id, r.column.family_name) and (not asked or r.id in asked)
        ]  # the claims each column's system and family answers and the run asked for (the rest are not-run fills)
        record.log = _tail(log)
        record.error = _error(record, request)
        return record
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def _error(record: RunRecord, request: Request) -> str | None:
    """Why the run's verdicts are missing or incomplete, in one line (None: it ran to its end)."""
    if record.timed_out:
        return f"the checks did not finish within {request.timeout:.0f} s (the child was killed)"
    if request.collect_only:
        return None
    if not record.wrote:
        last = (record.log.strip().splitlines() or [""])[-1][:300]
        return f"the checks recorded nothing (pytest exit {record.rc}){': ' + last if last else ''}"
    if record.rc not in (0, 1):
        return f"pytest exited {record.rc} (verdicts read from what it recorded)"
    return None


# --- loading without running ---------------------------------------------------------------------------------------
def check_loads(system: System, *, timeout: float = 1200, tree: str | None = None) -> str:
    """Load ``system`` (or ``tree``, a path standing for its spec) in a fresh process: its name, or `LoadError`
    with the loader's one line. The model always loads (it is deferlab's own)."""
    if not system.real:
        return "deferlab"
    from deferlab.impl.loader.__main__ import ERROR_MARK, RESULT_MARK  # constants only; the load is the child's

    cmd = [sys.executable, "-m", "deferlab.impl.loader", "check", system.engine, tree or str(system.spec)]
    rc, out, err = process.capture(cmd, timeout=timeout)
    if rc is None:
        raise LoadError(f"loading {system.engine} {system.spec!r} did not finish within {timeout:.0f} s")
    line = next((x for x in reversed(out.splitlines()) if x.startswith(RESULT_MARK)), None)
    if rc == 0 and line is not None:
        return str(json.loads(line[len(RESULT_MARK) :])["name"])
    why = next((x[len(ERROR_MARK) :] for x in reversed(err.splitlines()) if x.startswith(ERROR_MARK)), None)
    last = (err.strip().splitlines() or [f"the loader exited {rc}"])[-1]
    raise LoadError(why or last)


def run_with_engine(
    system: System, pytest_args: Sequence[str], *, cwd: Path | None = None, timeout: float | None = 600,
    env: Mapping[str, str] | None = None, companions: Sequence[str] = (),
) -> tuple[int | None, str, str]:  # fmt: skip
    """pytest ``pytest_args`` in a child that first loads ``system``'s engine (so ``import sglang`` in the tests
    is the loaded copy), with ``companions`` (``transformers``, ``torchvision``) at the release's pins first;
    plugins are not autoloaded, so the tests import nothing of deferlab. (exit status or None at the timeout,
    stdout, stderr); a spec that cannot load raises `LoadError`."""
    from deferlab.impl.loader.__main__ import ERROR_MARK, LOAD_FAILED

    extra = ["--companions", ",".join(companions)] if companions else []
    cmd = [sys.executable, "-m", "deferlab.impl.loader", "run", system.engine, str(system.spec), *extra, "--"]
    cmd += list(pytest_args)
    child_env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})}
    rc, out, err = process.capture(cmd, env=child_env, cwd=cwd, timeout=timeout)
    failed = next((x for x in err.splitlines() if x.startswith(ERROR_MARK)), None)
    if rc == LOAD_FAILED and failed is not None:
        raise LoadError(failed[len(ERROR_MARK) :])
    return rc, out, err
