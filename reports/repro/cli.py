"""Upstream-ready reproducers: ``repro/<claim>-<system>.py`` per failing claim, and ``deferlab repro FILE``.

Why: a counterexample in a report is a repr string; an upstream maintainer
needs a test they can run. Each reproducer is a short standalone pytest file
(a template of `reports.repro.templates` filled from the minimal
counterexample) that calls the engine's own functions by import path
(``sglang.srt...``, ``vllm...``), so it runs wherever that engine is
installed; it asserts the claim, so it fails on the code as it is and passes
once the flaw is fixed. A header comment names the claim, the system, where
the counterexample came from, deferlab's version and how to run it (its
``Run:`` line names the engine's option); ``deferlab repro`` reads that header
to refuse any other file, and a reproducer of one engine run on the other.

``deferlab repro FILE --sglang SPEC`` (``--vllm SPEC``, ``--lmdeploy SPEC``: each registered engine's option)
runs one on a machine without the engine's dependencies: always a new process
(`reports.core.runner.run_with_engine`) that loads SPEC with deferlab's loader
(which installs the engine's modules under their real names, and the companions
the header names at the release's pins), then runs pytest on the file in that process, with no plugin autoloaded, no conftest and no ini
file, so the file is all that runs. A SPEC that is no accepted form is refused
before anything loads (`reports.core.sides`). Exit status: 0 the reproducer
passes (the claim holds on SPEC), 1 it fails (the flaw is there), 2 bad usage
(not a reproducer, the other engine's option, a SPEC that cannot be loaded),
3 pytest could not run it. ``--cold`` is accepted and does nothing: every run
is cold (there is no warm daemon any more).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import os
import re
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system.errors import UsageError
from deferlab.reference.system.families import FAMILIES
from deferlab.reference.system.systems import DEFAULT_FAMILY, System, family_column
from deferlab.reference.system.systems import ENGINES as REGISTERED
from deferlab.reference.system.systems import engine as engine_facts
from deferlab.reports.core import runner
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.core.grouping import failure_text, short
from deferlab.reports.core.runner import LoadError
from deferlab.reports.core.sides import resolve_side, selected_families
from deferlab.reports.families.cli import add_model_option
from deferlab.reports.repro.families import Column
from deferlab.reports.repro.templates import render

FORMAT = 1
FIRST_LINE = re.compile(rf"# deferlab reproducer \(format {FORMAT}\): claim (\S+) on (\S+)")
ACCEPTED = (
    "accepted: a repro/<claim>-<system>.py file written by deferlab (its first line is '# deferlab reproducer ...')"
)
ENGINES = tuple(REGISTERED)  # the real engines of the registry
RUN_LINE = re.compile(r"# Run: pytest THIS_FILE .* deferlab repro THIS_FILE --(\w+) SPEC")
FAMILY_LINE = re.compile(r"# Model family: (\S+)")
WITH_COMPANIONS = re.compile(r"#   loader, with ([\w, ]+?) at the release's pins")


def deferlab_version() -> str:
    """deferlab's version, and its commit when it runs from a git checkout."""
    from deferlab.impl.loader.sources import git_rev

    try:
        version = importlib.metadata.version("deferlab")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    rev = git_rev(Path(__file__).resolve().parent)
    return f"{version} (commit {rev[:12]})" if rev else version


def safe_name(text: str) -> str:
    """``text`` as a file-name part (anything but letters, digits, ``.``, ``+``, ``-`` becomes ``_``)."""
    return re.sub(r"[^\w.+-]", "_", str(text)) or "unknown"


def _comment(label: str, text: Any) -> list[str]:
    lines = textwrap.wrap(f"{label}: {text}", 112, subsequent_indent="  ", break_on_hyphens=False)
    return [f"# {x}" for x in lines or [label]]


def header(
    row: dict[str, Any], system: dict[str, Any], spec: str, source: str, what: str, engine: str = "sglang"
) -> str:
    """The comment block `FIRST_LINE` opens: claim, system, model family and served path, the counterexample's
    source, deferlab's version, and how to run it (its ``--<engine> SPEC`` option is what `read_header` reads the
    engine from; the companions it names, what ``deferlab repro`` loads beside the engine)."""
    name = system.get("name") or spec
    column = Column.of(row, engine)
    lines = [f"# deferlab reproducer (format {FORMAT}): claim {row['id']} on {name}"]
    lines += _comment("Claim", f"{row['id']}: {row.get('statement', '')}")
    commit = system.get("commit") or "-"
    lines += _comment("System", f"{name} ({system.get('kind', '?')} {system.get('version', '?')}, commit {commit})")
    lines += _comment("Spec", spec)
    if column.family != DEFAULT_FAMILY or column.path:  # Kimi-K3's default column: the header as before --model
        served = f"served path {column.path}" if column.path else "the engine's default serving path"
        lines += [f"# Model family: {column.family} ({FAMILIES[column.family].display}), {served}"]
    lines += _comment("Flaw", what)
    lines += _comment("Recorded failure", failure_text(str(row.get("evidence", ""))))
    lines += _comment(
        "Counterexample", f"deferlab's minimal counterexample, from {source}: {row.get('counterexample')}"
    )
    lines += _comment("Written by", f"deferlab {deferlab_version()}")
    display = engine_facts(engine).display
    companions = column.companions
    needs = f", with {', '.join(companions)} at the release's pins" if companions else ""
    lines += [
        f"# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --{engine} SPEC (deferlab's",
        f"#   loader{needs}: no {display} dependencies needed). It fails while the flaw is there and passes once it is fixed.",
    ]
    return "\n".join(lines) + "\n"


def file_name(cid: str, name: str, row: dict[str, Any], engine: str) -> str:
    """``<claim>-<system>.py`` for Kimi-K3's default column; a family's prefixes the system, a served path other
    than the default follows it (``C15-qwen3-vl-vllm-0.34.0-host-normalized.py``)."""
    column = Column.of(row, engine)
    family = "" if column.family == DEFAULT_FAMILY else f"{column.family}-"
    path = f"-{column.path}" if column.path else ""
    return safe_name(f"{cid}-{family}{name}{path}") + ".py"


def write_reproducers(
    rows: Iterable[dict[str, Any]],
    system: dict[str, Any] | None,
    spec: str,
    out: Path,
    *,
    source: str,
    engine: str | None = None,
) -> tuple[list[Path], list[str]]:
    """``out/repro/<claim>-<system>.py`` for each failing row a template of ``engine`` fits (default: the
    system's ``engine``, else SGLang); (files written, one line per failing claim that got none, saying why)."""
    system = system or {}
    engine = engine or system.get("engine") or "sglang"
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    name = safe_name(system.get("name") or spec)
    written, missing = [], []
    for row in rows:
        if row.get("verdict") != "fails":
            continue
        failure = failure_text(str(row.get("evidence", "")))
        made = render(str(row["id"]), row.get("counterexample"), failure, engine=engine, row=row)
        if made is None:
            where = _column_name(row, name, engine)
            missing.append(f"{row['id']} on {where}: no reproducer template fits this failure ({short(failure, 120)})")
            continue
        code, what = made
        text = header(row, system, spec, source, what, engine)
        text += f'"""Reproducer of claim {row["id"]}: {what}."""\n\n' + code
        written.append(write_text_atomic(out / "repro" / file_name(str(row["id"]), name, row, engine), text))
    return written, missing


def _column_name(row: dict[str, Any], name: str, engine: str) -> str:
    """The system's name, with the family and served path of the row's column where they are not the default."""
    column = Column.of(row, engine)
    return family_column(name + (f" {column.path}" if column.path else ""), column.family)


# --- deferlab repro FILE --------------------------------------------------------------------------------------------
def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("repro", help="run one of deferlab's reproducers on its engine through deferlab's loader")
    p.add_argument("file", type=Path, metavar="FILE", help="a repro/<claim>-<system>.py written by deferlab")
    for facts in REGISTERED.values():  # an option per registered engine (--sglang, --vllm, --lmdeploy, ...)
        p.add_argument(facts.option, dest=facts.name, metavar="SPEC",
                       help=f"the {facts.display} to run {facts.with_article} reproducer on (default: its Spec)")  # fmt: skip
    add_model_option(
        p, "the model family (or families, or 'all') the reproducer must be of (default: the one its header names)"
    )
    p.add_argument("--cold", action="store_true", help="accepted for old scripts; every run is a new process")
    return p


def read_header(path: Path) -> dict[str, str]:
    """The reproducer's claim, system and spec from its header; UsageError (one line) for any other file."""
    if not path.is_file():
        raise UsageError(f"FILE: {str(path)!r} does not exist or is not a file; {ACCEPTED}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"FILE: cannot read {str(path)!r} ({type(e).__name__}); {ACCEPTED}") from None
    m = FIRST_LINE.fullmatch(lines[0].strip()) if lines else None
    if m is None:
        first = lines[0][:60] if lines else ""
        raise UsageError(f"FILE: {str(path)!r} is not a deferlab reproducer (first line {first!r}); {ACCEPTED}")
    head = list(itertools.takewhile(lambda x: x.startswith("#"), lines))
    spec = next((x[len("# Spec: ") :].strip() for x in head if x.startswith("# Spec: ")), "")
    run_line = next((r for r in map(RUN_LINE.match, head) if r is not None), None)
    engine = run_line.group(1) if run_line is not None else "sglang"  # a file without one: SGLang's (the first)
    if engine not in ENGINES:
        raise UsageError(f"FILE: {str(path)!r} names engine {engine!r} in its Run line; accepted: {', '.join(ENGINES)}")
    family = next((f.group(1) for f in map(FAMILY_LINE.match, head) if f is not None), DEFAULT_FAMILY)
    if family not in FAMILIES:
        raise UsageError(f"FILE: {str(path)!r} names model family {family!r}; accepted: {', '.join(FAMILIES)}")
    found = next((c.group(1) for c in map(WITH_COMPANIONS.match, head) if c is not None), "")
    companions = ",".join(c.strip() for c in found.split(",") if c.strip())
    return {"claim": m.group(1), "system": m.group(2), "spec": spec, "engine": engine, "family": family,
            "companions": companions}  # fmt: skip


def pytest_args(paths: list[Path], junitxml: Path | None = None) -> list[str]:
    """pytest's arguments for ``paths`` alone: no cache, no conftest, no ini file (``-c`` the null device), each
    file imported by path; ``junitxml``: also pytest's per-test results there."""
    files = [str(p.resolve()) for p in paths]
    opts = ["-q", "-p", "no:cacheprovider", "--noconftest", "-c", os.devnull, "--import-mode=importlib"]
    opts += ["--rootdir", os.path.commonpath([os.path.dirname(f) for f in files]), "-W", "ignore::DeprecationWarning"]
    return files + opts + (["--junitxml", str(junitxml)] if junitxml else [])


def run_files(
    paths: list[Path],
    spec: str,
    *,
    engine: str = "sglang",
    junitxml: Path | None = None,
    timeout: float = 600,
    companions: tuple[str, ...] | None = None,
) -> tuple[int | None, str, str]:
    """A new process that loads ``spec`` of ``engine`` with deferlab's loader (and ``companions`` at the release's
    pins; default: those the files' headers name), then runs pytest on ``paths`` (`pytest_args`): (exit status,
    or None at ``timeout``; stdout; stderr). `LoadError` (the loader's one line) when ``spec`` cannot be loaded."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if companions is None:
        named = [c for p in paths for c in read_header(p)["companions"].split(",") if c]
        companions = tuple(dict.fromkeys(named))
    return runner.run_with_engine(
        System(engine, spec), pytest_args(paths, junitxml), timeout=timeout, companions=companions
    )


def run(args: argparse.Namespace, log: TextIO | None = None) -> int:
    """Run the reproducer; returns the exit status (see the module docstring)."""
    log = log or sys.stderr
    info = read_header(args.file)
    engine = info["engine"]
    asked = selected_families(getattr(args, "model", None)) if getattr(args, "model", None) else None
    if asked is not None and info["family"] not in asked:
        raise UsageError(
            f"--model: {str(args.file)!r} is a reproducer of model family {info['family']!r} (claim {info['claim']} "
            f"on {info['system']}); accepted for it: --model {info['family']}, or no --model"
        )
    given = {e: getattr(args, e, None) for e in ENGINES if getattr(args, e, None) is not None}
    for other in given:
        if other != engine:
            raise UsageError(
                f"--{other}: {str(args.file)!r} is {engine_facts(engine).with_article} reproducer (claim "
                f"{info['claim']} on {info['system']}); accepted for it: --{engine} SPEC, or no option (its Spec)"
            )
    spec = (given.get(engine) or info["spec"]).strip()
    if not spec:
        raise UsageError(f"--{engine}: {str(args.file)!r} names no Spec in its header; give --{engine} SPEC")
    side = resolve_side(f"--{engine}", spec, engine=engine)  # refused at once unless a SPEC form
    companions = tuple(c for c in info["companions"].split(",") if c)
    loads = f" with {', '.join(companions)} at its pins" if companions else ""
    print(f"[deferlab] repro: claim {info['claim']} ({info['system']}'s counterexample, model family {info['family']}) "
          f"on {engine} {spec}{loads}", file=log)  # fmt: skip
    try:
        rc, out, err = run_files([args.file], side.run_spec, engine=engine, companions=companions)
    except LoadError as e:
        raise UsageError(f"--{engine}: {e}") from None
    sys.stdout.write(out)
    if err.strip():
        log.write(err)
    said = {0: "passes: the claim holds there", 1: "fails: the flaw is there", None: "did not finish in 600 s"}
    print(f"[deferlab] repro: {said.get(rc, f'pytest exited {rc}')}", file=log, flush=True)
    return {0: 0, 1: 1}.get(rc, 3) if rc is not None else 3
