"""impl.ipc (the model's IPC counts) against the oracle's statement of them, name for name (semantics §8).

The two modules share their function names (`check_topology`, `released_total`,
`requested`, `resolve`) so each can be checked against its namesake; impl does
not import the oracle, so an agreement here is two independent writings.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deferlab.impl import ipc as model
from deferlab.reference.oracle import ipc_counts as oracle
from deferlab.reference.system.errors import InputValueError
from deferlab.reference.system.policies import POLICIES

NAMES = ("check_topology", "released_total", "requested", "resolve")


def test_the_model_uses_the_oracles_names_and_no_other_rule() -> None:
    """Each rule exists once per role: the same four names on both sides, no stray ack rule in the model."""
    public = {n for n in vars(model) if callable(getattr(model, n)) and getattr(model, n).__module__ == model.__name__}
    assert public == set(NAMES)
    assert all(callable(getattr(oracle, n)) for n in NAMES)


@given(
    dp=st.integers(1, 8),
    groups=st.integers(1, 8),
    configured=st.none() | st.integers(1, 64),
    clamp=st.booleans(),
    policy=st.sampled_from(sorted(POLICIES)),
)
def test_the_model_counts_as_the_oracle_states(
    dp: int, groups: int, configured: int | None, clamp: bool, policy: str
) -> None:
    tp = dp * groups
    pol = POLICIES[policy]
    assert model.released_total(tp, dp) == oracle.released_total(tp, dp)
    k_c = model.requested(pol, tp, dp, configured)
    assert k_c == oracle.requested(pol, tp, dp, configured)
    assert model.resolve(k_c, tp // dp, clamp) == oracle.resolve(k_c, tp // dp, clamp)


@pytest.mark.parametrize(("tp", "dp"), [(4, 3), (0, 1), (2, 0)])
def test_both_refuse_a_bad_topology(tp: int, dp: int) -> None:
    for side in (model, oracle):
        with pytest.raises(InputValueError):
            side.check_topology(tp, dp)
