"""Boundary sweeps of the deferral gate (semantics §4): pure functions returning arrays and summary dicts.

Why: the PR's byte heuristic decides per request whether to ship raw pixels,
and its own risk list says the decision "can flip at boundary sizes, so
similar requests take different paths" (semantics §10). These sweeps measure that
over every size 1..4096 per side: where deferral happens, how much it saves,
how often a one-pixel change flips it, and what deciding per request (instead
of per image) costs. Counters are computed at full one-pixel resolution in
row chunks (exact and deterministic, so a changed counter is a changed
behaviour); the 2-D maps for plotting are sampled on a coarser grid.

The rule is the oracle's (``reference.oracle.gate``), called through this
module's ``decide_arrays`` attribute so a test can swap it (``<`` for ``<=``)
and watch the regression gate catch it; ``DECISION_SOURCE`` names it in the
report (``decision_source``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deferlab.reference.oracle.gate import decide_arrays, defers
from deferlab.reference.oracle.navit import resize_config_arrays
from deferlab.reference.system.config import PreprocessConfig

DECISION_SOURCE = f"{decide_arrays.__module__}.{decide_arrays.__qualname__}"  # fixed at import: the oracle's rule

MAX_SIDE = 4096
SWEEP_LIMITS = (1024, 4096, 16384, 65536)  # in_patch_limit values: SGLang's tests (4096, 16384) and the profiles'
CHANNELS = (3, 4)
AGGREGATION_LIMIT = 4096  # SGLang unit-test limit: the boundary falls inside 1..4096 there
# Companion images for the request-level sweep: one that defers by a wide margin, one that never defers.
COMPANIONS = {"docs 1536x1024 RGB": (1536, 1024, 3), "4K 3840x2160 RGBA": (3840, 2160, 4)}
AREA_BIN_EDGES = np.geomspace(1.0, MAX_SIDE * MAX_SIDE + 1.0, 29)  # log-spaced image-area bins for flip density
RAY_ASPECTS = {"1:1": 1.0, "4:3": 4 / 3, "16:9": 16 / 9, "3:4": 3 / 4, "9:16": 9 / 16, "3:1": 3.0}


def sides(max_side: int = MAX_SIDE, step: int = 1) -> np.ndarray:
    """Side lengths 1, 1+step, ... up to max_side, always including max_side (the map's far edge)."""
    if max_side < 1 or step < 1:
        raise ValueError(f"max_side and step must be >= 1, got max_side={max_side}, step={step}")
    s = np.arange(1, max_side + 1, step, dtype=np.int64)
    return s if s[-1] == max_side else np.append(s, max_side)


def with_limit(config: PreprocessConfig, in_patch_limit: int) -> PreprocessConfig:
    """The same checkpoint config with another ``in_patch_limit`` (the knob the sweeps vary)."""
    return config.with_(in_patch_limit=in_patch_limit)


def decision_grid(
    config: PreprocessConfig, channels: int, widths: np.ndarray, heights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(raw, processed, defer) on the grid rows = heights, columns = widths."""
    w = np.asarray(widths, dtype=np.int64)[None, :]
    h = np.asarray(heights, dtype=np.int64)[:, None]
    return decide_arrays(w, h, channels, config)


def byte_ratio_grid(config: PreprocessConfig, channels: int, widths: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """processed / raw bytes per size: > 1 means shipping raw pixels is cheaper (the gate defers at >= 1)."""
    raw, processed, _ = decision_grid(config, channels, widths, heights)
    return processed / raw


def token_grid(config: PreprocessConfig, widths: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """Vision tokens per size (semantics §3.2), rows = heights, columns = widths."""
    r = resize_config_arrays(np.asarray(widths)[None, :], np.asarray(heights)[:, None], config)
    return np.broadcast_to(r.num_tokens, (len(heights), len(widths)))


@dataclass
class DecisionScan:
    """Exact counters of one full-resolution scan of the decision map (1..max_side squared)."""

    sizes: int
    deferring: int
    ties: int  # raw == processed: exactly where `<` and `<=` disagree
    flips_width: int  # (w, h) vs (w + 1, h) decided differently
    flips_height: int  # (w, h) vs (w, h + 1)
    area_steps: np.ndarray  # one-pixel steps per area bin (AREA_BIN_EDGES)
    area_flips: np.ndarray

    def counters(self) -> dict[str, int]:
        return {key: getattr(self, key) for key in ("sizes", "deferring", "ties", "flips_width", "flips_height")}

    def flip_density_by_area(self) -> list[dict[str, float]]:
        """Flips per one-pixel step, binned by image area: where similar requests diverge."""
        out = []
        for i in range(len(self.area_steps)):
            steps, flips = int(self.area_steps[i]), int(self.area_flips[i])
            out.append(
                {
                    "area_lo": float(AREA_BIN_EDGES[i]),
                    "area_hi": float(AREA_BIN_EDGES[i + 1]),
                    "steps": steps,
                    "flips": flips,
                    "density": flips / steps if steps else 0.0,
                }
            )
        return out


def scan_decisions(
    config: PreprocessConfig, channels: int, max_side: int = MAX_SIDE, chunk_rows: int = 512
) -> DecisionScan:
    """Count deferring sizes, ties and one-pixel flips over every (w, h) in 1..max_side, in row chunks."""
    ws = np.arange(1, max_side + 1, dtype=np.int64)
    nbins = len(AREA_BIN_EDGES) - 1
    total = defer_n = ties = fw = fh = 0
    area_steps = np.zeros(nbins, dtype=np.int64)
    area_flips = np.zeros(nbins, dtype=np.int64)
    prev_last_row: np.ndarray | None = None
    for h0 in range(1, max_side + 1, chunk_rows):
        hs = np.arange(h0, min(h0 + chunk_rows, max_side + 1), dtype=np.int64)
        raw, processed, defer = decision_grid(config, channels, ws, hs)
        total += defer.size
        defer_n += int(defer.sum())
        ties += int((raw == processed).sum())
        dw = defer[:, 1:] != defer[:, :-1]
        fw += int(dw.sum())
        stacked = defer if prev_last_row is None else np.vstack([prev_last_row[None, :], defer])
        dh = stacked[1:] != stacked[:-1]
        fh += int(dh.sum())
        prev_last_row = defer[-1]
        # Attribute each width step to the area of its left size.
        area = (ws[None, :-1] * hs[:, None]).astype(np.float64)
        idx = np.clip(np.searchsorted(AREA_BIN_EDGES, area, side="right") - 1, 0, nbins - 1)
        area_steps += np.bincount(idx.ravel(), minlength=nbins)
        area_flips += np.bincount(idx.ravel(), weights=dw.ravel(), minlength=nbins).astype(np.int64)
    return DecisionScan(total, defer_n, ties, fw, fh, area_steps, area_flips)


def token_counts(config: PreprocessConfig, max_side: int = MAX_SIDE, chunk_rows: int = 512) -> dict[str, int]:
    """Largest token count over 1..max_side squared, and how many sizes end with more patches than in_patch_limit.

    Why: the limit is applied to floor(w / patch) * floor(h / patch) *before*
    padding to merge * patch, so the padded grid can exceed it (semantics §3.2).
    """
    ws = np.arange(1, max_side + 1, dtype=np.int64)
    p = config.patch_size
    worst = over = 0
    worst_at = (0, 0)
    for h0 in range(1, max_side + 1, chunk_rows):
        hs = np.arange(h0, min(h0 + chunk_rows, max_side + 1), dtype=np.int64)
        r = resize_config_arrays(ws[None, :], hs[:, None], config)
        tokens = np.broadcast_to(r.num_tokens, (len(hs), len(ws)))
        patches = (r.padded_width // p) * (r.padded_height // p)
        over += int((patches > config.in_patch_limit).sum())
        i = np.unravel_index(int(np.argmax(tokens)), tokens.shape)
        if int(tokens[i]) > worst:
            worst, worst_at = int(tokens[i]), (int(ws[i[1]]), int(hs[i[0]]))
    return {
        "max_tokens": worst,
        "max_tokens_width": worst_at[0],
        "max_tokens_height": worst_at[1],
        "sizes_over_limit": over,
    }


def ray_flips(
    config: PreprocessConfig, channels: int, max_side: int = MAX_SIDE, aspects: dict[str, float] | None = None
) -> list[dict]:
    """Along each aspect-ratio ray (w = 1..max_side, h = round(w / aspect)), where the decision flips."""
    out = []
    for name, aspect in (aspects or RAY_ASPECTS).items():
        w = np.arange(1, max_side + 1, dtype=np.int64)
        h = np.clip(np.rint(w / aspect).astype(np.int64), 1, None)
        keep = h <= max_side
        w, h = w[keep], h[keep]
        _, _, defer = decide_arrays(w, h, channels, config)
        at = np.flatnonzero(defer[1:] != defer[:-1])
        out.append(
            {
                "ray": name,
                "steps": int(max(len(w) - 1, 0)),
                "flips": int(len(at)),
                "first_flip_widths": [int(w[i + 1]) for i in at[:8]],
                "deferring": int(defer.sum()),
            }
        )
    return out


def aggregation_grid(
    config: PreprocessConfig,
    companion: tuple[int, int, int],
    channels: int,
    widths: np.ndarray,
    heights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For a request of (companion, swept image): where the request-level decision differs from the swept image's own, and its byte cost.

    Per-image deciding ships min(raw, processed) of each image; the PR decides
    once for the whole request on the sums, so an image can ride along the
    wrong way. Cost = request-level payload - per-image payload (never < 0).
    """
    cw, ch, cc = companion
    one = np.ones(1, dtype=np.int64)
    c_raw, c_proc, c_defer = (int(a[0]) for a in decide_arrays(cw * one, ch * one, cc * one, config))
    raw, processed, defer = decision_grid(config, channels, widths, heights)
    request_defer = defers(raw + c_raw, processed + c_proc)
    per_image = np.where(defer, raw, processed) + (c_raw if c_defer else c_proc)
    per_request = np.where(request_defer, raw + c_raw, processed + c_proc)
    return request_defer != defer, per_request - per_image


def aggregation_counts(
    config: PreprocessConfig,
    companion: tuple[int, int, int],
    channels: int,
    max_side: int = MAX_SIDE,
    chunk_rows: int = 512,
) -> dict[str, int]:
    """Exact counts of `aggregation_grid` over every size 1..max_side (row chunks)."""
    ws = np.arange(1, max_side + 1, dtype=np.int64)
    differing = extra = worst = 0
    for h0 in range(1, max_side + 1, chunk_rows):
        hs = np.arange(h0, min(h0 + chunk_rows, max_side + 1), dtype=np.int64)
        diff, cost = aggregation_grid(config, companion, channels, ws, hs)
        differing += int(diff.sum())
        extra += int(cost.sum())
        worst = max(worst, int(cost.max()))
    return {"sizes": max_side * max_side, "differing": differing, "extra_bytes_total": extra, "extra_bytes_max": worst}


def random_requests(
    config: PreprocessConfig, n_requests: int = 20000, max_images: int = 8, seed: int = 0, max_side: int = MAX_SIDE
) -> dict[str, int | float]:
    """Seeded random requests (1..max_images images, sides log-uniform min(32, max_side)..max_side, 1 in 4 RGBA): aggregation cost.

    Deterministic for a seed (numpy PCG64), so its counts are regression counters.
    """
    rng = np.random.default_rng(seed)
    k = rng.integers(1, max_images + 1, size=n_requests)
    n = int(k.sum())
    lo, hi = np.log(min(32, max_side)), np.log(max_side)
    w = np.floor(np.exp(rng.uniform(lo, hi, size=n))).astype(np.int64)
    h = np.floor(np.exp(rng.uniform(lo, hi, size=n))).astype(np.int64)
    c = np.where(rng.random(n) < 0.25, 4, 3)
    req = np.repeat(np.arange(n_requests), k)
    raw, processed, defer = decide_arrays(w, h, c, config)
    r_raw = np.bincount(req, weights=raw, minlength=n_requests)
    r_proc = np.bincount(req, weights=processed, minlength=n_requests)
    r_defer = defers(r_raw, r_proc)
    img_req_defer = r_defer[req]
    per_image = int(np.where(defer, raw, processed).sum())
    per_request = int(np.where(img_req_defer, raw, processed).sum())
    n_defer = np.bincount(req, weights=defer, minlength=n_requests)
    mixed = int(((n_defer > 0) & (n_defer < k)).sum())
    return {
        "requests": n_requests,
        "images": n,
        "deferred_requests": int(r_defer.sum()),
        "mixed_requests": mixed,
        "disagreeing_images": int((img_req_defer != defer).sum()),
        "payload_per_image_bytes": per_image,
        "payload_per_request_bytes": per_request,
        "extra_fraction": (per_request - per_image) / per_image if per_image else 0.0,
    }
