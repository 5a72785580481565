"""Claim C9's verdicts: is the IPC acknowledgement bookkeeping safe and live, per policy?

For each policy and each combination of the assumptions semantics §8 leaves open
(which pool, K_p, the clamp, whether non-owners release), or for counts read
from real code (any `AckCounts` object, e.g. the SGLang driver's adapter: one
row set per transport pool, with what the code fixes, including which kind of
pool: generation words or the PR-era counter), a derandomized
Hypothesis state machine (sim.ipc.machine) looks for the smallest topology
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

from deferlab.reference.system.policies import INTERIM_418975B, PR_33921, RELEASED, RELEASED_0_5_19, Policy
from deferlab.sim.ipc.machine import (
    ALL,
    PROPERTIES,
    TOPOLOGIES,
    AckAssumptions,
    AckCounts,
    PolicyCounts,
    Violation,
    machine_for,
)

# Steps `explore` walks exhaustively after Hypothesis found nothing: the longest violation known (a late
# release landing on a reused slot, then the drain) takes six; seven leaves one step of slack.
DEPTH = 7
EXPLORE_SLOTS = 2


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
    so even where K_p agrees the rows are not duplicates. A view whose
    ``pool`` is "counter" (SGLang 0.5.17's shared-memory counter: no words)
    gets counter-pool rows recycling at its own threshold (or ``tp_size``,
    the PR-era rule, when it declares none).
    """
    if not isinstance(policy, Policy):
        rows = []
        for transport, view in _views(policy):
            known = getattr(view, "non_owner_release", None)
            releases = (False, True) if known is None else (bool(known),)
            late = getattr(view, "late_acks", "ignored")
            kind = getattr(view, "pool", "generation")
            if kind == "counter":
                k_p = "source" if view.producer_total(2, 1) is not None else "tp_size"
                rows += [AckAssumptions("counter", k_p, None, rel, transport, late) for rel in releases]
            elif view.producer_total(2, 1) is not None:
                rows += [AckAssumptions("generation", "source", None, rel, transport, late) for rel in releases]
            else:
                rows += [
                    AckAssumptions("generation", k_p, None, rel, transport, late)
                    for k_p in ("tp_size", "dp_group")
                    for rel in releases
                ]
        return rows
    known = policy.ipc_non_owner_release
    releases = (False, True) if known is None else (known,)
    if policy.ipc_clamp:
        # Released: K_p = tp // dp, clamp on; non-owners release as the version does (or both, when open).
        return [AckAssumptions("generation", "dp_group", True, rel, None, policy.ipc_late_acks) for rel in releases]
    if policy.ipc_consumer_count == "configured_tp_size":
        # 443b62db5+ stream-ordered pool, created with consumer_count = server_args.tp_size (semantics §8.2).
        return [AckAssumptions("generation", "tp_size", clamp, rel) for clamp in (False, True) for rel in releases]
    grid = [AckAssumptions("counter", "tp_size", False, rel) for rel in releases]
    if policy.ipc_pool == "counter":  # the pool is known (the 0.5.17 wheel): only the counter rows
        return grid
    grid += [
        AckAssumptions("generation", k_p, clamp, rel)
        for k_p in ("tp_size", "dp_group")
        for clamp in (False, True)
        for rel in releases
    ]
    return grid


def explore(
    counts: AckCounts, assumptions: AckAssumptions, prop: str, depth: int, max_slots: int = EXPLORE_SLOTS
) -> Violation | None:
    """Every step sequence up to ``depth`` steps, every topology, pools of 1..``max_slots`` slots: a violation or None.

    Why beside Hypothesis: the violations real code can have (a late release
    landing on a reused slot) need five or six particular steps in a row,
    which a random walk of a few dozen examples often misses (a combined
    run with ``drain`` enabled missed them even at 1,000). This breadth-first
    walk over the machine's own steps, with states merged up to renaming
    items and generations, is complete to ``depth`` and returns the shortest
    sequence on the first (smallest) topology that breaks ``prop``. Two slots
    hold two leases, which is what every violation found so far needs; a
    third slot multiplies the states by ~30 (seconds per cell instead of
    tenths).
    """
    machine = machine_for(counts, assumptions, prop)
    for topo in TOPOLOGIES:
        for slots in range(1, max_slots + 1):
            start = machine()
            try:
                start.setup(topo=topo, slots=slots)
            except Violation as v:
                return v
            frontier, seen = [start], {start._key()}
            for _ in range(depth):
                nxt = []
                for state in frontier:
                    for name, args in state._steps():
                        twin = state._clone()
                        try:
                            getattr(twin, name)(*args)
                            twin.no_early_reuse()
                        except Violation as v:
                            return v
                        key = twin._key()
                        if key not in seen:
                            seen.add(key)
                            nxt.append(twin)
                frontier = nxt
    return None


def check(
    policy: Policy | AckCounts, assumptions: AckAssumptions, prop: str, budget: int = 60, depth: int = DEPTH
) -> dict[str, Any]:
    """One derandomized state machine run, then (if it found nothing) `explore` to ``depth``; verdict and counterexample.

    ``depth=0`` skips the exhaustive walk (Hypothesis alone, as before it existed).
    """
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
        "depth": depth,
    }
    try:
        run_state_machine_as_test(machine, settings=cfg)
    except Violation as v:
        found: Violation | None = v
        result["found_by"] = "hypothesis"
    else:
        found = explore(counts, assumptions, prop, depth) if depth > 0 else None
        result["found_by"] = f"exhaustive search to depth {depth}" if found is not None else None
    result["broke"] = found.prop if found is not None else None
    if found is not None:
        result["verdict"] = "fails"
        result["counterexample"] = {"topology": found.topology, "sequence": found.trace, "message": found.message}
    return result


def verdicts(
    budget: int = 60,
    policies: tuple[Policy | AckCounts, ...] = (PR_33921, INTERIM_418975B, RELEASED_0_5_19, RELEASED),
    depth: int = DEPTH,
) -> list[dict]:
    """Every (policy, assumptions, property) verdict, deterministic for a given budget and depth.

    A first run checks all three properties at once; only when it finds a
    violation does each property get its own run (and its own smallest
    counterexample), which keeps the all-holds cells at one run instead of three
    (sound with the exhaustive walk: a path breaking one property is a path the
    combined walk takes). A property whose own run finds nothing keeps the
    combined run's counterexample when that one broke it.
    """
    rows = []
    for policy in policies:
        for assumptions in assumption_grid(policy):
            combined = check(policy, assumptions, ALL, budget, depth)
            for prop in PROPERTIES:
                if combined["verdict"] == "holds":
                    rows.append({**combined, "property": prop})
                    continue
                own = check(policy, assumptions, prop, budget, depth)
                if own["verdict"] == "holds" and combined["broke"] == prop:
                    own = {**combined, "property": prop}
                rows.append(own)
    return rows
