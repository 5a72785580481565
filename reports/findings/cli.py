"""``deferlab findings RESULTS``: a versions.json's failing cells, one finding per root cause, ranked by impact.

Why a command: the versions matrix paints float32 rounding and a ten-fold token count the same red. This reads
what a run recorded (nothing is loaded, fetched or rerun), classes each failing cell by what it does to the model
(`reference.system.impact`, semantics §21), groups cells by the engine function they arise in (and, with
``--patched DOC``, says whether a patch fixes each, `reports.findings.patched`), and writes
findings.md and findings.json (atomically) with an issue text per finding, and a picture per defect finding
(``F<n>.png``, `reports.findings.pictures`). ``--fail-on CLASSES`` makes CI fail
on the classes a project cares about.

    deferlab findings reports/example/versions-newest/versions.json --out findings --fail-on crash,sequence

Exit status: 0 written (and no finding of a ``--fail-on`` class); 1 a finding of a ``--fail-on`` class; 2 bad
usage (a missing file, a file of another schema, an unknown class), before anything is written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from deferlab.reference.system.errors import InputValueError, UsageError
from deferlab.reference.system.impact import LABELS, parse_fail_on
from deferlab.reports.core.atomic import check_out_dir
from deferlab.reports.core.claims import default_out_dir
from deferlab.reports.findings import outputs, patched, render
from deferlab.reports.findings.group import group

NEEDED = ("schema_version", "columns", "verdicts", "failure_groups", "evidence", "provenance")
ACCEPTED = "accepted: a versions.json written by `deferlab versions` (schema_version 1)"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("findings", help="failing verdicts as findings: one per root cause, ranked by impact")
    p.add_argument("results", metavar="RESULTS", help="a versions.json written by `deferlab versions`")
    p.add_argument("--out", type=Path, help="output directory (default reports/out/findings-<UTC timestamp>)")
    p.add_argument(
        "--fail-on",
        metavar="CLASSES",
        default="",
        help=f"exit 1 when a finding of these classes is present (comma list of {', '.join(LABELS)})",
    )
    p.add_argument(
        "--patched",
        metavar="DOC",
        help="a versions.json of the same releases run with `--patch FILE`: each finding says whether the patch "
        "fixes it (its cells hold, or no longer fail in its function) and causes that show only with the patch",
    )
    return p


def load(path: str, name: str = "RESULTS") -> dict[str, Any]:
    """The document at ``path``, refused in one line when missing, unreadable or of another schema."""
    where = Path(path).expanduser()
    if not where.is_file():
        raise UsageError(f"{name} {path!r}: {'is a directory' if where.is_dir() else 'no such file'}; {ACCEPTED}")
    try:
        doc = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{name} {path!r}: not readable JSON ({type(e).__name__}); {ACCEPTED}") from None
    missing = [k for k in NEEDED if not isinstance(doc, dict) or k not in doc]
    if missing:
        raise UsageError(f"{name} {path!r}: another schema (no {', '.join(missing)}); {ACCEPTED}")
    if doc["schema_version"] != 1:
        raise UsageError(f"{name} {path!r}: schema_version {doc['schema_version']!r} is not 1; {ACCEPTED}")
    return doc


def run(args: argparse.Namespace) -> int:
    """Check every argument, read, group, write findings.md/json and print the summary; exit per --fail-on."""
    try:
        fail_on = parse_fail_on(args.fail_on) if args.fail_on else frozenset()
    except InputValueError as e:
        raise UsageError(str(e)) from None
    out = check_out_dir(args.out or default_out_dir(prefix="findings-"))
    doc = load(args.results)
    other = None
    if getattr(args, "patched", None):
        other = load(args.patched, "--patched")
        patched.check(doc, other, args.patched)
    try:
        findings = group(doc)
    except (KeyError, TypeError, InputValueError) as e:
        raise UsageError(
            f"RESULTS {args.results!r}: a row cannot be read ({type(e).__name__}: {e}); {ACCEPTED}"
        ) from None
    result = render.document(findings, str(args.results), errored=len(doc.get("errors") or {}))
    if other is not None:
        patched.judge(findings, result, other, str(args.patched))
    out.mkdir(parents=True, exist_ok=True)
    drawn = outputs.write(doc, result, out, str(args.results))  # pictures, reproducers (or why none), json, md
    pngs = f", {len(drawn)} pictures (F<n>.png)" if drawn else ""
    print(render.summary(result) + f"written: {out / 'findings.md'}, {out / 'findings.json'}{pngs}")
    hit = sorted({f.severity for f in findings} & fail_on, reverse=True)
    if hit:
        print(f"--fail-on: {', '.join(s.label for s in hit)} present")
        return 1
    return 0
