"""Turning a property into a recorded claim verdict (the technique of ``claims.toml``).

Why: a claim about the *system* can be false while our suite must stay green
and say so. A claim test calls `verify_claim`: it first replays the pinned
counterexamples (known failures stay found, cheaply and deterministically),
then searches with ``hypothesis.find`` under the active profile's example
budget, shrinks, records the verdict and the minimal counterexample through
`verdicts`, and returns the verdict. The test then asserts it equals
`expected_verdict` (from ``claims.toml``, derived from the SPEC, not from
running the code), so a behaviour change flips the test visibly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import verdicts
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

CLAIMS = verdicts.load_claims()


@dataclass(frozen=True)
class Counterexample:
    """A shrunk input that breaks an invariant, and what broke."""

    value: Any
    error: str


def _describe_error(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first[:300]}"


def failure_of(check: Callable[[Any], None], value: Any) -> str | None:
    """None if ``check(value)`` passes, else the failure as "Type: message" (any exception counts)."""
    try:
        check(value)
    except Exception as e:  # a crash is a violation too: the claims are about not crashing as well
        return _describe_error(e)
    return None


def find_counterexample(
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    *,
    pinned: Iterable[Any] = (),
    max_examples: int | None = None,
) -> Counterexample | None:
    """A minimal input for which ``check`` raises, or None if none was found.

    ``pinned`` values (earlier counterexamples, the ``@example`` of a claim)
    are tried first and returned as they are. Otherwise Hypothesis searches
    ``strategy`` with the current profile's ``max_examples`` (or the given
    one) and shrinks what it finds.
    """
    for value in pinned:
        err = failure_of(check, value)
        if err is not None:
            return Counterexample(value, err)
    budget = settings.default.max_examples if max_examples is None else max_examples
    search = settings(
        settings.default,
        max_examples=budget,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.target, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    try:
        value = find(strategy, lambda v: failure_of(check, v) is not None, settings=search)
    except (NoSuchExample, Unsatisfiable):
        return None
    return Counterexample(value, failure_of(check, value) or "flaky: passed when replayed")


def expected_verdict(claim_id: str, policy: str) -> str:
    """What ``claims.toml`` says ``policy`` should give for ``claim_id``."""
    claim = CLAIMS[claim_id]
    if policy not in claim.expected:
        raise KeyError(f"claims.toml has no expected verdict for {claim_id} under {policy}; add one")
    return claim.expected[policy]


def verify_claim(
    claim_id: str,
    policy: str,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    *,
    pinned: Iterable[Any] = (),
    caveat: Callable[[], str | None] | None = None,
    evidence: str = "",
    max_examples: int | None = None,
) -> str:
    """Search for a counterexample to ``claim_id`` under ``policy``, record the verdict, return it.

    ``caveat`` runs only when no counterexample is found; a non-empty string
    it returns makes the verdict ``holds-with-caveat`` with that text as
    evidence.
    """
    pinned = list(pinned)
    found = find_counterexample(strategy, check, pinned=pinned, max_examples=max_examples)
    if found is not None:
        others = [(v, failure_of(check, v)) for v in pinned if v is not found.value]
        more = "; ".join(f"also {verdicts.describe_value(v)}: {e}" for v, e in others if e)
        text = " ".join(t for t in (evidence, found.error, more) if t)
        verdict, ce = "fails", verdicts.describe_value(found.value)
    else:
        note = caveat() if caveat is not None else None
        verdict = "holds-with-caveat" if note else "holds"
        budget = settings.default.max_examples if max_examples is None else max_examples
        text = (note or f"no counterexample in {budget} generated examples") + (f"; {evidence}" if evidence else "")
        ce = None
    verdicts.record_claim(claim_id, policy, verdict, text, ce)
    return verdict
