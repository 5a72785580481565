"""The versions matrix against its baseline (``reports/versions_baseline.json``): what regressed, and the update.

Why through the shared types: the baseline is `reports.core.baseline` (kind ``versions``: release -> claim
-> verdict, and each failing cell's signature set; the committed schema-1 file is still read, an update
writes schema 2) and the comparison is `reports.core.diff` with scope ``baseline``: every changed verdict of
a release both runs have is a regression (exit 1), and a failing claim failing in a new way (a signature
the baseline's set lacks) is one too when `signatures_gated` says so (both runs under the derandomized
``ci`` profile and the strict switch on, ``--strict`` or ``DEFERLAB_STRICT=1``); otherwise it is a note in
``versions.json``'s ``signature_notes``, as is a signature that went away. Only the cells both have are
compared: a release (or a claim, under ``--claims``) this run did not run says nothing. `fail_on` is the other
gate, ``--fail-on CLASSES``: a failing cell showing a failure of one of the classes (semantics §21), baseline or
not.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from deferlab.reference.system.impact import LABELS, Severity
from deferlab.reports.core import baseline as core_baseline
from deferlab.reports.core import diff as core_diff
from deferlab.reports.core.baseline import Baseline
from deferlab.reports.findings.group import group
from deferlab.reports.versions.matrix import severity_of
from deferlab.reports.versions.render import failure_groups

BASELINE = Path(__file__).resolve().parents[1] / "versions_baseline.json"
KIND = "versions"


def load(path: Path) -> Baseline:
    """The versions baseline at ``path`` (schema 1 or 2); ValueError naming the file otherwise."""
    return core_baseline.load(path, KIND)


def cells(doc: dict[str, Any]) -> dict[tuple[str, str], core_diff.Cell]:
    """(claim, release) -> `Cell` of this run's matrix: every claim it lists on every release it ran."""
    sigs = doc.get("signatures", {})
    return {
        (cid, v): core_diff.Cell(per[v], frozenset(sigs.get(v, {}).get(cid, ())) if per[v] == "fails" else frozenset())
        for cid, per in doc["verdicts"].items()
        for v in doc["versions"]
        if v in per
    }


def compare(doc: dict[str, Any], baseline: Baseline, *, strict: bool) -> list[dict[str, str]]:
    """A regression per (release, claim) whose verdict changed, and per new signature of a failing one when gated
    (see the module docstring); sets ``doc["signature_notes"]`` to what is shown and not gated."""
    now = cells(doc)
    before = {k: c for k, c in baseline.as_cells().items() if k in now}
    pinned = {(s, w) for w, row in baseline.signatures.items() for s in row}  # cells whose set the baseline has
    after = {k: c if k in pinned else core_diff.Cell(c.verdict) for k, c in now.items() if k in before}
    changes = core_diff.diff(before, after)  # a cell pinned without its set (written before sets): verdicts only
    gated = core_diff.signatures_gated(doc.get("profile"), baseline.profile, strict)
    gating = {id(c) for c in core_diff.regressions(changes, scope="baseline", gated=gated)}
    regs: list[dict[str, str]] = []
    notes: list[str] = []
    for c in changes:
        where, name = f"{c.subject} on {c.where}", f"{c.where}/{c.subject}"
        if c.kind == "failing differently" and id(c) in gating:
            regs += [{"kind": "signature", "name": name, "baseline": "fails", "current": f"fails in a new way: {s}"}
                     for s in c.new]  # fmt: skip
        elif id(c) in gating:
            regs.append({"kind": "verdict", "name": name, "baseline": c.before, "current": c.after})
        elif c.kind == "failing differently":
            why = "the strict switch is off" if not strict else "the search is random under this profile"
            notes += [f"{where} fails in a new way (not gated: {why}): {s}" for s in c.new]
        notes += [f"change: {where} no longer fails this way: {s}" for s in c.gone]
    for where, claim, was, now_class in worse(doc, baseline):  # a failing cell whose class got worse (§21.3)
        if gated:
            regs.append({"kind": "severity", "name": f"{where}/{claim}", "baseline": f"fails ({was})",
                         "current": f"fails ({now_class})"})  # fmt: skip
        else:
            notes.append(f"{claim} on {where} fails worse than the baseline: {was} -> {now_class} (not gated)")
    doc["signature_notes"] = notes
    return regs


def worse(doc: dict[str, Any], baseline: Baseline) -> list[tuple[str, str, str, str]]:
    """(column, claim, baseline class, class now) of each cell failing in both whose class (semantics §21.3) is
    worse now (`Baseline.worse`). Gated with the signatures: the new class comes with a new way of failing."""
    return baseline.worse(severity_of(doc))


def updated(previous: Baseline | None, doc: dict[str, Any]) -> Baseline:
    """The baseline after this run: the cells it ran replace theirs (verdicts and signature sets), every other
    cell is kept as it was (a release not run, a claim ``--claims`` left out)."""
    previous = previous or Baseline(KIND)
    ran = Baseline.of(KIND, cells(doc), profile=doc["profile"])
    classes = severity_of(doc)  # column -> claim -> class of each failing cell (semantics §21.3)
    ran.severities = {v: dict(classes[v]) for v in doc["versions"] if classes.get(v)}
    for where, row in ran.cells.items():
        sigs = {c: s for c, s in previous.signatures.get(where, {}).items() if c not in row}
        sigs.update(ran.signatures.get(where, {}))
        ran.cells[where] = {**previous.cells.get(where, {}), **row}
        ran.signatures[where] = sigs
        kept = {c: x for c, x in previous.severities.get(where, {}).items() if c not in row}
        ran.severities[where] = {**kept, **ran.severities.get(where, {})}
    ran.signatures = {w: s for w, s in ran.signatures.items() if s}
    ran.severities = {w: s for w, s in ran.severities.items() if s}
    return previous.replacing(ran)


def save(path: Path, baseline: Baseline) -> None:
    """Write ``baseline`` (schema 2, atomically)."""
    core_baseline.save(path, baseline)


def fail_on(doc: dict[str, Any], classes: Collection[Severity]) -> list[str]:
    """``--fail-on``: each failing cell that shows a failure of one of ``classes``, as ``column/claim (class)``,
    worst first. A cell shows its class (the worst of its failures, as versions.md writes it) and the class of
    each cause findings.md splits it into (semantics §21.4: a crash cell's other failures are classed on their
    own), so whatever `deferlab findings --fail-on` fails on in the same document fails here too."""
    wanted = frozenset(classes)
    found = {(LABELS[label], column, cid) for column, per in severity_of(doc).items() for cid, label in per.items()}
    found |= {(m.severity, m.column, m.claim) for f in group({**doc, "failure_groups": failure_groups(doc)})
              for m in f.members}  # fmt: skip
    hits = sorted((s, column, cid) for s, column, cid in found if s in wanted)
    return [f"{column}/{cid} ({s.label})" for s, column, cid in sorted(hits, key=lambda h: -h[0])]
