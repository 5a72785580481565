"""Upstream-ready reproducers: ``repro/<claim>-<system>.py`` per failing claim, and ``deferlab repro FILE``.

Why: a counterexample in a report is a repr string; an upstream maintainer
needs a test they can run. Each reproducer is a short standalone pytest file
(a template of `reports.repro_templates` filled from the minimal
counterexample) that calls the engine's own functions by import path
(``sglang.srt...``), so it runs wherever that engine is installed; it asserts
the claim, so it fails on the code as it is and passes once the flaw is
fixed. A header comment names the claim, the system, where the counterexample
came from and deferlab's version; ``deferlab repro`` reads that header to
refuse any other file.

``deferlab repro FILE --sglang SPEC`` runs one on a machine without the
engine's dependencies: a child process loads SPEC with deferlab's loader
(`impl.sglang.sources.load`, which installs SGLang's modules under their real
names), then runs pytest on the file in that process. Exit status: 0 the
reproducer passes (the claim holds on SPEC), 1 it fails (the flaw is there),
2 bad usage (not a reproducer, a SPEC that cannot be loaded), 3 pytest could
not run it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from deferlab.reference.system.errors import UsageError
from deferlab.reports.atomic import write_text_atomic
from deferlab.reports.grouping import failure_text, short
from deferlab.reports.repro_templates import render

FORMAT = 1
FIRST_LINE = re.compile(rf"# deferlab reproducer \(format {FORMAT}\): claim (\S+) on (\S+)")
ACCEPTED = (
    "accepted: a repro/<claim>-<system>.py file written by deferlab (its first line is '# deferlab reproducer ...')"
)
LOAD_FAILED = "deferlab-repro: cannot load: "
RUNNER = (
    "import os, sys\n"
    "from deferlab.reference.system.errors import DeferlabInputError\n"
    "try:\n"
    "    from deferlab.impl.sglang.sources import load\n"
    "    load(sys.argv[1])\n"
    "except DeferlabInputError as e:\n"
    f"    print({LOAD_FAILED!r} + ((str(e).splitlines() or [''])[0] or type(e).__name__), file=sys.stderr)\n"
    "    sys.exit(99)\n"
    "import pytest\n"
    "files = sys.argv[3:]\n"
    "opts = ['-q', '-p', 'no:cacheprovider', '--noconftest', '-c', os.devnull, '--import-mode=importlib',\n"
    "        '--rootdir', os.path.commonpath([os.path.dirname(f) for f in files]), '-W', 'ignore::DeprecationWarning']\n"
    "sys.exit(pytest.main(files + opts + (['--junitxml', sys.argv[2]] if sys.argv[2] else [])))\n"
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


def header(row: dict[str, Any], system: dict[str, Any], spec: str, source: str, what: str) -> str:
    """The comment block `FIRST_LINE` opens: claim, system, the counterexample's source, deferlab's version."""
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
        "# Run: pytest THIS_FILE where that engine is installed, or deferlab repro THIS_FILE --sglang SPEC (deferlab's",
        "#   loader: no SGLang dependencies needed). It fails while the flaw is there and passes once it is fixed.",
    ]
    return "\n".join(lines) + "\n"


def write_reproducers(
    rows: Iterable[dict[str, Any]], system: dict[str, Any] | None, spec: str, out: Path, *, source: str
) -> tuple[list[Path], list[str]]:
    """``out/repro/<claim>-<system>.py`` for each failing row a template fits; (files written, one line per
    failing claim that got none, saying why)."""
    system = system or {}
    name = safe_name(system.get("name") or spec)
    written, missing = [], []
    for row in rows:
        if row.get("verdict") != "fails":
            continue
        failure = failure_text(str(row.get("evidence", "")))
        made = render(str(row["id"]), row.get("counterexample"), failure)
        if made is None:
            missing.append(f"{row['id']} on {name}: no reproducer template fits this failure ({short(failure, 120)})")
            continue
        code, what = made
        text = header(row, system, spec, source, what) + f'"""Reproducer of claim {row["id"]}: {what}."""\n\n' + code
        written.append(write_text_atomic(out / "repro" / f"{row['id']}-{name}.py", text))
    return written, missing


# --- deferlab repro FILE --------------------------------------------------------------------------------------------
def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("repro", help="run one of deferlab's reproducers on an SGLang through deferlab's loader")
    p.add_argument("file", type=Path, metavar="FILE", help="a repro/<claim>-<system>.py written by deferlab")
    p.add_argument("--sglang", metavar="SPEC", help="the SGLang to run it on (default: the Spec its header names)")
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
    spec = next((x[len("# Spec: ") :].strip() for x in lines[:20] if x.startswith("# Spec: ")), "")
    return {"claim": m.group(1), "system": m.group(2), "spec": spec}


def run_files(
    paths: list[Path], spec: str, *, junitxml: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """The child process: load ``spec``, then pytest on ``paths`` (no plugins autoloaded, no conftest, no ini);
    ``junitxml``: also pytest's per-test results there. Exit 99 with `LOAD_FAILED` on stderr: ``spec`` failed."""
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    cmd = [sys.executable, "-c", RUNNER, spec, str(junitxml or ""), *(str(p.resolve()) for p in paths)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def run(args: argparse.Namespace, log: TextIO | None = None) -> int:
    """Run the reproducer; returns the exit status (see the module docstring)."""
    log = log or sys.stderr
    info = read_header(args.file)
    spec = (args.sglang or info["spec"]).strip()
    if not spec:
        raise UsageError(f"--sglang: {str(args.file)!r} names no Spec in its header; give --sglang SPEC")
    print(f"[deferlab] repro: claim {info['claim']} ({info['system']}'s counterexample) on sglang {spec}", file=log)
    proc = run_files([args.file], spec)
    failed = next((x for x in proc.stderr.splitlines() if x.startswith(LOAD_FAILED)), None)
    if proc.returncode == 99 and failed is not None:
        raise UsageError(f"--sglang: {failed[len(LOAD_FAILED) :]}")
    sys.stdout.write(proc.stdout)
    if proc.stderr.strip():
        log.write(proc.stderr)
    verdict = {0: "passes: the claim holds there", 1: "fails: the flaw is there"}.get(proc.returncode)
    print(f"[deferlab] repro: {verdict or f'pytest exited {proc.returncode}'}", file=log, flush=True)
    return {0: 0, 1: 1}.get(proc.returncode, 3)
