"""Assemble the boundary sweeps into report records (JSON-able) with their regression counters.

Each record has a stable ``name`` and ``key_counters``: exact integers from a
full-resolution scan that only change when the gate's behaviour (or the
config) changes, which is what the baseline comparison looks at. Everything
else in a record is descriptive.
"""

from __future__ import annotations

from typing import Any

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reports.report.sweeps import compute as sweeps

# Resolution of the plotted maps per profile (counters are always full resolution).
PLOT_STEP = {"dev": 16, "ci": 8, "thorough": 4}


def decision_record(config: PreprocessConfig, limit: int, channels: int, max_side: int) -> dict[str, Any]:
    """One decision map's exact counters, flip density by image area and flips along aspect rays."""
    cfg = sweeps.with_limit(config, limit)
    scan = sweeps.scan_decisions(cfg, channels, max_side=max_side)
    return {
        "name": f"decision_map/L{limit}/C{channels}",
        "kind": "decision_map",
        "in_patch_limit": limit,
        "channels": channels,
        "max_side": max_side,
        "key_counters": scan.counters(),
        "flip_density_by_area": [b for b in scan.flip_density_by_area() if b["steps"]],
        "rays": sweeps.ray_flips(cfg, channels, max_side=max_side),
    }


def aggregation_record(config: PreprocessConfig, companion_name: str, max_side: int) -> dict[str, Any]:
    """Request-level vs per-image decisions for (companion, swept RGB image) at AGGREGATION_LIMIT."""
    cfg = sweeps.with_limit(config, sweeps.AGGREGATION_LIMIT)
    counts = sweeps.aggregation_counts(cfg, sweeps.COMPANIONS[companion_name], 3, max_side=max_side)
    return {
        "name": f"aggregation/L{sweeps.AGGREGATION_LIMIT}/{companion_name}",
        "kind": "aggregation",
        "in_patch_limit": sweeps.AGGREGATION_LIMIT,
        "companion": companion_name,
        "max_side": max_side,
        "key_counters": {"differing": counts["differing"]},
        "summary": counts,
    }


def random_requests_record(config: PreprocessConfig, limit: int, max_side: int) -> dict[str, Any]:
    """Seeded random multi-image requests: how often deciding per request overrides per-image decisions."""
    summary = sweeps.random_requests(sweeps.with_limit(config, limit), max_side=max_side)
    keys = ("deferred_requests", "mixed_requests", "disagreeing_images")
    return {
        "name": f"random_requests/L{limit}",
        "kind": "random_requests",
        "in_patch_limit": limit,
        "max_side": max_side,
        "key_counters": {k: summary[k] for k in keys},
        "summary": summary,
    }


def tokens_record(config: PreprocessConfig, limit: int, max_side: int) -> dict[str, Any]:
    """Token budget check: the largest token count and the sizes whose padded patch grid exceeds in_patch_limit."""
    counts = sweeps.token_counts(sweeps.with_limit(config, limit), max_side=max_side)
    return {
        "name": f"tokens/L{limit}",
        "kind": "tokens",
        "in_patch_limit": limit,
        "max_side": max_side,
        "key_counters": {"max_tokens": counts["max_tokens"], "sizes_over_limit": counts["sizes_over_limit"]},
        "summary": counts,
    }


def collect_sweeps(
    config: PreprocessConfig,
    *,
    limits: tuple[int, ...] = sweeps.SWEEP_LIMITS,
    max_side: int = sweeps.MAX_SIDE,
    progress: Any = None,
) -> list[dict[str, Any]]:
    """Every sweep record for ``config`` (in_patch_limit varied over ``limits``)."""
    say = progress or (lambda _msg: None)
    records: list[dict[str, Any]] = []
    for limit in limits:
        for channels in sweeps.CHANNELS:
            say(f"sweep: decision map in_patch_limit={limit}, {channels} channels")
            records.append(decision_record(config, limit, channels, max_side))
    for name in sweeps.COMPANIONS:
        say(f"sweep: request aggregation with {name}")
        records.append(aggregation_record(config, name, max_side))
    for limit in limits:
        records.append(random_requests_record(config, limit, max_side))
    for limit in limits:
        say(f"sweep: token counts in_patch_limit={limit}")
        records.append(tokens_record(config, limit, max_side))
    for r in records:
        r["decision_source"] = sweeps.DECISION_SOURCE
    return records
