"""A campaign's kill rate as an estimate: the Wilson score interval of a sample's rate.

Why: the default campaign runs 100 of a population of about 1,800 mutants, so its rate (98.9 to 100 % run to
run) is an estimate of the population's; the interval says how far the population's may be. The full campaign
(every mutant) has no sampling error and gets none.
"""

from __future__ import annotations

import math
from typing import Any


def wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    """The Wilson score interval (95 % by default) of a rate of ``k`` in ``n``: a sample's kill rate is an
    estimate of the population's, and the interval says how good (it stays inside [0, 1], unlike k/n +- z*se)."""
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def sampled(plan: dict[str, Any], mutants: list[dict[str, Any]]) -> bool:
    """Whether the campaign is a sample of its population (``--sample`` smaller than it); the full campaign's
    rate is the population's own, with no interval."""
    population = int(plan.get("population") or 0)
    return bool(population) and len(mutants) + int(plan.get("incompetent") or 0) < population


def interval(doc: dict[str, Any]) -> str:
    ci = doc.get("kill_rate_ci95")
    if not ci:
        return " (every mutant of the population: no sampling error)" if doc.get("kill_rate") is not None else ""
    return f" (95 % Wilson interval {100 * ci[0]:.1f}-{100 * ci[1]:.1f} %: a sample of {doc['population']})"
