"""What a failing verdict does to the model: the severity classes of semantics §21, and the rule that maps a row.

Why: the versions matrix paints every failure the same red, so float32 rounding that vanishes in the tower's
bf16 sits beside a 448x448 InternVL image served as ten tiles. The rule here reads only what a verdict row
already records (claim id, failure line, evidence text, signatures) and gives one class, the worst of what the
row shows, in the order crash > sequence > tower-input > float32-only > cost (semantics §21.1-§21.3). It never
reruns an engine: it is a reading of recorded evidence, so the same row always gets the same class.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.signatures import failure_text, signature_set


class Severity(enum.IntEnum):
    """The classes, ordered: a larger value is worse (semantics §21.1). ``label`` is the name users type."""

    COST = 0  # the model sees the same input; time, memory or placement differ (C1, C5, C6, C10)
    FLOAT32_ONLY = 1  # differs in float32, equal after the cast to the tower's dtype: informational
    TOWER_INPUT = 2  # the pixel tensor differs in the tower's dtype
    SEQUENCE = 3  # the prompt the model sees changes: tokens, tiles, grid, frames, times
    CRASH = 4  # an input the checkpoint accepts that the engine rejects or crashes on, or the reverse

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")

    @property
    def defect(self) -> bool:
        """Whether the class is a defect of what the model gets (float32-only and cost are informational)."""
        return self >= Severity.TOWER_INPUT


LABELS = {s.label: s for s in Severity}

# semantics §21.2: each claim's class when its failure is neither a crash nor (for a pixel claim) a geometry change
CLAIM_CLASS: dict[str, Severity] = {
    "C1": Severity.COST,
    "C2": Severity.TOWER_INPUT,
    "C3": Severity.FLOAT32_ONLY,  # raised to tower-input by a BF16 count > 0 (numeric claims, below)
    "C4": Severity.TOWER_INPUT,  # the claim is stated after the BF16 cast
    "C5": Severity.COST,
    "C6": Severity.COST,
    "C7": Severity.TOWER_INPUT,
    "C8": Severity.CRASH,  # a key a consumer reads and no producer wrote: a KeyError in the consumer
    "C9": Severity.CRASH,  # a wrong consumer count: a consumer waits forever, or reads memory freed under it
    "C10": Severity.COST,
    "C11": Severity.SEQUENCE,  # materialized with other dimensions than the image's; an exception is crash
    "C12": Severity.TOWER_INPUT,
    "C13": Severity.SEQUENCE,
    "C14": Severity.TOWER_INPUT,
    "C15": Severity.FLOAT32_ONLY,
    "C16": Severity.SEQUENCE,
    "C17": Severity.SEQUENCE,
    "C18": Severity.SEQUENCE,
    "C19": Severity.TOWER_INPUT,
    "C20": Severity.TOWER_INPUT,  # a size or orientation difference is sequence (the grid follows the size)
}
NUMERIC = frozenset({"C3", "C15"})  # float32-only unless a shipped configuration differs after the cast

# A refusal or crash on one side only (the markers the claim tests write, semantics §16, §20.2) ...
_CRASH_TEXT = re.compile(
    r"cannot serve it|refused what the trained side takes|took what the trained side refuses|unclear (staging )?error"
    r"|refusal on one side|crashes|did not finish|timed out"
)
# ... and an exception other than the claim's own AssertionError at the head of a failure piece.
_EXC_HEAD = re.compile(r"^(?:\[[^\]]*\] )?([A-Z][A-Za-z]*(?:Error|Exception))\b:")
_EXC_ANY = re.compile(r"(?:^|: |\] )([A-Z][A-Za-z]*(?:Error|Exception)): ")
# The prompt changes: a grid, token count, patch count, frames or times that differ, or a size after decoding.
_SEQUENCE_TEXT = re.compile(
    r"grid [^;]*!= checkpoint's|tokens != |needs \d+ patches|frames taken differ|frames taken \(read back\)"
    r"|geometry differs|times? differ|grid_thw|size \d+x\d+ != |size \(\d+, ?\d+\) != |orientation differs"
)
_BF16 = (
    re.compile(r"(\d+) BF16"),  # "490 FP32 / 0 BF16 of 768 values differ"
    re.compile(r"(\d+) of \d+ (?:levels |values )?(?:differ )?after BF16"),  # "0 of 256 after BF16"
    re.compile(r"after BF16 (\d+)/\d+"),  # "after BF16 0/256 vs eager"
)
_DRAWN = "over drawn mean/std"  # a configuration no checkpoint ships: latent, not this row's class (§21.3)


@dataclasses.dataclass(frozen=True)
class Row:
    """One failing cell of a verdict matrix, as a versions.json records it (semantics §17.1)."""

    claim: str
    column: str
    failure: str = ""
    evidence: str = ""
    signatures: tuple[str, ...] = ()
    counterexample: Any = None
    provenance: Mapping[str, str] = dataclasses.field(default_factory=dict)
    impact: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # measured by the claim's test (§21.7)


def row_from_versions(doc: Mapping[str, Any], claim: str, column: str) -> Row:
    """The row of ``claim`` x ``column`` from a versions.json document (its failure is the failure group's)."""
    failure = next(
        (g.get("failure", "") for g in doc.get("failure_groups", []) if g["claim"] == claim and column in g["where"]),
        "",
    )
    return Row(
        claim=claim,
        column=column,
        failure=failure,
        evidence=doc.get("evidence", {}).get(column, {}).get(claim, ""),
        signatures=tuple(doc.get("signatures", {}).get(column, {}).get(claim, ())),
        counterexample=doc.get("counterexamples", {}).get(column, {}).get(claim),
        provenance=doc.get("provenance", {}).get(column, {}).get(claim, {}),
        impact=doc.get("impact", {}).get(column, {}).get(claim, {}),
    )


def parts(row: Row) -> list[tuple[Any, str]]:
    """The row's failures one by one, each with its input where recorded: the failure line (the row's
    counterexample), each ``also INPUT: ...`` of the evidence, then the signatures (input not recorded)."""
    out: list[tuple[Any, str]] = [(row.counterexample, row.failure)] if row.failure else []
    for i, part in enumerate(re.split(r"(?:;\s*|\s)also ", row.evidence)):
        head = _EXC_ANY.search(part)  # the input's repr comes first, then its failure
        given = part[: head.start(1)].rstrip(" :") if head and i else None
        out.append((given or None, part[head.start(1) :] if head else part))
    out += [(None, s) for s in row.signatures if s]
    return [(given, text) for given, text in out if text]


def pieces(row: Row) -> list[str]:
    """`parts` without the inputs."""
    return [text for _, text in parts(row)]


def bf16_counts(text: str) -> list[int]:
    """Every count of values differing after the BF16 cast that ``text`` states, drawn configurations left out."""
    shipped = text.split(_DRAWN, 1)[0]
    return [int(m.group(1)) for rx in _BF16 for m in rx.finditer(shipped)]


def is_crash(piece: str) -> bool:
    head = _EXC_HEAD.match(piece.strip())
    return bool(_CRASH_TEXT.search(piece)) or (head is not None and head.group(1) != "AssertionError")


def classify(row: Row) -> Severity:
    """The row's class (semantics §21.3): the worst its pieces show, crash > sequence > tower-input > the rest."""
    if row.claim not in CLAIM_CLASS:
        raise InputValueError(f"claim {row.claim!r}: no severity class; accepted: {', '.join(CLAIM_CLASS)}")
    found = pieces(row)
    if any(is_crash(p) for p in found):
        return Severity.CRASH
    if CLAIM_CLASS[row.claim] == Severity.SEQUENCE and row.claim != "C11":
        return Severity.SEQUENCE
    if any(_SEQUENCE_TEXT.search(p) for p in found):
        return Severity.SEQUENCE
    if row.claim in NUMERIC:
        counts = bf16_counts(" ".join([row.failure, row.evidence]))
        return Severity.TOWER_INPUT if any(counts) else Severity.FLOAT32_ONLY
    if row.claim == "C11":
        return Severity.SEQUENCE
    return CLAIM_CLASS[row.claim]


def of_verdict_row(row: Mapping[str, Any]) -> Severity | None:
    """A verdicts.json row's class (a mapping: the dict, or `reference.system.rows.Row`), read off what it
    recorded; a class the row already carries (versions' rows) first; None when it does not fail or its claim
    has no class. The one place report, versions, JUnit and the typed rows class a verdict row."""
    if row.get("verdict") != "fails":
        return None
    if row.get("severity") in LABELS:
        return LABELS[str(row["severity"])]
    if str(row.get("id")) not in CLAIM_CLASS:
        return None
    evidence = str(row.get("evidence") or "")
    return classify(
        Row(
            claim=str(row["id"]),
            column=str(row.get("policy", "")),
            failure=failure_text(evidence),
            evidence=evidence,
            signatures=tuple(sorted(signature_set(row))),
            counterexample=row.get("counterexample"),
        )
    )


def worst(severities: Iterable[Severity]) -> Severity:
    """The worst of ``severities`` (cost for none)."""
    return max(severities, default=Severity.COST)


def parse_fail_on(text: str) -> frozenset[Severity]:
    """``--fail-on`` as a set of classes: a comma list of labels; one line naming the accepted ones otherwise."""
    names = [n.strip() for n in text.split(",")]
    if not text.strip() or any(not n for n in names):
        raise InputValueError(f"--fail-on {text!r}: an empty class name; accepted: a comma list of {_accepted()}")
    unknown = [n for n in names if n.lower() not in LABELS]
    if unknown:
        raise InputValueError(
            f"--fail-on {text!r}: unknown class {', '.join(map(repr, unknown))}; accepted: a comma list of {_accepted()}"
        )
    return frozenset(LABELS[n.lower()] for n in names)


def _accepted() -> str:
    return ", ".join(s.label for s in sorted(Severity, reverse=True))


def ordered(labels: Sequence[str]) -> list[str]:
    """``labels`` sorted worst first (the order findings are listed in)."""
    return sorted(labels, key=lambda label: -LABELS[label])
