"""Findings as data, markdown and an issue text a maintainer can paste (semantics §21.4).

Why an issue text per finding: a red cell says that something differs; an engine maintainer needs the function,
the releases, the smallest input, what the checkpoint gives against what is served, and how much it matters.
Defects (crash, sequence, tower-input) are listed first, worst first; float32-only and cost findings are folded
into a short list at the end: they are true, and informational.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from packaging.version import InvalidVersion, Version

from deferlab.reference.system.impact import LABELS, Severity
from deferlab.reference.system.systems import ENGINES
from deferlab.reference.system.systems import MODEL as MODEL_ENGINE
from deferlab.reports.core.claims import load_claim_statements
from deferlab.reports.findings import patched
from deferlab.reports.findings.group import Finding
from deferlab.reports.findings.numbers import expected_served, measure

MEANING = {
    Severity.CRASH: "an input the checkpoint accepts is refused or crashes the engine (or the reverse)",
    Severity.SEQUENCE: "the prompt the model sees changes (tokens, tiles, grid, frames or times)",
    Severity.TOWER_INPUT: "the pixel tensor the vision tower gets differs in its dtype (bf16)",
    Severity.FLOAT32_ONLY: "differs in float32 only; equal after the cast to the tower's dtype (informational)",
    Severity.COST: "the model gets the same input; time, memory or placement differ (informational)",
}
_LABELS = {
    "sizes": "sizes",
    "tokens": "tokens",
    "realistic": "share of realistic uploads (semantics §21.5, measured in the claim run)",
    "realistic_tokens": "tokens on the affected realistic inputs",
    "pixels": "the tower's input at the minimal input",
    "not_measured": "impact numbers the claim run could not measure",
    "max_levels": "largest difference (uint8 levels)",
    "max_ulps": "largest difference (float32 ulps, as recorded)",
    "unexplained": "values unexplained",
    "classes": "image classes that differ",
    "fp32_differ": "values differing in float32 (worst cell)",
    "bf16_differ_max": "values differing after the BF16 cast (worst cell)",
    "errors": "errors raised",
    "takes": "inputs the engine serves that the checkpoint refuses (the checkpoint's exception)",
    "patches": "patches the owner materializes (C11)",
    "placement": "placement decisions (C10)",
}


def _version_key(text: str) -> tuple[int, Any]:
    try:
        return 0, Version(text)
    except InvalidVersion:
        return 1, text


def _short(value: Any, limit: int = 240) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def span(d: dict[str, Any]) -> str:
    """The releases a finding spans: one, or first-last."""
    first, last = d["releases"]["first"], d["releases"]["last"]
    return first if first == last else f"{first}-{last}"


def display(engine: str) -> str:
    """An engine's display name; deferlab's own model (a report's policy columns) is named as such."""
    facts = ENGINES.get(engine)
    if facts is not None:
        return facts.display
    return "deferlab's model" if engine in (MODEL_ENGINE, "deferlab") else engine


def _reproduce(engine: str, version: str, family: str, claim: str) -> str:
    facts = ENGINES.get(engine)
    if facts is None:  # deferlab's model: its claim tests, under the policy column that failed
        return f"deferlab report --profile ci (the {claim} column {version} of deferlab's model)"
    where = version if engine == next(iter(ENGINES)) else f"{facts.option} {version}"
    model = f" --model {family}" if family else ""
    return f"deferlab versions {where}{model} --claims {claim}"


def describe(f: Finding, number: int, statements: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """The finding as plain data, its issue text included; a crash is expected to do what its claim states."""
    statements = statements or {}
    rep = f.representative()
    versions = sorted({m.version for m in f.members}, key=_version_key)
    expected, served = expected_served(rep)
    if f.severity == Severity.CRASH and rep.claim in statements:
        expected = f"{rep.claim}: {statements[rep.claim]['statement']}"
    claims = list(dict.fromkeys(m.claim for m in f.members))
    data = {
        "id": f"F{number}",
        "severity": f.severity.label,
        "engine": f.engine,
        "function": f.function,
        "effect": f.effect,
        "claims": claims,
        "releases": {"first": versions[0], "last": versions[-1], "all": versions},
        "families": sorted({m.family for m in f.members if m.family}),
        "paths": sorted({m.path for m in f.members}),
        "cells": [{"claim": m.claim, "column": m.column, "severity": m.severity.label} for m in f.members],
        "minimal_input": rep.given,
        "minimal_cell": {"claim": rep.claim, "column": rep.column},
        "expected": expected,
        "served": served,
        "impact": measure(f),
        "failure": rep.texts[0] if rep.texts else rep.row.failure,
    }
    data["issue"] = issue(data, rep.family, rep.version)
    return data


def issue(d: dict[str, Any], family: str, version: str) -> str:
    """A markdown issue a maintainer can paste: the finding, its evidence and how to reproduce it."""
    engine = display(d["engine"])
    releases = span(d)
    impact = "\n".join(
        f"- {_LABELS.get(k, k)}: {', '.join(v) if isinstance(v, list) else v}" for k, v in d["impact"].items()
    )
    cells = ", ".join(f"{c['claim']} `{c['column']}` ({c['severity']})" for c in d["cells"])
    return "\n".join([
        f"### [{d['severity']}] {engine} {releases}: {', '.join(d['claims'])} ({d['effect']}) in `{d['function']}`",
        "",
        f"**What the model gets.** {MEANING[LABELS[d['severity']]]}.",
        f"**Where.** `{d['function']}` ({engine} {releases}); families: {', '.join(d['families']) or 'the default'}; "
        f"paths: {', '.join(d['paths'])}.",
        f"**Minimal input.** `{_short(d['minimal_input'])}` (claim {d['minimal_cell']['claim']}, column "
        f"`{d['minimal_cell']['column']}`)",
        f"**Expected (the checkpoint, or the claim for a crash).** {_short(d['expected'])}",
        f"**Served.** {_short(d['served'])}",
        "**Impact.**" + ("\n" + impact if impact else " no number recorded beyond the failure"),
        f"**Cells.** {cells}",
        f"**Failure as recorded.** `{_short(d['failure'], 400)}`",
        f"**Reproduce.** `{_reproduce(d['engine'], version, family, d['minimal_cell']['claim'])}` "
        "(deferlab runs the release's own code from its wheel; semantics §21)",
    ]).replace("\n**", "\n\n**").replace("\n\n\n", "\n\n")  # fmt: skip


def reproducer_line(d: dict[str, Any]) -> str:
    """The finding's standalone reproducer (`reports.findings.repro`), or why it has none: never a blank."""
    if d.get("reproducer"):
        return (
            f"**Standalone reproducer.** [{d['reproducer']}]({d['reproducer']}): `pytest {d['reproducer']}` where "
            f"the release is installed or its wheel unpacked on `sys.path` (no deferlab import); it fails while the "
            "defect is there"
        )
    why = d.get("no_reproducer") or "not written here (`deferlab findings RESULTS` writes each finding's script)"
    return f"**Standalone reproducer.** none: {why}"


def picture_line(d: dict[str, Any]) -> str:
    """The finding's picture in findings.md (`pictures.draw`), or why it has none: never a blank."""
    if d.get("picture"):
        return f"**Picture.** ![{d['id']}]({d['picture']})"
    why = d.get("no_picture") or "not drawn here (`deferlab findings RESULTS` draws each finding's picture)"
    return f"**Picture.** no picture: {why}"


def document(findings: list[Finding], source: str, errored: int = 0) -> dict[str, Any]:
    """findings.json: the findings worst first, numbered, with counts per class."""
    statements = load_claim_statements()
    described = [describe(f, i, statements) for i, f in enumerate(findings, 1)]
    counts = Counter(d["severity"] for d in described)
    return {
        "schema": "deferlab-findings",
        "schema_version": 1,
        "source": source,
        "errored": errored,
        "counts": {s.label: counts.get(s.label, 0) for s in sorted(Severity, reverse=True)},
        "findings": described,
    }


def _line(d: dict[str, Any], code: bool = False) -> str:
    releases = span(d)
    said = {
        "sizes": "{}", "tokens": "{}", "realistic": "{}", "max_levels": "up to {} levels",
        "bf16_differ_max": "{} values differ after BF16",
        "errors": "raises {}",
        "takes": "serves what the checkpoint refuses ({})",
    }  # fmt: skip
    impact = d["impact"]
    numbers = "; ".join(
        said[k].format(", ".join(impact[k]) if isinstance(impact[k], list) else impact[k])
        for k in said
        if k in impact and impact[k] != 0
    )
    return (
        f"{d['id']} [{d['severity']}] {display(d['engine'])} {releases} {_fn(d, code)} "
        f"({', '.join(d['claims'])}; {', '.join(d['families']) or 'default family'})"
        + (f": {numbers}" if numbers else "")
    )


def _fn(d: dict[str, Any], code: bool) -> str:
    return f"`{d['function']}`" if code else d["function"]


def summary(doc: dict[str, Any], code: bool = False, linked: bool = False) -> str:
    """The stdout summary: counts, then one line per defect finding, then the informational ones in short
    (``code``: each function set as markdown code, for markdown; ``linked``: a defect's line links its picture,
    `pictures.draw`, when it has one)."""
    counts = ", ".join(f"{n} {label}" for label, n in doc["counts"].items())
    lines = [f"{len(doc['findings'])} findings ({counts}) from {doc['source']}"]
    if doc.get("errored"):
        lines.append(f"not findings: {doc['errored']} claim runs errored (see the document's errors)")
    lines += [
        _line(d, code) + (f" ([picture]({d['picture']}))" if linked and d.get("picture") else "")
        for d in doc["findings"]
        if LABELS[d["severity"]].defect
    ]
    folded = [d for d in doc["findings"] if not LABELS[d["severity"]].defect]
    if folded:
        lines.append(f"informational ({len(folded)}): " + "; ".join(f"{d['id']} {_fn(d, code)}" for d in folded))
    return "\n".join(lines) + "\n"


def markdown(doc: dict[str, Any]) -> str:
    """findings.md: a table of every finding, each defect's issue text, then the informational list."""
    defects = [d for d in doc["findings"] if LABELS[d["severity"]].defect]
    folded = [d for d in doc["findings"] if d not in defects]
    out = [
        "# Findings",
        "",
        f"From `{doc['source']}`: {len(doc['findings'])} findings, one per root cause (semantics §21.4); "
        + ", ".join(f"{n} {label}" for label, n in doc["counts"].items())
        + ". Classes worst first: crash > sequence > tower-input > float32-only > cost (semantics §21.1).",
        "",
        "| id | class | engine | releases | function | claims | families | cells |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in defects:
        releases = span(d)
        out.append(
            f"| {d['id']} | {d['severity']} | {display(d['engine'])} | {releases} | `{d['function']}` | "
            f"{', '.join(d['claims'])} | {', '.join(d['families'])} | {len(d['cells'])} |"
        )
    out.append("")
    out += patched.lines(doc)
    for d in defects:
        with_patch = [line, ""] if (line := patched.finding_line(d)) else []
        out += [d["issue"], "", *with_patch, reproducer_line(d), "", picture_line(d), ""]
    if folded:
        out += ["", "## Informational (float32-only and cost: never a defect)", ""]
        for d in folded:
            out.append(f"- {_line(d)}")
    return "\n".join(out) + "\n"
