"""A campaign's kill rate: the Wilson score interval of a sample's rate, the kills it cannot count, the time saved.

Why: the default campaign runs 100 of a population of about 1,800 mutants, so its rate (98.9 to 100 % run to
run) is an estimate of the population's; the interval says how far the population's may be. The full campaign
(every mutant) has no sampling error and gets none.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

DETECTED = ("killed", "killed at load")


def wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    """The Wilson score interval (95 % by default) of a rate of ``k`` in ``n``: a sample's kill rate is an
    estimate of the population's, and the interval says how good (it stays inside [0, 1], unlike k/n +- z*se)."""
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def sampled(plan: dict[str, Any], mutants: list[dict[str, Any]]) -> bool:
    """Whether the campaign is a random sample of its population (``--sample`` smaller than it); the full
    campaign's rate is the population's own, with no interval, and so is a set a person chose (``--mutants``,
    e.g. the survivors of an earlier run): it estimates nothing about the population."""
    if plan.get("mutants_asked"):
        return False
    population = int(plan.get("population") or 0)
    return bool(population) and len(mutants) + int(plan.get("incompetent") or 0) < population


def interval(doc: dict[str, Any]) -> str:
    ci = doc.get("kill_rate_ci95")
    if not ci:
        if doc.get("kill_rate") is None:
            return ""
        if doc.get("mutants_asked"):
            return " (of the mutants --mutants named, not a random sample: no interval, and no rate of the population)"
        return " (every mutant of the population: no sampling error)"
    return f" (95 % Wilson interval {100 * ci[0]:.1f}-{100 * ci[1]:.1f} %: a sample of {doc['population']})"


def suspect_kills(
    control: dict[str, Any] | None, mutants: list[dict[str, Any]], shown: Callable[[dict[str, Any]], str]
) -> list[str]:
    """The kills that say nothing about their mutant: the control (the unmutated tree run as a mutant is) was
    "killed" too, by the same units or with no unit named, so those units change with nothing mutated (stop 36's
    vLLM video campaigns reported 100 % with every kill such a one). Counted neither as kills nor as judged."""
    if not control or control.get("outcome") not in DETECTED:
        return []
    seen = set(control.get("seen_by") or [])
    return sorted(
        m["id"] for m in mutants
        if shown(m) in DETECTED and (not seen or set(m.get("killed_by") or ["(run)"]) <= seen)
    )  # fmt: skip


def selection_saving(mutants: list[dict[str, Any]], reference: dict[str, Any]) -> dict[str, Any]:
    """Mutant-seconds with provenance selection vs every claim: measured where a mutant ran both ways, and
    estimated for the whole campaign from the reference's one-claim-per-process seconds."""
    both = [m for m in mutants if m.get("all_claims")]
    out: dict[str, Any] = {"measured_mutants": len(both)}
    if both:
        sel = sum(m["seconds"] for m in both)
        full = sum(m["all_claims"]["seconds"] for m in both)
        out.update(
            selected_seconds=round(sel, 1),
            all_claims_seconds=round(full, 1),
            saving=round(1 - sel / full, 3) if full else None,
            same_outcome=sum(m["all_claims"]["outcome"] == m["outcome"] for m in both),
            missed_by_selection=[m["id"] for m in both if m["all_claims"]["outcome"] in DETECTED and m["outcome"] not in DETECTED],
        )  # fmt: skip
    run = [m for m in mutants if m["outcome"] != "error"]
    out["campaign_selected_seconds"] = round(sum(m["seconds"] for m in run), 1)
    out["mean_claims_per_mutant"] = (
        round(sum(len(m.get("claims_run") or []) for m in run) / len(run), 2) if run else None
    )
    return out
