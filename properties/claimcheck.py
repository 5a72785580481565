"""Turning a property into a recorded claim verdict (the technique of ``claims.toml``).

Why: a claim about the *system* can be false while our suite must stay green
and say so. A claim test calls `verify_claim`: it first replays the pinned
counterexamples (known failures stay found, cheaply and deterministically),
then searches with ``hypothesis.find`` under the active profile's example
budget, shrinks, records the verdict and the minimal counterexample through
`verdicts`, and returns the verdict. The test then asserts it equals
`expected_verdict` (from ``claims.toml``, derived from the semantics, not from
running the code), so a behaviour change flips the test visibly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from deferlab.properties import seam, verdicts
from deferlab.reference.system.claims import EngineRange, engine_range
from deferlab.reference.system.contract import ACCEPTED_MODES
from deferlab.reference.system.policies import POLICIES

CLAIMS = verdicts.load_claims()


def request_modes(policy: str) -> tuple[str, ...] | None:
    """The PIL modes a claim's requests draw from under ``policy``: a policy that validates at the front door
    (HARDENED) rejects all but `ACCEPTED_MODES` up front, so only those test the claim; None: any mode."""
    known = POLICIES.get(policy)  # None for a real-code label, which validates nothing of deferlab's
    return ACCEPTED_MODES if known is not None and known.validate_inputs else None


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


def failure_of(check: Callable[[Any], None], value: Any, expect: Expect = None) -> str | None:
    """None if ``check(value)`` passes, else the failure as "Type: message".

    Without ``expect`` any exception counts (a crash is a violation too). With
    ``expect`` (a regex searched in "Type: full message", or a predicate on the
    exception), an exception it does not explain raises `UnexpectedFailure`
    instead of being returned.
    """
    try:
        check(value)
    except UnexpectedFailure:
        raise
    except Exception as e:
        if not _explained(expect, e):
            shown = expect if isinstance(expect, str) else getattr(expect, "__doc__", "the real-code rule")
            raise UnexpectedFailure(f"failure not explained by /{shown}/: {type(e).__name__}: {e}") from e
        return _describe_error(e)
    return None


def real_code_expect(claim_id: str, root: str | None) -> Callable[[BaseException], bool]:
    """What counts as the real system failing a claim (there is no expectation to match for real code).

    Any failure ``claims.toml`` documents for some policy of the claim; the
    claim's own invariant breaking (an AssertionError of its check); or an
    exception raised inside the system's own code (innermost frame under
    ``root``). Anything else (an exception in deferlab's driver or harness)
    is not the system's flaw and errors the test.
    """
    patterns = [p for p in CLAIMS[claim_id].failures.values()] if claim_id in CLAIMS else []

    def explained(e: BaseException) -> bool:
        """documented failure, the claim's invariant, or an exception raised in the system's own code"""
        if isinstance(e, AssertionError) or any(re.search(p, f"{type(e).__name__}: {e}", re.DOTALL) for p in patterns):
            return True
        return raised_inside(e, root)

    return explained


def raised_inside(e: BaseException, root: str | None) -> bool:
    """Whether ``e`` was raised in a file under ``root`` (its innermost frame), i.e. by the system's own code.

    Why the innermost frame: the driver calls into the system, so every traceback passes through both; only
    where it ends says whose code failed. A child process that probes a system imports this too.
    """
    tb, last = e.__traceback__, None
    while tb is not None:
        last, tb = tb.tb_frame.f_code.co_filename, tb.tb_next
    return bool(root and last and last.startswith(root))


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
        value = find(strategy, lambda v: failure_of(check, v, expect) is not None, settings=search)
    except (NoSuchExample, Unsatisfiable):
        return None
    return Counterexample(value, failure_of(check, value, expect) or "flaky: passed when replayed")


def active_release() -> tuple[str, str] | None:
    """(engine, version) of the real code under test (`seam.ACTIVE`), None for a model or an unknown source."""
    source = getattr(seam.ACTIVE, "source", None) if seam.is_real_code(seam.ACTIVE) else None
    engine = getattr(getattr(source, "engine", None), "name", None)
    if source is None or engine is None or getattr(source, "git_rev", None):  # a checkout is no release
        return None
    return str(engine), str(source.version)


def engine_expectation(claim_id: str) -> EngineRange | None:
    """The ``[claim.engines]`` row of ``claim_id`` covering the loaded release, if one does."""
    release = active_release()
    if release is None or claim_id not in CLAIMS:
        return None
    return engine_range(CLAIMS[claim_id], *release)


def claim_expect(claim_id: str, policy: str) -> Expect:
    """How a failure of ``claim_id`` must read to be recorded: the policy's ``[claim.failure]``; for real code,
    the covering engine row's when it names one, else `real_code_expect`."""
    if seam.is_real_code(seam.ACTIVE):  # False outside a session (ACTIVE None)
        row = engine_expectation(claim_id)
        if row is not None and row.key in CLAIMS[claim_id].failures:
            return CLAIMS[claim_id].failures[row.key]
        return real_code_expect(claim_id, str(getattr(seam.ACTIVE.source, "root", "")) or None)
    return CLAIMS[claim_id].failures.get(policy) if claim_id in CLAIMS else None


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
    applicable: bool = True,
    not_applicable: str = "this version has no deferred path: the claim cannot apply",
    provenance: dict[str, str] | None = None,
) -> str:
    """Search for a counterexample to ``claim_id`` under ``policy``, record the verdict, return it.

    ``caveat`` runs only when no counterexample is found; a non-empty string
    it returns makes the verdict ``holds-with-caveat`` with that text as
    evidence. Where ``claims.toml`` documents how the claim fails under
    ``policy`` (``[claim.failure]``), every failure found, searched or pinned,
    must match it; any other raises `UnexpectedFailure` (an error of the test,
    nothing is recorded). ``applicable`` False records ``n/a`` with the
    reason ``not_applicable``. ``provenance`` (what ran, per step) is recorded
    beside `seam.evidence` (the seam methods the test called).
    """
    if not applicable:
        verdicts.record_claim(claim_id, policy, "n/a", not_applicable, None, {**seam.evidence(), **(provenance or {})})
        return "n/a"
    pinned = list(pinned)
    expect = claim_expect(claim_id, policy)
    found = find_counterexample(strategy, check, pinned=pinned, max_examples=max_examples, expect=expect)
    if found is not None:
        others = [(v, failure_of(check, v, expect)) for v in pinned if v is not found.value]
        more = "; ".join(f"also {verdicts.describe_value(v)}: {e}" for v, e in others if e)
        text = " ".join(t for t in (evidence, found.error, more) if t)
        verdict, ce = "fails", verdicts.describe_value(found.value)
    else:
        note = caveat() if caveat is not None else None
        verdict = "holds-with-caveat" if note else "holds"
        budget = settings.default.max_examples if max_examples is None else max_examples
        text = (note or f"no counterexample in {budget} generated examples") + (f"; {evidence}" if evidence else "")
        ce = None
    verdicts.record_claim(claim_id, policy, verdict, text, ce, {**seam.evidence(), **(provenance or {})})
    return verdict


def assert_expected(claim_id: str, policy: str, verdict: str) -> None:
    """The verdict equals claims.toml's expectation. A real-code verdict is a finding (recorded, not asserted:
    ``deferlab versions`` gates it against its own baseline), unless the claim's ``[claim.engines]`` has a row
    for the loaded release: then it must equal that row."""
    if seam.is_real_code(seam.ACTIVE):  # False outside a session (ACTIVE None)
        row = engine_expectation(claim_id)
        if row is not None:
            system = "-".join(active_release() or ())
            assert verdict == row.verdict, (
                f"{claim_id} on {system}: recorded {verdict!r}, claims.toml [claim.engines] {row.key!r} expects "
                f"{row.verdict!r}"
            )
        return
    want = expected_verdict(claim_id, policy)
    assert verdict == want, f"{claim_id} under {policy}: recorded {verdict!r}, claims.toml expects {want!r}"


def verify_deferred_claim(
    claim_id: str,
    impl: Any,
    policy: str,
    requests: Callable[..., st.SearchStrategy[Any]],
    check: Callable[[Any], None],
    **options: Any,
) -> None:
    """A claim about the deferred path: searched over ``requests(modes=...)`` of the modes ``policy`` sends,
    ``n/a`` where ``impl`` defers nothing under it, and the verdict asserted against claims.toml.

    ``options`` go to `verify_claim` (``pinned``, ``evidence``, ...).
    """
    verdict = verify_claim(
        claim_id,
        policy,
        requests(modes=request_modes(policy)),
        check,
        applicable=impl.defers(policy),
        **options,
    )
    assert_expected(claim_id, policy, verdict)
