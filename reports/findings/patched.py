"""Whether a patch fixes each finding (issue 32 item 4, "verify a fix"): ``deferlab findings BASE --patched DOC``.

Why by root cause, not by verdict: a patch fixes a cause, and a cell may fail for several. SGLang 0.5.23's InternVL
tie-break patch makes C13 hold, while C14 still fails for its pixels: read by verdict, the tie-break finding would
look half fixed. So a finding's cell counts as fixed when the patched run holds there, or when its failures there
no longer arise in the finding's engine function (the patched document grouped the same way, semantics §21.4);
a cause that shows only with the patch (the pixels the tie-break's grid hid) is listed as new, never hidden.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.impl.loader.patching import NAME_MARK
from deferlab.reference.system.errors import UsageError
from deferlab.reports.findings.group import Finding, group

ACCEPTED = "accepted: a versions.json written by `deferlab versions --patch FILE` on releases RESULTS has"


def patch_names(doc: Mapping[str, Any]) -> list[str]:
    """The patched code names a versions document records (``sglang-0.5.23+patch.5c8f6af9``), in order."""
    names = (str(s.get("name", "")) for s in (doc.get("systems") or {}).values() if isinstance(s, Mapping))
    return list(dict.fromkeys(n for n in names if NAME_MARK in n))


def check(base: Mapping[str, Any], patched: Mapping[str, Any], where: str) -> list[str]:
    """The patched document's patch names; a one-line refusal when it ran no patch or shares no column with the
    base (a patch to other releases says nothing about these findings)."""
    names = patch_names(patched)
    if not names:
        raise UsageError(f"--patched {where!r}: no release in it was run with --patch; {ACCEPTED}")
    if not set(patched.get("columns") or {}) & set(base.get("columns") or {}):
        raise UsageError(f"--patched {where!r}: none of its columns is one of RESULTS'; {ACCEPTED}")
    return names


def _causes(findings: list[Finding]) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(engine, function) -> the (claim, column) cells a cause shows in."""
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for f in findings:
        out.setdefault((f.engine, f.function), set()).update((m.claim, m.column) for m in f.members)
    return out


def judge(findings: list[Finding], result: dict[str, Any], patched: Mapping[str, Any], where: str) -> None:
    """Add to each finding of ``result`` (the same order as ``findings``) what the patched run says of it, and to
    ``result`` the patch, the counts and the causes that show only with it."""
    verdicts: Mapping[str, Mapping[str, str]] = patched.get("verdicts") or {}
    after = _causes(group(dict(patched)))
    before = _causes(findings)
    counts = {"fixed": 0, "partly fixed": 0, "not fixed": 0, "not run with the patch": 0}
    for f, d in zip(findings, result["findings"], strict=True):
        cells = []
        for m in f.members:
            verdict = verdicts.get(m.claim, {}).get(m.column)
            still = verdict == "fails" and (m.claim, m.column) in after.get((f.engine, f.function), set())
            state = (
                "not run" if verdict in (None, "not-run")
                else "still fails here" if still
                else "fails, not here any more" if verdict == "fails"
                else verdict
            )  # fmt: skip
            cells.append({"claim": m.claim, "column": m.column, "verdict": verdict or "not-run", "cause": state})
        ran = [c for c in cells if c["cause"] != "not run"]
        fixed = [c for c in ran if c["cause"] != "still fails here"]
        status = (
            "not run with the patch" if not ran
            else "fixed" if len(fixed) == len(ran)
            else "partly fixed" if fixed
            else "not fixed"
        )  # fmt: skip
        counts[status] += 1
        d["patch"] = {"status": status, "cells": cells}
    new = [
        {"engine": engine, "function": function, "cells": sorted(f"{c} {col}" for c, col in cells)}
        for (engine, function), cells in after.items()
        if not cells <= before.get((engine, function), set())
    ]
    result["patched"] = {"source": where, "patches": patch_names(patched), "counts": counts, "new": new}


def lines(result: Mapping[str, Any]) -> list[str]:
    """findings.md's paragraph on the patch, under the summary line (none when no patched run was given)."""
    p = result.get("patched")
    if not p:
        return []
    counts = ", ".join(f"{n} {k}" for k, n in p["counts"].items() if n)
    out = [f"**With the patch** (`{'`, `'.join(p['patches'])}`, from `{p['source']}`): {counts}.", ""]
    for n in p["new"]:
        out.append(
            f"- a cause that shows only with the patch: `{n['function']}` ({n['engine']}) in "
            f"{', '.join(n['cells'])} (the patch removed a failure that hid it, or made it)"
        )
    return out + ([""] if p["new"] else [])


def finding_line(d: Mapping[str, Any]) -> str:
    """A finding's line on the patch: its status and each cell's verdict with it ('' without a patched run)."""
    p = d.get("patch")
    if not p or p["status"] == "not run with the patch":  # the summary line counts those
        return ""
    cells = "; ".join(f"{c['claim']} `{c['column']}`: {c['cause']}" for c in p["cells"])
    return f"**With the patch.** {p['status']}: {cells}"
