"""Claim C9's verdicts: is the IPC acknowledgement bookkeeping safe and live, per policy?

For each policy and each combination of the assumptions semantics §8 leaves open
(which pool, K_p, the clamp, whether non-owners release), or for counts read
from real code (any `AckCounts` object, e.g. the SGLang driver's adapter: one
row set per transport pool, with what the code fixes), a derandomized
Hypothesis state machine (sim.ipc_machine) looks for the smallest topology
and request sequence that breaks each property:

* ``safety``: no slot is freed or reused while its intended reader has not read it;
* ``liveness``: every slot frees once every consumer finished; the pool never
  runs dry under bounded load;
* ``valid_ack``: no consumer requests a count outside {1, K_p}, and the code
  refuses no acknowledgement (a real source's own refusal counts).

``verdicts(budget)`` returns one dict per (policy, assumptions, property):
``holds`` (nothing found within ``budget`` examples) or ``fails`` with the
counterexample. Deterministic: same budget, same answer.
"""

from __future__ import annotations

from typing import Any

from reference.versions import INTERIM_418975B, PR_33921, RELEASED, Policy
from sim.ipc_machine import ALL, PROPERTIES, AckAssumptions, AckCounts, PolicyCounts, Violation, machine_for


def _views(source: AckCounts) -> list[tuple[str | None, AckCounts]]:
    """(transport, counts) per pool a source describes: its ``transports`` views, else the source itself."""
    transports = tuple(getattr(source, "transports", ()) or ())
    if not transports or not hasattr(source, "for_transport"):
        return [(getattr(source, "transport", None), source)]
    return [(t, source.for_transport(t)) for t in transports]


def counts_for(policy: Policy | AckCounts, assumptions: AckAssumptions) -> AckCounts:
    """The counts one grid row runs: a policy's `PolicyCounts`, or the source's view of the row's pool."""
    if isinstance(policy, Policy):
        return PolicyCounts(policy)
    if assumptions.transport is not None and hasattr(policy, "for_transport"):
        return policy.for_transport(assumptions.transport)
    return policy


def assumption_grid(policy: Policy | AckCounts) -> list[AckAssumptions]:
    """The combinations a policy can produce (semantics §8: the PR's K_p and clamp are unknown).

    Counts read from real code fix K_p, K_c and the clamp, and say whether
    non-owners release (``non_owner_release``; only when a source says None
    does the grid try both) and what a late ack does (``late_acks``). A
    source that describes several pools (``transports``) gets one row per
    pool: SGLang's CUDA IPC and VMM pools declare K_p from different code in
    0.5.18-0.5.21, write their words through different code in every
    version, and treat a late write differently (generation vs flag words),
    so even where K_p agrees the rows are not duplicates.
    """
    if not isinstance(policy, Policy):
        rows = []
        for transport, view in _views(policy):
            known = getattr(view, "non_owner_release", None)
            releases = (False, True) if known is None else (bool(known),)
            late = getattr(view, "late_acks", "ignored")
            if view.producer_total(2, 1) is not None:
                rows += [AckAssumptions("generation", "source", None, rel, transport, late) for rel in releases]
            else:
                rows += [
                    AckAssumptions("generation", k_p, None, rel, transport, late)
                    for k_p in ("tp_size", "dp_group")
                    for rel in releases
                ]
        return rows
    if policy.name == "RELEASED" or policy.ipc_consumer_count == "dp_group":
        # Released: K_p = tp // dp, clamp on; whether non-owners release is still open.
        return [AckAssumptions("generation", "dp_group", True, rel) for rel in (False, True)]
    if policy.ipc_consumer_count == "configured_tp_size":
        # 443b62db5+ stream-ordered pool, created with consumer_count = server_args.tp_size (semantics §8.2).
        return [AckAssumptions("generation", "tp_size", clamp, rel) for clamp in (False, True) for rel in (False, True)]
    grid = [AckAssumptions("counter", "tp_size", False, rel) for rel in (False, True)]
    grid += [
        AckAssumptions("generation", k_p, clamp, rel)
        for k_p in ("tp_size", "dp_group")
        for clamp in (False, True)
        for rel in (False, True)
    ]
    return grid


def check(policy: Policy | AckCounts, assumptions: AckAssumptions, prop: str, budget: int = 60) -> dict[str, Any]:
    """Run one derandomized state machine; the verdict and, on failure, the shrunk counterexample."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    counts = counts_for(policy, assumptions)
    machine = machine_for(counts, assumptions, prop)
    cfg = settings(
        max_examples=budget,
        stateful_step_count=12,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
    )
    result: dict[str, Any] = {
        "policy": counts.name,
        "counts_from": "real code" if counts.from_real_code else "model",
        "property": prop,
        "assumptions": assumptions.describe(),
        "verdict": "holds",
        "counterexample": None,
        "budget": budget,
    }
    try:
        run_state_machine_as_test(machine, settings=cfg)
    except Violation as v:
        result["verdict"] = "fails"
        result["counterexample"] = {"topology": v.topology, "sequence": v.trace, "message": v.message}
    return result


def verdicts(
    budget: int = 60, policies: tuple[Policy | AckCounts, ...] = (PR_33921, INTERIM_418975B, RELEASED)
) -> list[dict]:
    """Every (policy, assumptions, property) verdict, deterministic for a given budget.

    A first run checks all three properties at once; only when it finds a
    violation does each property get its own run (and its own smallest
    counterexample), which keeps the all-holds cells at one run instead of three.
    """
    rows = []
    for policy in policies:
        for assumptions in assumption_grid(policy):
            combined = check(policy, assumptions, ALL, budget)
            for prop in PROPERTIES:
                rows.append(
                    {**combined, "property": prop}
                    if combined["verdict"] == "holds"
                    else check(policy, assumptions, prop, budget)
                )
    return rows
