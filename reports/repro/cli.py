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

``deferlab repro FILE --sglang SPEC`` (``--vllm SPEC`` for a vLLM reproducer)
runs one on a machine without the engine's dependencies: a child process
loads SPEC with deferlab's loader (`impl.sglang.sources.load` or
`impl.vllm.sources.load`, which install the engine's modules under their real
names), then runs pytest on the file in that process. Exit status: 0 the
reproducer passes (the claim holds on SPEC), 1 it fails (the flaw is there),
2 bad usage (not a reproducer, the other engine's option, a SPEC that cannot
be loaded), 3 pytest could not run it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system.errors import UsageError
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.core.grouping import failure_text, short
from deferlab.reports.repro.templates import render

FORMAT = 1
FIRST_LINE = re.compile(rf"# deferlab reproducer \(format {FORMAT}\): claim (\S+) on (\S+)")
ACCEPTED = (
    "accepted: a repro/<claim>-<system>.py file written by deferlab (its first line is '# deferlab reproducer ...')"
)
LOAD_FAILED = "deferlab-repro: cannot load: "
ENGINES = ("sglang", "vllm")
TITLE = {"sglang": "SGLang", "vllm": "vLLM"}
A_TITLE = {"sglang": "an SGLang", "vllm": "a vLLM"}
RUN_LINE = re.compile(r"# Run: pytest THIS_FILE .* deferlab repro THIS_FILE --(\w+) SPEC")
WARM_ENV = "DEFERLAB_REPRO_WARM"  # 0: every run in a new process (the test suite sets it)
WARM_IDLE_DEFAULT = 600
RUNNER = (
    "import importlib, os, sys\n"
    "from deferlab.reference.system.errors import DeferlabInputError\n"
    "try:\n"
    "    importlib.import_module(f'deferlab.impl.{sys.argv[2]}.sources').load(sys.argv[1])\n"
    "except DeferlabInputError as e:\n"
    f"    print({LOAD_FAILED!r} + ((str(e).splitlines() or [''])[0] or type(e).__name__), file=sys.stderr)\n"
    "    sys.exit(99)\n"
    "import pytest\n"
    "files = sys.argv[4:]\n"
    "opts = ['-q', '-p', 'no:cacheprovider', '--noconftest', '-c', os.devnull, '--import-mode=importlib',\n"
    "        '--rootdir', os.path.commonpath([os.path.dirname(f) for f in files]), '-W', 'ignore::DeprecationWarning']\n"
    "sys.exit(pytest.main(files + opts + (['--junitxml', sys.argv[3]] if sys.argv[3] else [])))\n"
)


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
    """The comment block `FIRST_LINE` opens: claim, system, the counterexample's source, deferlab's version, and
    how to run it (its ``--<engine> SPEC`` option is what `read_header` reads the engine from)."""
    name = system.get("name") or spec
    lines = [f"# deferlab reproducer (format {FORMAT}): claim {row['id']} on {name}"]
    lines += _comment("Claim", f"{row['id']}: {row.get('statement', '')}")
    commit = system.get("commit") or "-"
    lines += _comment("System", f"{name} ({system.get('kind', '?')} {system.get('version', '?')}, commit {commit})")
    lines += _comment("Spec", spec)
    lines += _comment("Flaw", what)
    lines += _comment("Recorded failure", failure_text(str(row.get("evidence", ""))))
    lines += _comment(
        "Counterexample", f"deferlab's minimal counterexample, from {source}: {row.get('counterexample')}"
    )
    lines += _comment("Written by", f"deferlab {deferlab_version()}")
    lines += [
        f"# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --{engine} SPEC (deferlab's",
        f"#   loader: no {TITLE[engine]} dependencies needed). It fails while the flaw is there and passes once it is fixed.",
    ]
    return "\n".join(lines) + "\n"


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
            missing.append(f"{row['id']} on {name}: no reproducer template fits this failure ({short(failure, 120)})")
            continue
        code, what = made
        text = header(row, system, spec, source, what, engine)
        text += f'"""Reproducer of claim {row["id"]}: {what}."""\n\n' + code
        written.append(write_text_atomic(out / "repro" / f"{row['id']}-{name}.py", text))
    return written, missing


# --- deferlab repro FILE --------------------------------------------------------------------------------------------
def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("repro", help="run one of deferlab's reproducers on its engine through deferlab's loader")
    p.add_argument("file", type=Path, metavar="FILE", help="a repro/<claim>-<system>.py written by deferlab")
    p.add_argument("--sglang", metavar="SPEC", help="the SGLang to run an SGLang reproducer on (default: its Spec)")
    p.add_argument("--vllm", metavar="SPEC", help="the vLLM to run a vLLM reproducer on (default: its Spec)")
    p.add_argument(
        "--cold",
        action="store_true",
        help="a new process, not the warm daemon for SPEC (which a first run starts and later runs reuse; it ends "
        f"after {WARM_IDLE_DEFAULT} s idle)",
    )
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
    return {"claim": m.group(1), "system": m.group(2), "spec": spec, "engine": engine}


def _pytest_argv(paths: list[Path], junitxml: Path | None) -> list[str]:
    """RUNNER's pytest arguments, for a warm run (the same files, options and per-test results file)."""
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
    warm: bool = False,
) -> subprocess.CompletedProcess:
    """The child process: load ``spec`` of ``engine``, then pytest on ``paths`` (no plugins autoloaded, no
    conftest, no ini); ``junitxml``: also pytest's per-test results there. Exit 99 with `LOAD_FAILED` on stderr:
    ``spec`` failed to load. ``warm``: forked from the daemon for ``spec`` (`reports.mutate.warm.run_served`: the engine
    and deferlab imported afresh, the rest warm; output on stdout), cold when no daemon can serve it."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    cmd = [sys.executable, "-c", RUNNER, spec, engine, str(junitxml or ""), *(str(p.resolve()) for p in paths)]
    if warm:
        import tempfile

        from deferlab.reports.mutate import warm as warm_server

        env.setdefault(warm_server.IDLE_ENV, str(WARM_IDLE_DEFAULT))
        with tempfile.TemporaryDirectory(prefix="deferlab-repro-") as tmp:
            log = Path(tmp) / "pytest.log"
            got = warm_server.run_served(
                engine, spec, _pytest_argv(paths, junitxml), env=env, cwd=Path.cwd(), log=log, timeout=timeout
            )
            if got is not None and not got.timed_out:
                return subprocess.CompletedProcess(cmd, got.rc, log.read_text(errors="replace"), "")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def run(args: argparse.Namespace, log: TextIO | None = None) -> int:
    """Run the reproducer; returns the exit status (see the module docstring)."""
    log = log or sys.stderr
    info = read_header(args.file)
    engine = info["engine"]
    given = {e: getattr(args, e, None) for e in ENGINES if getattr(args, e, None) is not None}
    for other in given:
        if other != engine:
            raise UsageError(
                f"--{other}: {str(args.file)!r} is {A_TITLE[engine]} reproducer (claim "
                f"{info['claim']} on {info['system']}); accepted for it: --{engine} SPEC, or no option (its Spec)"
            )
    spec = (given.get(engine) or info["spec"]).strip()
    if not spec:
        raise UsageError(f"--{engine}: {str(args.file)!r} names no Spec in its header; give --{engine} SPEC")
    print(f"[deferlab] repro: claim {info['claim']} ({info['system']}'s counterexample) on {engine} {spec}", file=log)
    warm = not getattr(args, "cold", False) and os.environ.get(WARM_ENV, "1").strip() != "0"
    proc = run_files([args.file], spec, engine=engine, warm=warm)
    failed = next((x for x in proc.stderr.splitlines() if x.startswith(LOAD_FAILED)), None)
    if proc.returncode == 99 and failed is not None:
        raise UsageError(f"--{engine}: {failed[len(LOAD_FAILED) :]}")
    sys.stdout.write(proc.stdout)
    if proc.stderr.strip():
        log.write(proc.stderr)
    verdict = {0: "passes: the claim holds there", 1: "fails: the flaw is there"}.get(proc.returncode)
    print(f"[deferlab] repro: {verdict or f'pytest exited {proc.returncode}'}", file=log, flush=True)
    return {0: 0, 1: 1}.get(proc.returncode, 3)
