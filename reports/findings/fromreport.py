"""A report's claim rows as the versions-like document `group` reads, and the findings section leading report.md.

Why an adapter: findings are grouped from a versions.json (columns naming engine, version, family and path; per
column and claim the verdict, evidence, signatures, counterexample, provenance, impact and figure). A report
(`deferlab report`) holds the same facts as one row per (claim, column) in ``report["claims"]`` and names its
engines in ``impl`` and ``systems``; laid out as a versions document, the same grouping, numbers and wording
serve both, so a root cause reads the same in report.md, versions.md and findings.md. A report on deferlab's own
model has no engine: its columns are the modelled policies (PR_33921, RELEASED), each a "release" of engine
``model`` (shown as deferlab's model), so a flaw of the model under two policies is one finding too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.impact import CLAIM_CLASS
from deferlab.reference.system.rows import Column
from deferlab.reference.system.signatures import signature_set
from deferlab.reference.system.systems import MODEL, engine_of_label
from deferlab.reports.core import grouping
from deferlab.reports.findings import render
from deferlab.reports.findings.group import group

PER_CELL = ("evidence", "signatures", "counterexamples", "provenance", "impact", "figures")


def _versions(report: Mapping[str, Any]) -> dict[str, str]:
    """engine -> the version that ran: the loaded system's version, else the spec the report names in ``impl``."""
    specs = dict(p.split(":", 1) for p in str(report.get("impl") or "").split("+") if ":" in p)
    systems = report.get("systems") or {}
    out = {}
    for engine, spec in specs.items():
        found = systems.get(engine) or {}
        out[engine] = str(found.get("version") or found.get("system") or spec)
    return out


def column(report: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A report column (``SGLANG``, ``qwen3-vl:VLLM host-normalized``, a policy such as ``RELEASED``) as a
    versions.json column: engine, version, family, path (a policy: engine `MODEL`, its version the policy)."""
    found = Column.parse(name)
    family, label, path = found.family_name, found.label, found.path or None
    facts = engine_of_label(label)
    if facts is None:
        return {"release": label, "engine": MODEL, "version": label, "family": family, "path": path}
    version = _versions(report).get(facts.name, "unknown")
    return {"release": version, "engine": facts.name, "version": version, "family": family, "path": path}


def versions_like(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's claim rows (of claims with a severity class, semantics §21.2) as a versions-like document:
    what `reports.findings.group.group` and `reports.findings.pictures.draw` read."""
    doc: dict[str, Any] = {"schema_version": 1, "columns": {}, "verdicts": {}, "failure_groups": [], "errors": {}}
    doc.update({k: {} for k in PER_CELL})
    for r in report.get("claims") or []:
        if not isinstance(r, Mapping) or "id" not in r or "policy" not in r:
            raise InputValueError(f"report claim row {r!r}: needs 'id' and 'policy'; accepted: report.json's claims")
        cid, col = str(r["id"]), str(r["policy"])
        if cid not in CLAIM_CLASS:
            continue
        doc["columns"].setdefault(col, column(report, col))
        doc["verdicts"].setdefault(cid, {})[col] = str(r.get("verdict"))
        evidence = str(r.get("evidence") or "")
        cell = {
            "evidence": evidence,
            "signatures": sorted(signature_set(r)),
            "counterexamples": r.get("counterexample"),
            "provenance": r.get("provenance") or {},
            "impact": r.get("impact"),
            "figures": r.get("figure"),
        }
        for key, value in cell.items():
            if value:
                doc[key].setdefault(col, {})[cid] = value
        if r.get("verdict") == "fails":
            doc["failure_groups"].append({"claim": cid, "where": [col], "failure": grouping.failure_text(evidence)})
    return doc


def findings(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's findings as findings.json holds them (`render.document`), worst first."""
    return render.document(group(versions_like(report)), "this report's claim rows")


def section(report: Mapping[str, Any]) -> list[str]:
    """What leads report.md after its title: one line per defect finding (class, engine and release, function,
    claims, families, key numbers) and the informational ones folded into one line, as versions.md's section."""
    head = ["## Findings: one per root cause, worst first (semantics §21.4)", ""]
    written = report.get("findings")  # written beside report.md with the pictures (`reports.report.run`)
    try:
        result = written if isinstance(written, dict) else findings(report)
    except (KeyError, TypeError, InputValueError) as e:
        return [*head, f"- The claim rows could not be read as findings ({type(e).__name__}: {e}).", ""]
    if not result["findings"]:
        return [*head, "- No finding: no claim with a severity class fails.", ""]
    if written:
        head[0] += " ([findings.md](findings.md) has each one's issue text)"
    lines = render.summary(result, code=True, linked=bool(written)).splitlines()
    return [*head, *("- " + line for line in lines), ""]
