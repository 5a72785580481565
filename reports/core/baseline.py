"""The one baseline type: what a gated run is compared with, for ``report``, ``versions`` and ``mutate``.

A baseline is cells (where -> subject -> verdict: a policy or a release, then a claim; a campaign's spec,
then a mutant and its outcome), the failure signature sets of its failing cells, the profile its searches
ran under, and what else its command pins (``meta``: the report's config, sweep counters and benchmark
ratios; a campaign's sample, seed and targets). `reports.core.diff` compares a run with it.

Schema 2 (``{"schema_version": 2, "kind", "profile", "cells", "signatures", "meta"}``, and ``"severities"``: a
failing cell's class, semantics §21.3, where the run classed it) is what is written;
the three files written before it (schema 1: the report's ``claims`` keyed ``C1/POLICY``, the versions
matrix's ``verdicts`` keyed by release, a campaign's ``outcomes`` keyed by mutant) are still read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deferlab.reference.system.impact import LABELS
from deferlab.reference.system.systems import claim_key, column_key
from deferlab.reports.core.atomic import write_text_atomic
from deferlab.reports.core.diff import Cell

SCHEMA_VERSION = 2
KINDS = ("report", "versions", "mutate")


@dataclass
class Baseline:
    """Cells (where -> subject -> verdict), their signature sets, the searches' profile and ``meta``."""

    kind: str
    profile: str | None = None
    cells: dict[str, dict[str, str]] = field(default_factory=dict)
    signatures: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    severities: dict[str, dict[str, str]] = field(default_factory=dict)  # where -> subject -> class (§21.3)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"baseline kind must be one of {KINDS}, got {self.kind!r}")

    def as_cells(self) -> dict[tuple[str, str], Cell]:
        """(subject, where) -> `Cell`, what `reports.core.diff.diff` takes."""
        return {
            (subject, where): Cell(verdict, frozenset(self.signatures.get(where, {}).get(subject, ())))
            for where, row in self.cells.items()
            for subject, verdict in row.items()
        }

    @classmethod
    def of(
        cls,
        kind: str,
        cells: Mapping[tuple[str, str], Cell],
        *,
        profile: str | None,
        meta: Mapping[str, Any] | None = None,
    ) -> Baseline:
        """A baseline pinning ``cells`` (a failing cell's signatures with it)."""
        out = cls(kind, profile, meta=dict(meta or {}))
        for (subject, where), cell in cells.items():
            out.cells.setdefault(where, {})[subject] = cell.verdict
            if cell.verdict == "fails" and cell.signatures:
                out.signatures.setdefault(where, {})[subject] = sorted(cell.signatures)
        return out

    def worse(self, now: Mapping[str, Mapping[str, str | None]]) -> list[tuple[str, str, str, str]]:
        """(where, subject, class then, class now) of each cell this baseline classed that ``now`` (where ->
        subject -> class) classes worse (semantics §21.3: a tower-input difference that became a crash); a
        baseline written before it recorded classes says nothing."""
        out = []
        for where, per in self.severities.items():
            for subject, was in per.items():
                current = now.get(where, {}).get(subject)
                if current in LABELS and was in LABELS and LABELS[current] > LABELS[was]:
                    out.append((where, subject, was, str(current)))
        return out

    def replacing(self, other: Baseline) -> Baseline:
        """This baseline with every place ``other`` has replaced by ``other``'s (a versions run of some releases
        updates those and keeps the rest); ``other``'s profile and meta win."""
        cells = {**self.cells, **other.cells}
        signatures = {w: s for w, s in self.signatures.items() if w not in other.cells}
        signatures.update(other.signatures)
        severities = {w: s for w, s in self.severities.items() if w not in other.cells}
        severities.update(other.severities)
        return Baseline(self.kind, other.profile, cells, signatures, {**self.meta, **other.meta}, severities)

    def document(self) -> dict[str, Any]:
        """The schema-2 JSON document, places and subjects in a stable order."""
        order = _place_order(self.kind)
        cells = {
            w: dict(sorted(r.items(), key=lambda kv: claim_key(kv[0])))
            for w, r in sorted(self.cells.items(), key=order)
        }
        sigs = {
            w: dict(sorted(r.items(), key=lambda kv: claim_key(kv[0])))
            for w, r in sorted(self.signatures.items(), key=order)
        }
        out = {"schema_version": SCHEMA_VERSION, "kind": self.kind, "profile": self.profile, "cells": cells,
               "signatures": sigs, "meta": self.meta}  # fmt: skip
        if self.severities:  # written only where a run classed its failing cells (a file without it still reads)
            out["severities"] = {
                w: dict(sorted(r.items(), key=lambda kv: claim_key(kv[0])))
                for w, r in sorted(self.severities.items(), key=order)
            }
        return out


def _place_order(kind: str) -> Any:
    if kind == "versions":
        return lambda kv: column_key(kv[0])
    return lambda kv: kv[0]


def save(path: Path, baseline: Baseline) -> None:
    """Write ``baseline`` atomically (schema 2)."""
    write_text_atomic(Path(path), json.dumps(baseline.document(), indent=1) + "\n")


def load(path: Path, kind: str | None = None) -> Baseline:
    """Read a baseline of any schema (2, or one of the three schema-1 files); ValueError naming the file when it
    is missing, not JSON, not a baseline, or not of ``kind``."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"baseline {str(p)!r} does not exist")
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read baseline {str(p)!r}: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"baseline {str(p)!r} is not a JSON object")
    found = _read(doc, str(p))
    if kind is not None and found.kind != kind:
        raise ValueError(f"{str(p)!r} is a {found.kind} baseline; a {kind} baseline is needed here")
    return found


def _read(doc: dict[str, Any], where: str) -> Baseline:
    version = doc.get("schema_version")
    if version == SCHEMA_VERSION:
        for key in ("cells", "signatures", "meta", "severities"):
            if not isinstance(doc.get(key, {}), dict):
                raise ValueError(f"baseline {where!r}: {key!r} must be an object")
        return Baseline(
            str(doc.get("kind")),
            doc.get("profile"),
            doc.get("cells", {}),
            doc.get("signatures", {}),
            doc.get("meta", {}),
            doc.get("severities", {}),
        )
    if version != 1:
        raise ValueError(f"{where!r} is not a deferlab baseline (schema_version 1 or {SCHEMA_VERSION})")
    if isinstance(doc.get("outcomes"), dict):
        return _mutate_v1(doc)
    if isinstance(doc.get("verdicts"), dict):
        sigs = doc.get("signatures", {})
        if not isinstance(sigs, dict):
            raise ValueError(f"versions baseline {where!r}: 'signatures' must be an object")
        return Baseline("versions", doc.get("profile"), doc["verdicts"], sigs)
    if isinstance(doc.get("claims"), dict):
        return _report_v1(doc, where)
    raise ValueError(f"{where!r} is not a deferlab baseline (no cells, claims, verdicts or outcomes)")


def _report_v1(doc: dict[str, Any], where: str) -> Baseline:
    for key in ("sweeps", "benchmarks", "signatures"):
        if not isinstance(doc.get(key, {}), dict):
            raise ValueError(f"baseline {where!r}: {key!r} must be an object")
    out = Baseline("report", doc.get("claims_profile") or doc.get("profile"))
    for key, verdict in doc["claims"].items():
        cid, _, policy = key.partition("/")
        out.cells.setdefault(policy, {})[cid] = verdict
    for key, sigs in doc.get("signatures", {}).items():
        cid, _, policy = key.partition("/")
        out.signatures.setdefault(policy, {})[cid] = list(sigs)
    out.meta = {k: doc[k] for k in ("config", "sweep_grid", "sweeps", "benchmarks") if k in doc}
    return out


def _mutate_v1(doc: dict[str, Any]) -> Baseline:
    spec = str(doc.get("spec", ""))
    meta = {k: doc[k] for k in ("spec", "sample", "seed", "targets", "claims") if k in doc}
    return Baseline("mutate", doc.get("profile"), {spec: dict(doc["outcomes"])}, {}, meta)
