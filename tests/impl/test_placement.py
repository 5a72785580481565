"""impl's owner assignment against the placement oracle (`reference.oracle.placement`), on generated loads.

Every rank computes the assignment on its own, so impl must reproduce the
oracle exactly: same owners, same per-rank order, for any loads (ties
included: equal loads are where a different sort or tie rule shows).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from deferlab.impl.placement import assign_owners, owner_of, rank_tokens
from deferlab.reference.oracle import placement as oracle

loads = st.lists(st.integers(0, 50) | st.sampled_from([0, 7, 7, 7]), max_size=12)


@given(loads=loads, ranks=st.integers(1, 6))
@example(loads=[1000, 100, 200, 50], ranks=2)
@example(loads=[7, 7, 7, 7, 7], ranks=3)  # equal loads: round-robin by index on both sides
def test_impl_assignment_equals_the_oracle(loads: list[int], ranks: int) -> None:
    """Owners and each rank's order equal the oracle's; the inverse and token sums agree too."""
    got, want = assign_owners(loads, ranks), oracle.assign(loads, ranks)
    assert got == want, f"impl {got} != oracle {want} for loads {loads} on {ranks} ranks"
    assert owner_of(got) == oracle.owner_of(want)
    assert rank_tokens(got, loads) == oracle.rank_rows(want, loads)
