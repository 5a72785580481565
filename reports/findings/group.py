"""Failing cells grouped into findings, one per root cause (semantics §21.4).

Why this key: a versions.json records, per cell, the provenance of every step the served side ran (``step =>
module.qualname ...``) but not which step made the difference. Each claim judges one stage (C13 the tiling or
geometry, C15 the normalization, C14 what the served processor hands the tower), so the root cause is named by
the engine function at that stage, read from the provenance: the same function failing the same way on several
families, paths and releases is one finding. A refusal (crash) and a pixel difference in one cell are two causes,
so the key keeps them apart; a pixel claim whose difference is a geometry change (C14 "grid != checkpoint's") in a
column where the geometry claim fails is that geometry finding, seen again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from deferlab.reference.system.impact import Row, Severity, classify, is_crash, parts, row_from_versions, worst

EFFECT = {
    "C13": "geometry", "C17": "geometry", "C16": "sampling", "C18": "times",
    "C2": "pixels", "C7": "pixels", "C12": "pixels", "C14": "pixels", "C19": "pixels",
    "C3": "normalization", "C4": "normalization", "C15": "normalization",
    "C20": "decode", "C8": "staging", "C11": "staging",
    "C1": "gate", "C10": "gate", "C5": "placement", "C6": "placement", "C9": "ipc",
}  # fmt: skip
# Effects one function makes together are one cause: a sampler's frames decide the times told (C18 fails where
# C16 does when both arise in the same function, semantics §21.4).
CAUSE = {"times": "sampling"}
# The provenance steps that name each effect's stage, most specific first.
STAGES = {
    "geometry": (
        "tiling",
        "pre_resize",
        "geometry",
        "processor kwargs",
        "plan",
        "sampling",
        "sample",
        "num_tokens",
        "serve",
    ),
    "sampling": ("sampling", "sample", "indices", "plan", "decode", "load", "serve"),
    "times": ("times", "plan", "sampling", "sample", "serve"),
    "pixels": ("serve", "preprocess", "parse", "load", "process"),
    "normalization": ("normalize", "normalize_and_patchify", "preprocess", "serve"),
    "decode": ("load", "decode", "fetch", "serve"),
    "staging": ("materialize", "process", "deliver"),
    "gate": ("defer_decisions", "gate_paths", "defers"),
    "tokens": ("tokens", "num_tokens", "geometry", "plan", "serve"),
}
# A video geometry failure naming only the token count (C17 words the first differing field: size, padding and
# grid are equal there), so the count's own function is the cause (semantics §21.4)
TOKENS_ONLY = re.compile(r"geometry differs from the trained side's: tokens (\d+|#) != (\d+|#)")
# a pixel claim -> the sequence claims whose change it can inherit (C19's frames are C16's, its sizes C17's)
GEOMETRY_OF = {"C14": ("C13",), "C19": ("C16", "C17")}
_DOTTED = re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,})")
_METHOD = re.compile(r"\b([A-Z]\w*\.[A-Za-z_]\w+)")
_LEAD = re.compile(r"^(?:real: )?([A-Za-z_][\w.]*\w)")
_LIBRARIES = ("torch.", "numpy.", "np.", "PIL.", "msgspec.", "F.")  # libraries the engines call, not their code
TRAINED_ROWS = ("TRAINED: ", "CARD: ")  # the video claims' trained sides in a row's provenance (semantics §20.1)


@dataclasses.dataclass
class Member:
    """One cell's share in a finding: the cell, its class for this cause, and the failures that show it."""

    claim: str
    column: str
    engine: str
    version: str
    family: str
    path: str
    severity: Severity
    texts: list[str]
    row: Row
    given: Any  # the minimal input of this cause, as the cell recorded it (None: not recorded)


@dataclasses.dataclass
class Finding:
    """One root cause: where it arises, and every cell it shows in."""

    key: tuple[str, str, str, bool]
    members: list[Member] = dataclasses.field(default_factory=list)

    @property
    def engine(self) -> str:
        return self.key[0]

    @property
    def function(self) -> str:
        return self.key[1]

    @property
    def effect(self) -> str:
        """The effects its members show (``sampling/times`` when one sampler makes both, semantics §21.4)."""
        return "/".join(dict.fromkeys(EFFECT.get(m.claim, m.claim) for m in self.members)) or self.key[2]

    @property
    def severity(self) -> Severity:
        return worst(m.severity for m in self.members)

    def representative(self) -> Member:
        """The member the finding is told by: the worst, then the first geometry claim, then matrix order."""
        return max(self.members, key=lambda m: (m.severity, m.claim not in GEOMETRY_OF))


def stage_function(provenance: Mapping[str, str], effect: str, package: str = "") -> str:
    """The engine function at ``effect``'s stage: the first module.qualname (or Class.method) in the first step
    of `STAGES` whose provenance names one, one of the engine's own ``package`` first (a library it hands the
    work to, transformers' processor, is where the difference shows, not where it arises); "" when none does.
    The trained rows' steps (``TRAINED: ...``, ``CARD: ...``) are the other side, never a cause."""
    steps: dict[str, list[str]] = {}
    for key in sorted(provenance):
        if key.startswith(TRAINED_ROWS):
            continue
        steps.setdefault(key.rsplit(": ", 1)[-1], []).append(provenance[key])
    passes = [(names, own) for names in (STAGES.get(effect, ()), tuple(steps)) for own in (True, False)]
    for names, own in passes:  # the stage's steps first (the engine's own function first), then any step
        if own and not package:
            continue
        for name in names:
            for text in steps.get(name, ()):
                found = _named(text)
                if found and (not own or found.startswith(package + ".")):
                    return found
    return ""


def _named(text: str) -> str:
    """The function a provenance step names: the call it leads with, else its first engine (not library) name."""
    lead = _LEAD.match(text)
    if lead and ("." in lead.group(1) or "_" in lead.group(1)) and not lead.group(1).startswith(_LIBRARIES):
        return lead.group(1)
    for rx in (_DOTTED, _METHOD):
        for m in rx.finditer(text):
            if not m.group(1).startswith(_LIBRARIES):
                return m.group(1)
    return ""


def _split(row: Row) -> list[tuple[Severity, list[tuple[Any, str]], Row]]:
    """The row as causes: its crash failures, and what the rest shows (semantics §21.4); each with its pieces."""
    severity = classify(row)
    found = [(given, text) for given, text in parts(row) if re.search(r"\w+(Error|Exception): ", text)]
    if severity != Severity.CRASH:
        return [(severity, found or [(row.counterexample, row.failure)], row)]
    crash = [(g, t) for g, t in found if is_crash(t)]
    rest = [(g, t) for g, t in found if not is_crash(t)]
    out = [(Severity.CRASH, crash, row)]
    if rest:
        texts = [t for _, t in rest]
        other = dataclasses.replace(row, failure=texts[0], evidence=" also ".join(texts), signatures=())
        out.append((classify(other), rest, other))
    return out


def fails(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (claim, column) the document records as ``fails``, in matrix order."""
    return [(c, col) for c, row in doc["verdicts"].items() for col, v in row.items() if v == "fails"]


def _package(engine: str) -> str:
    """The import package of a registered engine (its own code's prefix); "" for one the registry lacks."""
    from deferlab.reference.system.engines import ENGINES

    facts = ENGINES.get(engine)
    return facts.package if facts is not None else ""


def group(doc: Mapping[str, Any]) -> list[Finding]:
    """The document's failing cells as findings, worst first, then by engine and function."""
    findings: dict[tuple[str, str, str, bool], Finding] = {}
    failing = set(fails(doc))
    geometry_key: dict[tuple[str, str], tuple[str, str, str, bool]] = {}
    later: list[Member] = []
    for claim, column in fails(doc):
        col = doc["columns"][column]
        row = row_from_versions(doc, claim, column)
        effect = EFFECT.get(claim, claim)
        package = _package(col["engine"])
        function = stage_function(row.provenance, effect, package) or f"(no function recorded: {claim})"
        for severity, found, part in _split(row):
            given = next((g for g, _ in found if g is not None), None)
            member = Member(
                claim, column, col["engine"], col["version"], col.get("family") or "", col.get("path") or "default",
                severity, [t for _, t in found], part, given,
            )  # fmt: skip
            geometry = [g for g in GEOMETRY_OF.get(claim, ()) if (g, column) in failing]
            if severity == Severity.SEQUENCE and geometry:
                later.append(member)  # attached once the geometry claim's finding exists
                continue
            cause, where = effect, function
            if effect == "geometry" and severity != Severity.CRASH and all(TOKENS_ONLY.search(t) for _, t in found):
                # only the count differs (size, padding and grid equal): the stage that counts, not the sampler
                cause, where = "tokens", stage_function(row.provenance, "tokens", package) or function
            key = (col["engine"], where, CAUSE.get(cause, cause), severity == Severity.CRASH)
            findings.setdefault(key, Finding(key)).members.append(member)
            if cause in ("geometry", "sampling") and severity != Severity.CRASH:
                geometry_key[(claim, column)] = key
    for member in later:  # a geometry claim that only crashed leaves its pixel claim's change a finding of its own
        own = (member.engine, stage_function(member.row.provenance, "pixels", _package(member.engine)), "pixels", False)
        keys = [
            geometry_key[(g, member.column)] for g in GEOMETRY_OF[member.claim] if (g, member.column) in geometry_key
        ]
        key = keys[0] if keys else own
        findings.setdefault(key, Finding(key)).members.append(member)
    return sorted(findings.values(), key=lambda f: (-f.severity, f.engine, f.function, f.effect))
