"""The anchor of a campaign: SGLang's own unit tests of the mutated files, run on the same mutants as deferlab's
claims (``deferlab mutate --sglang CHECKOUT --anchor [TESTS ...]``), side by side in the report.

Why an anchor: a kill rate alone says little; the same mutants against the
tests the engine's authors wrote for those files say whether the claims see
more, less or other things. The tests come from a source checkout (a release
wheel ships the package only): by default every ``test_*.py`` under the
checkout's ``test/`` in a folder named ``unit`` (SGLang's
``test/registered/unit/...``) that imports the mutated file's module (``import
sglang.srt.x``, ``from sglang.srt.x import f``, ``from sglang.srt import x``);
or the files and folders named after ``--anchor``, for every mutant.

How they run: on this CPU, without SGLang's dependencies, as ``deferlab repro``
runs a reproducer (`reports.core.runner.run_with_engine`): a child loads the
worker's tree through deferlab's loader, then runs pytest on the test files (no
conftest, no cache, no bytecode written into the checkout, ``CUDA_VISIBLE_DEVICES``
empty: a CPU run), each test's outcome recorded by the campaign's plugin
(``deferlab.properties.probes``, ``DEFERLAB_MUTATE_OUTCOMES``). The
reference runs each test file once on the unmutated tree: a test that does not
pass there (it needs a GPU, a server, a dependency the loader stands in for)
"cannot run here" and is excluded, with its reason. A mutant is *killed by the
anchor* when one of its file's tests that passed unmutated fails, errors or is
no longer collected (a skip is not a failure); *killed at load* when the tree
no longer loads; ``timeout`` past 60 s plus four times the reference's
seconds; ``no unit test`` when none of its file's tests runs here.
"""

from __future__ import annotations

import ast
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from deferlab.reference.system.engines import ENGINES
from deferlab.reference.system.engines import engine as engine_facts
from deferlab.reference.system.errors import UsageError
from deferlab.reports.core.runner import LoadError
from deferlab.reports.mutate import runs as mrun

NO_TEST = "no unit test"
OUTCOMES = ("killed", "killed at load", "timeout", "survived", NO_TEST, "error")
DETECTED = ("killed", "killed at load")
OPTIONS = ("-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--import-mode=importlib",
           "-W", "ignore::DeprecationWarning", "-p", mrun.PROBES)  # fmt: skip


# --- where the tests are --------------------------------------------------------------------------------------------
def checkout_top(root: Path) -> Path:
    """The checkout's top folder (where ``test/`` lives): above ``python/`` for SGLang's layout."""
    return root.parent if root.name == "python" else root


def module_of(file: str) -> str:
    """``sglang/srt/gate.py`` -> ``sglang.srt.gate`` (a package's ``__init__.py``: the package)."""
    return file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


@cache
def imported(path: Path) -> frozenset[str]:
    """The dotted names a Python file imports anywhere (``from a.b import c`` gives ``a.b`` and ``a.b.c``);
    empty when it does not parse."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return frozenset(names)


def imports_module(path: Path, module: str) -> bool:
    """Whether the file imports ``module`` or from it (a submodule of it counts: it runs the module's body)."""
    return any(n == module or n.startswith(module + ".") for n in imported(path))


def unit_tests(top: Path) -> list[str]:
    """Every ``test_*.py`` under ``top/test`` in a folder named ``unit`` (relative to ``top``, sorted)."""
    base = top / "test"
    if not base.is_dir():
        return []
    found = (p for p in base.rglob("test_*.py") if "unit" in p.relative_to(base).parts[:-1])
    return sorted(p.relative_to(top).as_posix() for p in found if "__pycache__" not in p.parts)


def named_tests(top: Path, asked: Sequence[str]) -> list[str]:
    """The test files ``--anchor TESTS`` names (files, or folders searched for ``test_*.py``; relative to the
    working directory or to the checkout's top), as paths relative to the top; UsageError in one line."""
    out: list[str] = []
    for text in asked:
        path = next((p for p in (Path(text).expanduser(), top / text) if p.exists()), None)
        if path is None:
            raise UsageError(f"--anchor: no test file or folder {text!r} (neither here nor in the checkout {top})")
        path = path.resolve()
        if top.resolve() not in path.parents:
            raise UsageError(f"--anchor: {text!r} is not inside the checkout {top} (its unit tests are the anchor)")
        files = [path] if path.is_file() else sorted(path.rglob("test_*.py"))
        if not files or (path.is_file() and path.suffix != ".py"):
            raise UsageError(f"--anchor: {text!r} holds no Python test file (test_*.py)")
        out += [f.relative_to(top.resolve()).as_posix() for f in files]
    return list(dict.fromkeys(out))


@dataclass
class Anchor:
    """The unit tests a campaign runs beside its claims: the checkout, its candidate test files, and whether
    they were named (then every mutant runs them all) or found (a mutant runs those importing its file)."""

    top: Path
    files: list[str]
    named: bool
    asked: list[str] = field(default_factory=list)

    def for_file(self, file: str) -> list[str]:
        """The test files of one mutated file (relative to the top)."""
        if self.named:
            return list(self.files)
        return [f for f in self.files if imports_module(self.top / f, module_of(file))]

    def by_file(self, files: Iterable[str]) -> dict[str, list[str]]:
        return {f: self.for_file(f) for f in sorted(set(files))}

    def check(self, files: Iterable[str]) -> None:
        """Refuse (one line) a campaign whose targeted files none of the tests import."""
        files = sorted(set(files))
        if files and not any(self.by_file(files).values()):
            shown = ", ".join(module_of(f) for f in files[:4]) + (", ..." if len(files) > 4 else "")
            raise UsageError(
                f"--anchor: no unit test in the checkout {self.top} imports the targeted files ({shown}); "
                f"name the tests to run: --anchor TESTS"
            )


def front(engine: str, spec: str, kind: str | None, root: Path | None, asked: list[str]) -> Anchor:
    """``--anchor`` checked before anything runs (``kind``/``root``: None before the spec is resolved: then only
    what the spec's text says is checked); UsageError in one line."""
    if not engine_facts(engine).anchor:
        anchors = [f"{e.option} CHECKOUT" for e in ENGINES.values() if e.anchor]  # SGLang's, the one today
        whose = " or ".join(f"{e.display}'s" for e in ENGINES.values() if e.anchor) or "an engine's"
        raise UsageError(f"--anchor: the anchor is {whose} own unit tests; it runs with {' or '.join(anchors)}, not --{engine}")  # fmt: skip
    if kind is None or root is None:
        if spec != "installed" and not Path(spec).expanduser().exists():
            raise UsageError(
                f"--anchor: sglang {spec!r} is a release, and a release wheel carries no unit tests (they stay in "
                "the repository); give a source checkout: --sglang PATH (e.g. the PR's merge commit)"
            )
        return Anchor(Path("."), [], bool(asked), list(asked))
    if kind == "wheel":
        raise UsageError(f"--anchor: sglang {spec!r} is a release wheel, which carries no unit tests; give a source checkout: --sglang PATH")  # fmt: skip
    top = checkout_top(root)
    files = named_tests(top, asked) if asked else unit_tests(top)
    if not files:
        raise UsageError(
            f"--anchor: the checkout {top} carries no unit tests (no test_*.py in a unit folder under test/); "
            "name the tests to run: --anchor TESTS"
        )
    return Anchor(top, files, bool(asked), list(asked))


# --- running tests on a tree ---------------------------------------------------------------------------------------
@dataclass
class TestRun:
    """What one unit-test process recorded: per test node its outcome and reason."""

    tests: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # collection errors: file node -> reason
    seconds: float = 0.0
    rc: int | None = None
    timed_out: bool = False
    load_error: str | None = None
    wrote: bool = False
    tail: str = ""


def run_tests(harness: mrun.Harness, tree: Path, args: Sequence[str], top: Path, scratch: Path, timeout: float) -> TestRun:  # fmt: skip
    """The tests ``args`` (files or node ids under ``top``) on ``tree``, in a child killed at ``timeout``."""
    scratch.mkdir(parents=True, exist_ok=True)
    out_file = scratch / "anchor-results.json"
    out_file.unlink(missing_ok=True)
    env = {"PYTHONDONTWRITEBYTECODE": "1", "CUDA_VISIBLE_DEVICES": "", mrun.OUTCOMES_ENV: str(out_file)}
    run, t0 = TestRun(), time.perf_counter()
    try:
        run.rc, run.tail = harness.unit_tests(tree, [*args, *OPTIONS, "--rootdir", str(top)], scratch, timeout, env)
    except LoadError as e:
        run.load_error = str(e)
    if mrun.STOP.is_set():
        raise mrun.Interrupted()
    run.seconds, run.timed_out = round(time.perf_counter() - t0, 2), run.rc is None and run.load_error is None
    try:
        doc = json.loads(out_file.read_text())
    except (OSError, ValueError):
        return run
    run.wrote = True
    run.tests = {n: (str(o), str(w)) for n, (o, w) in doc.get("tests", {}).items()}
    run.errors = {str(n): str(w) for n, w in doc.get("errors", {}).items()}
    return run


def reference(
    anchor: Anchor, harness: mrun.Harness, pool: mrun.Pool, files: Iterable[str], timeout: float, say: Callable
) -> dict[str, Any]:
    """Each test file of the targeted ``files`` once, alone, on an unmutated tree: which of its tests pass here
    (the ones a mutant can break), and why each other cannot run here."""
    by_file = anchor.by_file(files)
    wanted = sorted({t for ts in by_file.values() for t in ts})
    doc: dict[str, Any] = {"top": str(anchor.top), "asked": anchor.asked}
    doc.update(named=anchor.named, by_file=by_file, files={})

    def one(slot: mrun.Slot, test: str) -> TestRun:
        return run_tests(harness, slot.tree.path, [str(anchor.top / test)], anchor.top, slot.scratch, timeout)

    def done(test: str, run: TestRun) -> None:
        passed = sorted(n for n, (o, _) in run.tests.items() if o == "passed")
        cannot = {n: f"{o}: {w}".strip() for n, (o, w) in sorted(run.tests.items()) if o != "passed"}
        cannot |= {n or test: f"not collected: {w}" for n, w in run.errors.items()}
        if run.timed_out or run.load_error or not run.wrote:
            why = "timed out" if run.timed_out else run.load_error or f"the process died (exit {run.rc}): {run.tail}"  # fmt: skip
            cannot[test] = why
        doc["files"][test] = {"passed": passed, "cannot_run": cannot, "seconds": run.seconds}
        say(f"anchor reference {test}: {len(passed)} passed, {len(cannot)} cannot run here, in {run.seconds} s")

    pool.map(one, wanted, done)
    if not any(f["passed"] for f in doc["files"].values()):
        reasons = "; ".join(f"{n}: {w}" for f in doc["files"].values() for n, w in list(f["cannot_run"].items())[:2])
        raise UsageError(f"--anchor: none of the unit tests of the targeted files passes unmutated on this CPU ({reasons[:300]})")  # fmt: skip
    return doc


def passing(ref: dict[str, Any], file: str) -> list[str]:
    """The node ids (relative to the top) of the tests of ``file`` that passed in the reference."""
    return [n for t in ref["by_file"].get(file, []) for n in ref["files"].get(t, {}).get("passed", [])]


def run_mutant(ref: dict[str, Any], slot: mrun.Slot, file: str, harness: mrun.Harness) -> dict[str, Any]:
    """The anchor on the mutant in ``slot``'s tree (``file`` mutated): its outcome, the tests that saw it and
    why, the tests run and seconds."""
    nodes = passing(ref, file)
    if not nodes:
        return {"outcome": NO_TEST, "killed_by": [], "reasons": {}, "tests_run": 0, "seconds": 0}
    top = Path(ref["top"])
    budget = sum(ref["files"][t]["seconds"] for t in ref["by_file"][file] if t in ref["files"])
    run = run_tests(harness, slot.tree.path, [str(top / n) for n in nodes], top, slot.scratch, 60 + 4 * budget)
    rec = judge(nodes, run)
    return {**rec, "tests_run": len(nodes), "seconds": run.seconds}


def judge(nodes: Sequence[str], run: TestRun) -> dict[str, Any]:
    """The anchor's outcome of one run of the reference's passing ``nodes``."""
    if run.timed_out:
        return {"outcome": "timeout", "killed_by": [], "reasons": {"(run)": f"no end within the timeout ({run.seconds} s)"}}  # fmt: skip
    if run.load_error is not None:
        return {"outcome": "killed at load", "killed_by": [], "reasons": {"(load)": run.load_error}}
    if not run.wrote:
        why = f"the unit-test process died (exit {run.rc}): {run.tail}"
        return {"outcome": "killed", "killed_by": ["(run)"], "reasons": {"(run)": why}}
    reasons = {}
    for node in nodes:
        outcome, why = run.tests.get(node, ("not run", ""))
        if outcome not in ("passed", "skipped"):  # a skip is no failure (the test said it does not apply)
            collected = next((w for n, w in run.errors.items() if n and node.startswith(n)), "")
            reasons[node] = f"{outcome}: {why or collected}".strip().rstrip(":")
    if not reasons:
        return {"outcome": "survived", "killed_by": [], "reasons": {}}
    return {"outcome": "killed", "killed_by": sorted(reasons), "reasons": reasons}


# --- the side-by-side part of the document ------------------------------------------------------------------------
def summary(ref: dict[str, Any]) -> dict[str, Any]:
    """What the plan's ``anchor`` part says of the reference: the checkout, per test file what passes and what
    cannot run here (with reasons), and each targeted file's tests."""
    return {
        "top": ref["top"], "asked": ref["asked"], "named": ref["named"], "by_file": ref["by_file"],
        "tests": {t: {"passed": len(f["passed"]), "cannot_run": f["cannot_run"], "seconds": f["seconds"]} for t, f in ref["files"].items()},
    }  # fmt: skip


def side_by_side(mutants: list[dict[str, Any]], shown: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """Per mutant deferlab's outcome beside the anchor's, both kill rates on the same sample (judged: not
    equivalent, no harness error), and on the part of it the anchor has tests for; who alone saw which."""
    judged = [m for m in mutants if shown(m) not in ("equivalent", "error")]
    anchor_of = {m["id"]: (m.get("anchor") or {}).get("outcome", "error") for m in mutants}
    covered = [m for m in judged if anchor_of[m["id"]] not in (NO_TEST, "error")]

    def rate(rows: list[dict[str, Any]], anchor: bool) -> float | None:
        hits = sum((anchor_of[m["id"]] if anchor else shown(m)) in DETECTED for m in rows)
        return round(hits / len(rows), 4) if rows else None

    mine = {m["id"] for m in judged if shown(m) in DETECTED}
    theirs = {m["id"] for m in judged if anchor_of[m["id"]] in DETECTED}
    counts = {o: sum(anchor_of[m["id"]] == o for m in mutants) for o in OUTCOMES}
    return {
        "rows": [{"id": m["id"], "deferlab": shown(m), "anchor": anchor_of[m["id"]]} for m in mutants],
        "counts": counts, "judged": len(judged), "covered": len(covered),
        "deferlab_kill_rate": rate(judged, False), "anchor_kill_rate": rate(judged, True),
        "deferlab_kill_rate_covered": rate(covered, False), "anchor_kill_rate_covered": rate(covered, True),
        "both": sorted(mine & theirs), "anchor_only": sorted(theirs - mine), "deferlab_only": sorted(mine - theirs),
        "neither": sorted(m["id"] for m in judged if m["id"] not in mine | theirs),
        "seconds": round(sum((m.get("anchor") or {}).get("seconds", 0) for m in mutants), 1),
        "equivalent_but_killed": sorted(m["id"] for m in mutants if shown(m) == "equivalent" and anchor_of[m["id"]] in DETECTED),
    }  # fmt: skip


def markdown(doc: dict[str, Any]) -> list[str]:
    """The report's anchor section: the rates side by side, who alone saw which, the tests that cannot run here,
    and the per-mutant table."""
    a, s = doc["anchor"], doc["anchor_side_by_side"]
    pct = lambda r: "n/a" if r is None else f"{100 * r:.1f} %"  # noqa: E731
    tests = a["tests"]
    ref_seconds = sum(t["seconds"] for t in tests.values())
    out = ["## Beside SGLang's own unit tests (the anchor)", ""]
    out += [
        f"The same {len(doc['mutants'])} mutants against the checkout's unit tests of the mutated files "
        f"({'named by --anchor' if a['named'] else 'found: test files in a unit folder under test/ importing the file'}; "
        f"{len(tests)} file(s), {sum(t['passed'] for t in tests.values())} tests passing unmutated on this CPU), run through "
        f"deferlab's loader without SGLang's dependencies: {s['seconds']:.0f} mutant-seconds, reference {ref_seconds:.0f} s.",
        "",
        "| on the same sample | deferlab's claims | SGLang's unit tests |",
        "|---|---|---|",
        f"| kill rate, {s['judged']} judged mutants | {pct(s['deferlab_kill_rate'])} | {pct(s['anchor_kill_rate'])} |",
        f"| kill rate, the {s['covered']} whose file has unit tests that run here | {pct(s['deferlab_kill_rate_covered'])} | {pct(s['anchor_kill_rate_covered'])} |",
        "",
        "Anchor outcomes: " + ", ".join(f"{o} {n}" for o, n in s["counts"].items()) + ".",
        "",
    ]  # fmt: skip
    for title, ids in (
        ("Killed by the anchor only", s["anchor_only"]),
        ("Killed by deferlab only", s["deferlab_only"]),
    ):
        out += [f"**{title}** ({len(ids)}): " + (", ".join(f"`{i}`" for i in ids) or "none") + ".", ""]
    if s.get("equivalent_but_killed"):
        wrong = ", ".join(f"`{i}`" for i in s["equivalent_but_killed"])
        out += [f"Listed as equivalent but killed by the anchor (the entry is wrong): {wrong}.", ""]
    cannot = [(t, n, w) for t, f in tests.items() for n, w in f["cannot_run"].items()]
    out += [f"**Cannot run here** ({len(cannot)} test(s), excluded: they do not pass on the unmutated tree on this CPU):", ""]  # fmt: skip
    out += [f"- `{n}`: {w}" for _, n, w in cannot] or ["- none"]
    out += ["", "| mutant | deferlab | anchor | the anchor's tests that saw it |", "|---|---|---|---|"]
    by_id = {m["id"]: m for m in doc["mutants"]}
    for row in s["rows"]:
        seen = ", ".join(
            f"`{n.rsplit('::', 1)[-1]}`" for n in (by_id[row["id"]].get("anchor") or {}).get("killed_by", [])
        )
        out.append(f"| `{row['id']}` | {row['deferlab']} | {row['anchor']} | {seen or '–'} |")
    return [*out, ""]
