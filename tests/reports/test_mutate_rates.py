"""`reports.mutate.rates`: the Wilson interval of a sample's kill rate, and when a campaign is a sample."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from deferlab.reports.mutate.rates import interval, sampled, wilson


def test_known_intervals() -> None:
    # Wilson 95 % for 99/100 and 100/100 (z = 1.96): the textbook values to four places
    assert wilson(99, 100) == [0.9455, 0.9982] and wilson(100, 100) == [0.963, 1.0] and wilson(0, 10) == [0.0, 0.2775]


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_interval_holds_the_rate_inside_0_1_and_narrows_with_n(kn: tuple[int, int]) -> None:
    k, n = kn
    lo, hi = wilson(k, n)
    assert 0.0 <= lo <= k / n + 1e-4 and k / n - 1e-4 <= hi <= 1.0
    lo4, hi4 = wilson(4 * k, 4 * n)
    assert hi4 - lo4 <= hi - lo + 1e-4
    assert math.isclose(hi - lo, 0.0, abs_tol=1e-9) is False


def test_a_sample_gets_an_interval_the_whole_population_none() -> None:
    mutants = [{}] * 100
    assert sampled({"population": 1785, "incompetent": 3}, mutants)
    assert not sampled({"population": 103, "incompetent": 3}, mutants)
    doc = {"kill_rate": 0.99, "kill_rate_ci95": [0.9455, 0.9982], "population": 1785}
    assert interval(doc) == " (95 % Wilson interval 94.5-99.8 %: a sample of 1785)"
    assert "no sampling error" in interval({"kill_rate": 0.99, "kill_rate_ci95": None})


def test_a_chosen_set_of_mutants_is_no_sample() -> None:
    """``--mutants`` (an earlier run's survivors, say) picks its mutants: no interval, and the text says so."""
    asked = {"population": 162, "incompetent": 0, "mutants_asked": ["a.py:1:1:AddNot:0"]}
    assert not sampled(asked, [{}] * 77)
    assert sampled({**asked, "mutants_asked": None}, [{}] * 77)
    text = interval({"kill_rate": 0.79, "kill_rate_ci95": None, "mutants_asked": asked["mutants_asked"]})
    assert "not a random sample" in text and "Wilson" not in text
