"""The one comparison of two runs' verdicts: report against its baseline, a release against the versions
baseline, BASE against HEAD, a campaign against its baseline.

A cell is one (subject, where) pair: a claim under a policy or on a release, a ``real_code`` property, a
mutant. Each cell's change, from the verdict before to the verdict after and their failure signature sets:

* ``newly failing``: fails after, held before (``holds``, ``holds-with-caveat`` or ``n/a``: a feature that
  arrives broken is a new failure too);
* ``newly holding``: failed before, holds (or is ``n/a``) after;
* ``failing differently``: fails in both, with a signature after that before lacked (a way of failing that
  went away alone is no new failure, but it is listed in ``gone``);
* ``changed``: any other verdict change (to or from ``not-run``, a mutant's outcome);
* ``unchanged``.

One gate rule (`regressions`): a changed verdict is a regression (against a baseline, which states what is
expected, every change of verdict; in a review of a change, BASE -> HEAD, the verdicts that got worse:
``newly failing``, since a claim that starts to hold is what a fix is for), and ``failing differently``
gates only when both runs searched under one derandomized profile and the strict switch is on
(`signatures_gated`). Everything else is shown, not gated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from deferlab.reference.system.systems import claim_key

CHANGES = ("newly failing", "failing differently", "newly holding", "changed", "unchanged")
HELD = ("holds", "holds-with-caveat", "n/a")  # a verdict after which "fails" is a new failure
# The Hypothesis profiles whose searches are derandomized (``properties.plugin.register_profiles``): only there
# is a signature set the same on every run of the same code. ``thorough`` is not: its examples are random.
DERANDOMIZED = frozenset({"ci"})
SCOPES = ("baseline", "review")


@dataclass(frozen=True)
class Cell:
    """One (subject, where) cell of a run: its verdict (or outcome) and its failure signature set."""

    verdict: str
    signatures: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Change:
    """One cell's change between two runs (`CHANGES`), with the signatures new after and gone after."""

    subject: str
    where: str
    before: str
    after: str
    kind: str
    new: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``C12/RELEASED``, ``0.5.23/C9``-style: the cell as the regression lists name it."""
        return f"{self.subject}/{self.where}" if self.where else self.subject


def kind_of(before: Cell, after: Cell) -> str:
    """One of `CHANGES` for a cell's two states."""
    if before.verdict == after.verdict:
        if after.verdict == "fails" and set(after.signatures) - set(before.signatures):
            return "failing differently"
        return "unchanged"
    if after.verdict == "fails" and before.verdict in HELD:
        return "newly failing"
    if before.verdict == "fails" and after.verdict in HELD:
        return "newly holding"
    return "changed"


def diff(before: Mapping[tuple[str, str], Cell], after: Mapping[tuple[str, str], Cell]) -> list[Change]:
    """Every cell of either run, in claim order then place: its change. A cell one run lacks is ``not-run``
    there (a lost check is a change too)."""
    missing = Cell("not-run")
    keys = sorted(set(before) | set(after), key=lambda k: (claim_key(k[0]), k[1]))
    out = []
    for subject, where in keys:
        b, a = before.get((subject, where), missing), after.get((subject, where), missing)
        both_fail = a.verdict == "fails" and b.verdict == "fails"
        new = tuple(sorted(set(a.signatures) - set(b.signatures))) if a.verdict == "fails" else ()
        gone = tuple(sorted(set(b.signatures) - set(a.signatures))) if both_fail else ()
        out.append(Change(subject, where, b.verdict, a.verdict, kind_of(b, a), new, gone))
    return out


def signatures_gated(profile_now: str | None, profile_before: str | None, strict: bool) -> bool:
    """Whether ``failing differently`` regresses: both searches under one derandomized profile, and the strict
    switch on. Why: under a random profile a run can meet a signature the other did not with no change of
    the code; under ``ci`` the same code gives the same set, and a user who did not ask for strictness is
    shown the new signature, not failed on it."""
    return strict and profile_now is not None and profile_now == profile_before and profile_now in DERANDOMIZED


def regressions(changes: Iterable[Change], *, scope: str = "baseline", gated: bool = False) -> list[Change]:
    """The changes that gate (`SCOPES`): for a ``baseline`` every change of verdict; for a ``review`` (BASE ->
    HEAD) ``newly failing``; in both, ``failing differently`` when ``gated`` (`signatures_gated`)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    out = []
    for c in changes:
        if c.kind == "failing differently":
            if gated:
                out.append(c)
        elif scope == "baseline" and c.kind != "unchanged":
            out.append(c)
        elif scope == "review" and c.kind == "newly failing":
            out.append(c)
    return out


@dataclass
class Summary:
    """The changes by kind, for a headline and a JSON document."""

    by_kind: dict[str, list[Change]] = field(default_factory=lambda: {k: [] for k in CHANGES})

    @classmethod
    def of(cls, changes: Iterable[Change]) -> Summary:
        s = cls()
        for c in changes:
            s.by_kind[c.kind].append(c)
        return s

    def names(self, kind: str) -> list[str]:
        return [c.name for c in self.by_kind[kind]]

    def line(self) -> str:
        """``0 newly failing; 1 failing differently (C12/RELEASED); ...``."""
        parts = []
        for k in CHANGES:
            shown = self.names(k)
            parts.append(f"{len(shown)} {k}" + (f" ({', '.join(shown)})" if shown and k != "unchanged" else ""))
        return "; ".join(parts)
