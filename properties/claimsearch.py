"""Searching a check for its failures: the half of `claimcheck` that knows no claim.

Why a module of its own: this half runs a check on pinned inputs and then a Hypothesis search, and says what
failed and how (`attempt` and its `Failure`, the distinct signatures of `collect_failures`, the minimal input
of `find_counterexample`), knowing nothing of ``claims.toml``, policies or the loaded release. `claimcheck`
is the other half: what a claim's failure must read as, the verdict it records and asserts. deferlab's own
tests use the search alone (a seam's proof that a check can fail). `claimcheck` re-exports these names, so
every claim test keeps writing ``claimcheck.collect_failures``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from deferlab.properties import verdicts
from deferlab.reference.system import signatures


@dataclass(frozen=True)
class Counterexample:
    """A shrunk input that breaks an invariant, and what broke."""

    value: Any
    error: str


class UnexpectedFailure(AssertionError):
    """A check failed, but not in the way ``claims.toml`` documents for this claim and policy.

    Raised instead of recording "fails": a claim expected to fail must fail
    for its documented reason, or the test errors (an AttributeError in our
    own harness is not the system's flaw).
    """


def _describe_error(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first[:300]}"


Expect = str | Callable[[BaseException], bool] | None


def _explained(expect: Expect, e: BaseException) -> bool:
    if expect is None:
        return True
    if callable(expect):
        return expect(e)
    return re.search(expect, f"{type(e).__name__}: {e}", re.DOTALL) is not None


@dataclass(frozen=True)
class Failure:
    """One failing input of a claim search: the input, its failure ("Type: message", first line, as recorded),
    the part of the claim's statement it belongs to (``partition``, "" when the claim names none), its signature
    (`reference.system.signatures.signature`) and whether it reads as ``claims.toml`` documents (``documented``:
    False for a failure outside the documented pattern that `claim_fallback` still counts)."""

    value: Any
    error: str
    partition: str = ""
    signature: str = ""
    documented: bool = True


Partition = Callable[[Any], str]


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def attempt(
    check: Callable[[Any], None],
    value: Any,
    expect: Expect = None,
    fallback: Expect = None,
    partition: Partition | None = None,
) -> Failure | None:
    """None if ``check(value)`` passes, else its `Failure`.

    Without ``expect`` any exception counts (a crash is a violation too). With ``expect`` (a regex searched in
    "Type: full message", or a predicate on the exception), an exception it does not explain is still a
    failure, marked not ``documented``, when ``fallback`` explains it; else it raises `UnexpectedFailure`.
    """
    try:
        check(value)
    except UnexpectedFailure:
        raise
    except Exception as e:
        documented = _explained(expect, e)
        if not documented and not (fallback is not None and _explained(fallback, e)):
            shown = expect if isinstance(expect, str) else getattr(expect, "__doc__", "the real-code rule")
            raise UnexpectedFailure(f"failure not explained by /{shown}/: {type(e).__name__}: {e}") from e
        part = str(partition(value)) if partition is not None else ""
        return Failure(value, _describe_error(e), part, signatures.signature(_first_line(e), part), documented)
    return None


def failure_of(check: Callable[[Any], None], value: Any, expect: Expect = None, fallback: Expect = None) -> str | None:
    """None if ``check(value)`` passes, else the failure as "Type: message" (`attempt`'s rules: an exception
    neither ``expect`` nor ``fallback`` explains raises `UnexpectedFailure` instead of being returned)."""
    found = attempt(check, value, expect, fallback)
    return None if found is None else found.error


def _search_settings(budget: int, *phases: Phase) -> settings:
    return settings(
        settings.default,
        max_examples=budget,
        database=None,
        deadline=None,
        phases=list(phases),
        suppress_health_check=list(HealthCheck),
    )


def search_budget(max_examples: int | None) -> int:
    """The examples a search may draw: ``max_examples``, else the active profile's."""
    return settings.default.max_examples if max_examples is None else max_examples


def find_counterexample(
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    *,
    pinned: Iterable[Any] = (),
    max_examples: int | None = None,
    expect: Expect = None,
) -> Counterexample | None:
    """A minimal input for which ``check`` raises, or None if none was found.

    ``pinned`` values (earlier counterexamples, the ``@example`` of a claim)
    are tried first and returned as they are. Otherwise Hypothesis searches
    ``strategy`` with the current profile's ``max_examples`` (or the given
    one) and shrinks what it finds. ``expect`` is `failure_of`'s: a failure
    not matching it raises `UnexpectedFailure` rather than being returned.
    """
    for value in pinned:
        err = failure_of(check, value, expect)
        if err is not None:
            return Counterexample(value, err)
    found = _shrunk(strategy, check, search_budget(max_examples), expect, None)
    return None if found is None else Counterexample(found.value, found.error)


def _shrunk(
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    budget: int,
    expect: Expect,
    fallback: Expect,
    partition: Partition | None = None,
) -> Failure | None:
    """The minimal input that fails ``check`` any way (Hypothesis's search and shrink), or None."""
    search = _search_settings(budget, Phase.generate, Phase.target, Phase.shrink)
    try:
        value = find(strategy, lambda v: attempt(check, v, expect, fallback) is not None, settings=search)
    except (NoSuchExample, Unsatisfiable):
        return None
    found = attempt(check, value, expect, fallback, partition)
    return found or Failure(value, "flaky: passed when replayed", signature="flaky: passed when replayed")


@dataclass(frozen=True)
class Failures:
    """What a claim search found: ``primary``, the one minimal counterexample (the first pinned input that
    fails, else the search's shrunk one; None: nothing failed); ``pinned``, the pinned inputs that fail, in
    order; ``by_signature``, one representative per distinct signature (the smallest input by its description's
    length), the primary's included."""

    primary: Failure | None
    pinned: tuple[Failure, ...]
    by_signature: dict[str, Failure]

    def undocumented(self) -> tuple[str, ...]:
        """The signatures that do not read as ``claims.toml`` documents (sorted)."""
        return tuple(sorted(sig for sig, f in self.by_signature.items() if not f.documented))

    def records(self) -> list[dict[str, Any]]:
        """The verdict row's ``signatures``: one entry per signature, sorted by (partition, signature)."""
        out = []
        for f in sorted(self.by_signature.values(), key=lambda f: (f.partition, f.signature)):
            entry = {
                "signature": f.signature,
                "partition": f.partition,
                "counterexample": verdicts.describe_value(f.value),
                "error": f.error,
            }
            if not f.documented:
                entry["documented"] = False
            out.append(entry)
        return out


def patience(budget: int) -> int:
    """Examples in a row without a new signature after which a failing claim's search stops (`collect_failures`)."""
    return max(10, budget // 4)


def _size(value: Any) -> tuple[int, str]:
    """How small an input reads: its description's length, then the description (ties break the same way)."""
    text = str(verdicts.describe_value(value))
    return len(text), text


def collect_failures(
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    *,
    pinned: Iterable[Any] = (),
    max_examples: int | None = None,
    expect: Expect = None,
    fallback: Expect = None,
    partition: Partition | None = None,
) -> Failures:
    """Every distinct failure signature of ``check``: the pinned inputs, then a Hypothesis search of
    ``strategy`` within the budget (the profile's ``max_examples``, or the given one), pinned failures or not,
    not stopping at the first failure; then, when no pinned input failed and the search did, the shrunk minimal
    input (`find_counterexample`'s) as the primary.

    The search's cost is bounded by saturation: once something failed, it stops after `patience` examples in a
    row met no new signature (a quarter of the budget: 50 of the ci profile's 200), so a claim that fails one
    way on every input (C4, C7 on a version whose materialization raises) does not pay its whole budget, and one
    still meeting new ways goes on to the budget. A claim that holds runs the whole budget, as before.
    ``partition`` names the part of the claim's statement an input belongs to (its image class, call site,
    ...): it is part of the signature, so one message failing in a new class is a new signature. ``expect``
    and ``fallback`` are `attempt`'s. Deterministic under a derandomized profile (``ci``): the examples, hence
    the set and the stopping point, are the same on every run of the same code.
    """
    found: dict[str, Failure] = {}

    def visit(value: Any) -> Failure | None:
        failure = attempt(check, value, expect, fallback, partition)
        if failure is not None:
            kept = found.get(failure.signature)
            if kept is None or _size(value) < _size(kept.value):
                found[failure.signature] = failure
        return failure

    failing = tuple(f for f in (visit(v) for v in pinned) if f is not None)
    budget = search_budget(max_examples)
    quiet, wait = [0], patience(budget)

    def saturated(value: Any) -> bool:
        """Visit ``value``; True (ending the search) once ``wait`` examples in a row after a failure met no
        new signature."""
        if found and quiet[0] >= wait:
            return True
        before = len(found)
        visit(value)
        quiet[0] = 0 if len(found) > before else quiet[0] + 1
        return False

    if budget > 0:
        try:
            # The phases of `find_counterexample`'s search but the shrink: a claim that holds meets the same
            # examples as it did when the search stopped at the first failure.
            find(strategy, saturated, settings=_search_settings(budget, Phase.generate, Phase.target))
        except (NoSuchExample, Unsatisfiable):
            pass  # the whole budget ran
    primary = failing[0] if failing else None
    if primary is None and found:
        primary = _shrunk(strategy, check, budget, expect, fallback, partition)
        if primary is not None:
            kept = found.get(primary.signature)
            if kept is None or _size(primary.value) <= _size(kept.value):
                found[primary.signature] = primary
    return Failures(primary, failing, found)
