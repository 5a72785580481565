"""The pytest plugin of a mutation campaign's runs (``-p deferlab.properties.probes``), each part switched on by
an environment variable the campaign (``deferlab mutate``) sets for that run:

* ``DEFERLAB_MUTATE_PROBES=FILE``: the probes of an instrumented tree (``__deferlab_probe__(N)`` first in each
  function body) record which functions this session entered; their ids go to FILE at its end (the reference
  run: which units reach which functions);
* ``DEFERLAB_MUTATE_STOP_ON=FILE`` (the reference's verdicts, signatures and test outcomes): the session stops
  at the first claim whose verdict or failure signature differs, or the first test that passed there and
  fails here (``--first-kill``);
* ``DEFERLAB_MUTATE_COLLECT=FILE``: the node ids the session collected (after the suite's own deselection) and
  its rootdir, as JSON: what a campaign runs;
* ``DEFERLAB_MUTATE_OUTCOMES=FILE``: each test's outcome and reason, and each file that did not collect (a
  checkout's own unit tests, the anchor, which have no deferlab recorder).

Why here and not in the CLI: it runs inside the pytest session of the checks, beside deferlab's own plugin;
the CLI never imports the checks and names this module in ``Request.plugins``. Inert when no variable is set.
"""

from __future__ import annotations

import builtins
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PROBE = "__deferlab_probe__"  # the builtin the probes call (reports/mutate/select.py writes the calls)
PROBES_ENV = "DEFERLAB_MUTATE_PROBES"
STOP_ENV = "DEFERLAB_MUTATE_STOP_ON"
COLLECT_ENV = "DEFERLAB_MUTATE_COLLECT"
OUTCOMES_ENV = "DEFERLAB_MUTATE_OUTCOMES"
_HITS: set[int] = set()
_STATE: dict[str, Any] = {}  # the session, and under --first-kill the reference (claims, tests) and how far it read
_OUTCOMES: dict[str, dict[str, Any]] = {"tests": {}, "errors": {}}


def install_probe() -> None:
    """Make the probes' builtin record into this process's hit set (before an instrumented tree is imported)."""
    builtins.__dict__[PROBE] = _HITS.add


def write_hits(path: str | Path) -> None:
    _write(path, sorted(_HITS))


def _write(path: str | Path, doc: Any) -> None:
    """``doc`` as JSON at ``path``, whole or not at all (a reader never sees half a file)."""
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc) + "\n")
    os.replace(tmp, path)


def signature_of(row: Mapping[str, Any]) -> str:
    """How a recorded claim row fails: "" unless it fails (or holds with a caveat); else its signature set
    (`reference.system.signatures.signature_set`: the recorded one, or its evidence's), sorted and joined."""
    from deferlab.reference.system.signatures import signature_set

    if row.get("verdict") not in ("fails", "holds-with-caveat"):
        return ""
    return " | ".join(sorted(signature_set({**row, "verdict": "fails"})))


def _why(report: Any) -> str:
    """A report's one line: a skip's reason, a failure's crash message, a collection error's last ``E`` line."""
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[-1]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return " ".join((errors[-1] if errors else text).split())[:300]


def pytest_configure(config: Any) -> None:
    if os.environ.get(PROBES_ENV):
        install_probe()


def pytest_sessionstart(session: Any) -> None:
    _STATE["session"] = session


def pytest_collection_finish(session: Any) -> None:
    if os.environ.get(COLLECT_ENV):
        nodes = [item.nodeid for item in session.items]
        _write(os.environ[COLLECT_ENV], {"rootdir": str(session.config.rootpath), "nodes": nodes})


def pytest_collectreport(report: Any) -> None:
    if os.environ.get(OUTCOMES_ENV) and report.failed:
        _OUTCOMES["errors"][report.nodeid] = _why(report)


def pytest_runtest_logreport(report: Any) -> None:
    """Each test's outcome (a setup that failed is an ``error``); under ``--first-kill``, stop once one saw it."""
    if report.when != "call" and report.outcome == "passed":
        return
    if os.environ.get(OUTCOMES_ENV):
        outcome = "error" if report.when != "call" and report.failed else report.outcome
        if _OUTCOMES["tests"].get(report.nodeid, ("passed",))[0] == "passed":
            _OUTCOMES["tests"][report.nodeid] = (outcome, "" if outcome == "passed" else _why(report))
    if os.environ.get(STOP_ENV) and report.when in ("setup", "call"):
        changed = _first_change(report.nodeid, bool(report.failed))
        if changed is not None and _STATE.get("session") is not None:
            _STATE["session"].shouldstop = f"deferlab mutate: {changed} saw the mutant (--first-kill)"


def _first_change(nodeid: str, failed: bool) -> str | None:
    """The first claim recorded since the last test whose verdict or signature differs from the reference, or
    the test itself if it failed where the reference's passed. The suite's recorder is read where the session
    loaded it (``sys.modules``: this plugin imports nothing of the suite)."""
    if "claims" not in _STATE:
        _STATE.update(json.loads(Path(os.environ[STOP_ENV]).read_text()), seen=0)
    verdicts = sys.modules.get("deferlab.properties.verdicts")
    recorded = list(getattr(getattr(verdicts, "RECORDER", None), "claims", []))
    new, _STATE["seen"] = recorded[_STATE["seen"] :], len(recorded)
    for entry in new:
        ref = _reference_of(entry)
        if ref is not None and (entry.get("verdict"), signature_of(entry)) != (ref["verdict"], ref["signature"]):
            return str(entry["id"])
    return nodeid if failed and _STATE["tests"].get(nodeid) == "passed" else None


def _reference_of(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The reference of the column ``entry`` was recorded in (a row compares with its own column, never with the
    claim's verdicts joined over columns); a column the reference never recorded compares with the claim's
    verdict only where the claim had one column (stop files without columns, and single-column claims)."""
    cid = str(entry.get("id"))
    columns = _STATE.get("columns", {}).get(cid)
    if columns:
        return columns.get(str(entry.get("policy")), {"verdict": "not-run", "signature": ""})
    ref = _STATE["claims"].get(cid)
    if ref is not None and "=" in str(ref.get("verdict", "")):  # a joined multi-column verdict, no columns given
        return None
    return ref


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if os.environ.get(PROBES_ENV):
        write_hits(os.environ[PROBES_ENV])
    if os.environ.get(OUTCOMES_ENV):
        _write(os.environ[OUTCOMES_ENV], _OUTCOMES)
