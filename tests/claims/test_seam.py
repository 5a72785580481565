"""The implementation seam (``--impl``) and the proof that properties 1, 2 and 3 can fail.

Each deliberately broken implementation of `broken_impl` is resolved through
`seam.resolve_impl`, exactly as ``--impl properties.broken:NAME`` would, and the
property's own check function is searched with Hypothesis against it: a
counterexample must be found, and the real implementation must pass that
same counterexample (so the property detects the bug, not noise). The same
proof on real SGLang's gate is a test of the driver, not of a claim:
``tests/impl/test_seam_sglang.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from deferlab.properties import claimcheck, seam
from deferlab.properties import strategies as s
from deferlab.properties.claims.test_eager_deferred import check_eager_equals_deferred, partitioned_requests
from deferlab.properties.claims.test_equivalence import check_stages, equivalence_inputs
from deferlab.properties.claims.test_gate import check_gate_matches_bytes, gate_requests
from deferlab.properties.claims.test_modes import check_not_promoted, keyed_rgb

CASES = {
    "property 1 (reference == impl)": (
        "deferlab.properties.broken:BrokenStaging",
        equivalence_inputs(),
        lambda impl, req: check_stages(impl, *req),
    ),
    "property 2 (eager == deferred)": (
        "deferlab.properties.broken:BrokenOwnerOrder",
        partitioned_requests(),
        lambda impl, req: check_eager_equals_deferred(impl, "RELEASED", *req, device="cpu"),
    ),
    "property 3 (the gate)": (
        "deferlab.properties.broken:BrokenGateTie",
        gate_requests(),
        lambda impl, req: check_gate_matches_bytes(impl, "PR_33921", *req),
    ),
    "claim C2 (no RGB + key promotion)": (
        "deferlab.properties.broken:BrokenPromotion",
        keyed_rgb(),
        lambda impl, img: check_not_promoted(impl, "RELEASED", img),
    ),
}


@pytest.mark.parametrize("prop", list(CASES))
def test_each_property_catches_its_broken_impl(impl, prop):
    """A one-line bug in the implementation makes the property fail on an input the real one passes."""
    spec, strategy, check = CASES[prop]
    broken = seam.resolve_impl(spec)
    # Searching for a bug that is known to exist may spend more than the profile's budget, never less.
    budget = max(settings.default.max_examples, 300)
    # Only the property's own assertion counts as catching the bug: a crash of the broken impl (a signature
    # that fell behind the protocol, say) raises UnexpectedFailure instead of passing for it.
    found = claimcheck.find_counterexample(
        strategy, lambda x: check(broken, x), max_examples=budget, expect=r"^AssertionError"
    )
    assert found is not None, f"{prop} did not catch {spec} in {budget} examples"
    assert claimcheck.failure_of(lambda x: check(impl, x), found.value) is None, (
        f"the real implementation fails the counterexample too: {found.value!r}"
    )


def test_resolver_accepts_names_module_objects_and_instances():
    """``--impl`` takes a registered name, module:object (class or instance) or an Impl itself."""
    assert isinstance(seam.resolve_impl("deferlab"), seam.DeferlabImpl)
    assert isinstance(seam.resolve_impl("deferlab.properties.seam:DeferlabImpl"), seam.DeferlabImpl)
    broken = seam.resolve_impl("deferlab.properties.broken:BrokenGateTie")
    assert broken.name == "broken-gate-tie" and isinstance(broken, seam.Impl)
    assert seam.resolve_impl(broken) is broken


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        ("nope", ValueError, "not a registered name"),
        ("no_such_module_xyz:Impl", ValueError, "cannot import module"),
        ("deferlab.properties.seam:NoSuchThing", ValueError, "has no attribute"),
        ("deferlab.properties.seam:DEFAULT_IMPL", TypeError, "lacks"),
    ],
)
def test_resolver_rejects_bad_specs_clearly(spec, error, match):
    """A bad ``--impl`` fails with an error naming the spec and what is wrong."""
    with pytest.raises(error, match=match):
        seam.resolve_impl(spec)


def test_register_validates_names():
    """Registry names are plain words (a ':' would be read as module:object)."""
    with pytest.raises(ValueError, match="without ':'"):
        seam.register("a:b", seam.DeferlabImpl)


def test_empty_request_is_empty_on_every_path(impl):
    """An empty request gives (0, 3, p, p) patches and (0, 3) grids, and the gate keeps it eager."""
    pv, grids = impl.preprocess([], s.K3)
    assert tuple(seam.to_numpy(pv).shape) == (0, 3, 14, 14) and tuple(seam.to_numpy(grids).shape) == (0, 3)
    assert impl.defer_decisions([], s.K3, policy="PR_33921") == []
