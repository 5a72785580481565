"""Turning a property into a recorded claim verdict (the technique of ``claims.toml``).

Why: a claim about the *system* can be false while our suite must stay green
and say so. A claim test calls `verify_claim`: it replays the pinned
counterexamples (known failures stay found, cheaply and deterministically),
then always searches with Hypothesis within the active profile's example
budget, collecting every distinct failure signature it meets
(`collect_failures`: a failing claim that fails a new way is a visible
change, not hidden behind its first pinned example; the search ends early
only once it stops meeting new signatures); it keeps one minimal
counterexample (the first pinned that fails, else the search's shrunk one),
records the verdict, that counterexample and the signature set through
`verdicts`, and returns the verdict. The test then asserts it equals
`expected_verdict` (from ``claims.toml``, derived from the semantics, not from
running the code), so a behaviour change flips the test visibly.

The search itself (pinned inputs, Hypothesis, signatures) is `claimsearch`,
whose names this module re-exports; here is what a claim asks of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import strategies as st

from deferlab.properties import seam, verdicts
from deferlab.properties.claimsearch import (  # noqa: F401 - the search's names, re-exported for the claim tests
    Counterexample,
    Expect,
    Failure,
    Failures,
    Partition,
    UnexpectedFailure,
    attempt,
    collect_failures,
    failure_of,
    find_counterexample,
    patience,
    search_budget,
)
from deferlab.reference.system.claims import EngineRange, engine_range
from deferlab.reference.system.contract import ACCEPTED_MODES
from deferlab.reference.system.policies import POLICIES
from deferlab.reference.system.rows import Column
from deferlab.reference.system.systems import DEFAULT_FAMILY

CLAIMS = verdicts.load_claims()


def request_modes(policy: str) -> tuple[str, ...] | None:
    """The PIL modes a claim's requests draw from under ``policy``: a policy that validates at the front door
    (HARDENED) rejects all but `ACCEPTED_MODES` up front, so only those test the claim; None: any mode."""
    known = POLICIES.get(policy)  # None for a real-code label, which validates nothing of deferlab's
    return ACCEPTED_MODES if known is not None and known.validate_inputs else None


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


def active_release() -> tuple[str, str] | None:
    """(engine, version) of the real code under test (`seam.ACTIVE`), None for a model or an unknown source."""
    source = getattr(seam.ACTIVE, "source", None) if seam.is_real_code(seam.ACTIVE) else None
    engine = getattr(getattr(source, "engine", None), "name", None)
    if source is None or engine is None or getattr(source, "git_rev", None) or getattr(source, "patched_with", None):
        return None  # a checkout is no release, nor a patched copy of one (`impl.loader.patching`)
    return str(engine), str(source.version)


def engine_expectation(claim_id: str, policy: str | None = None) -> EngineRange | None:
    """The ``[claim.engines]`` row of ``claim_id`` covering the loaded release serving the session's family
    and served path the verdict column ``policy`` names (`rows.Column`; None: Kimi-K3 on the default
    path), if one does."""
    release = active_release()
    if release is None or claim_id not in CLAIMS:
        return None
    column = Column.parse(policy) if policy else None
    family, path = (column.family_name, column.path or None) if column is not None else (DEFAULT_FAMILY, None)
    return engine_range(CLAIMS[claim_id], *release, family, path)


def claim_expect(claim_id: str, policy: str) -> Expect:
    """How a failure of ``claim_id`` must read to be recorded: the policy's ``[claim.failure]``; for real code,
    the covering engine row's when it names one, else `real_code_expect`."""
    if seam.is_real_code(seam.ACTIVE):  # False outside a session (ACTIVE None)
        row = engine_expectation(claim_id, policy)
        if row is not None and row.key in CLAIMS[claim_id].failures:
            return CLAIMS[claim_id].failures[row.key]
        return real_code_expect(claim_id, str(getattr(seam.ACTIVE.source, "root", "")) or None)
    return CLAIMS[claim_id].failures.get(policy) if claim_id in CLAIMS else None


def claim_fallback(claim_id: str, policy: str | None = None) -> Expect:
    """What else still counts as the system failing the claim when its failure pattern does not name it: recorded
    as a failure that does not read as ``claims.toml`` documents (its signature marked new in every report), so the
    verdict file has the verdict, never ``not-run``, and `assert_expected` fails the test on it under the strict
    switch (``DEFERLAB_STRICT=1``, what deferlab's own test command and CI set: the semantics must be updated).

    For the model: any exception (where a policy documents how it fails, another failure is a new way of failing;
    where it documents none, ``claim_expect`` is None and every failure counts already). For real code whose
    ``[claim.engines]`` row names how it fails: `real_code_expect` (its own AssertionError, an exception raised in
    the system's own code, a failure documented for another policy). None for real code without such a row:
    `claim_expect` already accepts all of the system's failures, and a crash in deferlab's own driver is not one
    (`UnexpectedFailure`, a test error)."""
    if not seam.is_real_code(seam.ACTIVE):
        return _any_exception
    row = engine_expectation(claim_id, policy)
    if row is None or row.key not in CLAIMS[claim_id].failures:
        return None
    return real_code_expect(claim_id, str(getattr(seam.ACTIVE.source, "root", "")) or None)


def _any_exception(e: BaseException) -> bool:
    """any failure of the model (a way of failing its policy's pattern does not name)"""
    return isinstance(e, Exception)


class Verdict(str):
    """A recorded verdict (the string), carrying the signatures that did not read as ``claims.toml`` documents
    (``undocumented``), for `assert_expected`."""

    undocumented: tuple[str, ...] = ()

    def __new__(cls, verdict: str, undocumented: Iterable[str] = ()) -> Verdict:
        made = super().__new__(cls, verdict)
        made.undocumented = tuple(undocumented)
        return made


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
    evidence: str | Callable[[], str] = "",
    max_examples: int | None = None,
    applicable: bool = True,
    not_applicable: str = "this version has no deferred path: the claim cannot apply",
    provenance: dict[str, str] | None = None,
    partition: Partition | None = None,
    figure: dict[str, Any] | Callable[[], dict[str, Any] | None] | None = None,
) -> Verdict:
    """Search for counterexamples to ``claim_id`` under ``policy``, record the verdict, return it.

    The pinned inputs are replayed, then the search always runs, within the budget (`collect_failures`): the
    row records the minimal counterexample and every distinct failure signature found (``signatures``, one
    representative each); ``partition`` names the part of the statement an input belongs to (image class,
    call site, ...), so a known message in a new part is a new signature. ``caveat`` runs only when nothing
    fails; a non-empty string it returns makes the verdict ``holds-with-caveat`` with that text as evidence.
    Where ``claims.toml`` documents how the claim fails under ``policy`` (``[claim.failure]``), a failure it
    does not name is still recorded as ``fails``, its signature marked new (``documented: false``,
    `claim_fallback`), and `assert_expected` fails the test on it under the strict switch; on real code without
    a row, a crash in deferlab's own driver raises `UnexpectedFailure` (an error of the test, nothing recorded). ``applicable`` False records ``n/a`` with the reason ``not_applicable``.
    ``provenance`` (what ran, per step) is recorded beside `seam.evidence` (the seam methods the test called);
    ``figure`` (or the function making it, run after the search) the data of the verdict's picture.
    ``evidence`` may be a function (it runs the system, e.g. a level table): it runs after the search, and on
    real code a crash of the system inside it is written into the evidence instead of erroring the test.
    """
    if not applicable:
        verdicts.record_claim(claim_id, policy, "n/a", not_applicable, None, {**seam.evidence(), **(provenance or {})})
        return Verdict("n/a")
    expect = claim_expect(claim_id, policy)
    found = collect_failures(
        strategy,
        check,
        pinned=list(pinned),
        max_examples=max_examples,
        expect=expect,
        fallback=claim_fallback(claim_id, policy),
        partition=partition,
    )
    evidence = _evidence_text(evidence)
    primary = found.primary
    if primary is not None:
        more = "; ".join(
            f"also {verdicts.describe_value(f.value)}: {f.error}" for f in found.pinned if f is not primary
        )
        text = " ".join(t for t in (evidence, primary.error, more) if t)
        verdict, ce = "fails", verdicts.describe_value(primary.value)
    else:
        note = caveat() if caveat is not None else None
        verdict = "holds-with-caveat" if note else "holds"
        budget = search_budget(max_examples)
        text = (note or f"no counterexample in {budget} generated examples") + (f"; {evidence}" if evidence else "")
        ce = None
    drawn = figure() if callable(figure) else figure  # the picture's data (`Recorder.record_claim`)
    verdicts.record_claim(
        claim_id, policy, verdict, text, ce, {**seam.evidence(), **(provenance or {})}, signatures=found.records(),
        **({"figure": drawn} if drawn else {}),
    )  # fmt: skip
    return Verdict(verdict, found.undocumented())


def _evidence_text(evidence: str | Callable[[], str]) -> str:
    """``evidence`` itself, or what its function returns; on real code a crash inside it is the system's,
    recorded as text (the verdict comes from the search, which has already run)."""
    if not callable(evidence):
        return evidence
    try:
        return evidence()
    except Exception as e:  # noqa: BLE001 - a crash of the system under test is evidence, not a test error
        root = str(getattr(getattr(seam.ACTIVE, "source", None), "root", "")) or None
        if not seam.is_real_code(seam.ACTIVE) or not raised_inside(e, root):
            raise  # the model's, or our harness's: a bug of ours
        return f"(the evidence could not be computed: the system raised {type(e).__name__}: {str(e)[:300]})"


def assert_expected(claim_id: str, policy: str, verdict: str) -> None:
    """The verdict equals claims.toml's expectation, and under the strict switch it fails only as documented.

    A real-code verdict is a finding (recorded, not asserted: ``deferlab versions`` gates it against its own
    baseline), unless the claim's ``[claim.engines]`` has a row for the loaded release: then it must equal that
    row. Either way, a `Verdict` whose ``undocumented`` signatures are not empty (a failure the pattern does not
    name, recorded as failing with that signature marked new) fails the test under `verdicts.strict`, after
    `verify_claim` recorded it: deferlab's own suite then asks for the semantics to be updated, while a user's
    report shows the verdict with the new signature."""
    undocumented = getattr(verdict, "undocumented", ())
    if seam.is_real_code(seam.ACTIVE):  # False outside a session (ACTIVE None)
        row = engine_expectation(claim_id, policy)
        if row is not None:
            system = "-".join(active_release() or ())
            assert verdict == row.verdict, (
                f"{claim_id} on {system}: recorded {verdict!r}, claims.toml [claim.engines] {row.key!r} expects "
                f"{row.verdict!r}"
            )
            assert not (undocumented and verdicts.strict()), (
                f"{claim_id} on {system} {verdict}, but not as claims.toml documents: " + "; ".join(undocumented)
            )
        return
    # deferlab's model restates Kimi-K3's pipeline only (semantics §18): for another family it serves nothing
    column = Column.parse(policy)
    family, bare = column.family_name, column.label
    want = expected_verdict(claim_id, bare) if family == DEFAULT_FAMILY else "n/a"
    assert verdict == want, f"{claim_id} under {policy}: recorded {verdict!r}, claims.toml expects {want!r}"
    assert not (undocumented and verdicts.strict()), (
        f"{claim_id} under {policy} {verdict}, but not as claims.toml documents: " + "; ".join(undocumented)
    )


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

    ``options`` go to `verify_claim` (``pinned``, ``evidence``, ``partition``, ...).
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
