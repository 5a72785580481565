"""The placement oracle (semantics §7): worked cases from upstream tests."""

from __future__ import annotations

import pytest

from deferlab.reference.oracle.placement import assign as assign_owners
from deferlab.reference.oracle.placement import owner_of
from deferlab.reference.oracle.placement import rank_rows as rank_tokens


@pytest.mark.parametrize(
    ("loads", "ranks", "expected"),
    [
        ([1000, 100, 200, 50], 2, [[0], [2, 1, 3]]),
        ([8, 5, 3], 2, [[0], [1, 2]]),
        ([4, 4, 4, 4, 4], 2, [[0, 2, 4], [1, 3]]),
        ([4, 4, 4], 3, [[0], [1], [2]]),
        ([7], 4, [[0], [], [], []]),
        ([], 3, [[], [], []]),
        ([5, 9, 1], 1, [[0, 1, 2]]),
    ],
)
def test_worked_cases(loads, ranks, expected):
    assert assign_owners(loads, ranks) == expected


def test_inverse_and_tokens():
    owners = assign_owners([1000, 100, 200, 50], 2)
    assert owner_of(owners) == {0: 0, 2: 1, 1: 1, 3: 1}
    assert rank_tokens(owners, [250, 25, 50, 12]) == [250, 87]


def test_numpy_integers_are_counts_like_python_ints():
    """The one front door's integer rule (`reference.system.validate.check_int`): NumPy integers are accepted, as the
    simulator hands over counts from arrays; the assignment is the same as for Python ints."""
    import numpy as np

    from deferlab.reference.oracle.ipc_counts import released_total

    assert assign_owners([1000, 100, 200, 50], np.int64(2)) == [[0], [2, 1, 3]]
    assert assign_owners(list(np.array([8, 5, 3])), 2) == [[0], [1, 2]]
    assert released_total(np.int64(8), np.int32(2)) == 4 and type(released_total(np.int64(8), 2)) is int
