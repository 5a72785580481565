"""The served-vs-trained harness of the model families beyond Kimi-K3 (semantics §18): the trained side as a
`FamilyPath`, and how C4, C13, C14 and C15 read a served path against it.

Why the trained side is deferlab's restatement inside a claims run: an engine's process loads the
transformers version that release pins (semantics §18.6), and a process holds one transformers; the
checkpoint's class run for real is the trained side of the restatement itself, which is checked bitwise
against it in a process of its own (`tests/reference/test_qwen.py` and its siblings, the `transformers`
extra). Kimi-K3's checks are `properties.served`'s (C13-C15 on the `ServedPath` protocol); this module adds
the families' and the device-vs-host deferral claim C4.

Each ``*_problem`` returns None or what is wrong with one path (no prefix); `properties.served.problems` runs
one over every path and raises one AssertionError naming each failing path.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from deferlab.properties.served import PixelReport, level_table
from deferlab.reference.oracle import family_norm, parsed_served, skew
from deferlab.reference.oracle.numerics import bf16_bits, float32_bits
from deferlab.reference.oracle.trained import Trained, config
from deferlab.reference.system.served import Geometry

# C14's value allowance, in ulps of the path's dtype at the channel's largest |value| (as `served.ALLOWANCE_ULPS`).
ALLOWANCE_ULPS = 2
__all__ = [
    "Trained",
    "config",
    "deferral_problem",
    "geometry_problem",
    "levels_summary",
    "normalization_problem",
    "pixel_problem",
]


# --- C13: geometry ------------------------------------------------------------------------------------------------
def geometry_problem(path: Any, width: int, height: int, cfg: Any, trained: Trained) -> str | None:
    """The path's resize target, grid and prompt tokens against the checkpoint's; a size the checkpoint refuses
    must be refused too."""
    try:
        want: Geometry | None = trained.geometry(width, height, cfg)
    except ValueError:
        want = None  # the checkpoint refuses the size (Qwen: a side ratio over 200)
    try:
        got: Geometry | None = path.geometry(width, height, cfg)
    except Exception as e:  # noqa: BLE001 - a refusal of the served path is compared, not raised
        if want is None:
            return None
        return f"{path.name}: refuses a size the checkpoint takes ({type(e).__name__}: {str(e)[:160]})"
    if want is None:
        return f"{path.name}: serves {got} where the checkpoint refuses the size"
    if got != want:
        return f"{path.name}: {_geometry_text(got)} != checkpoint's {_geometry_text(want)}"
    return None


def _geometry_text(g: Geometry | None) -> str:
    if g is None:
        return "nothing"
    return f"{g.width}x{g.height} grid {tuple(g.grid)} {g.tokens} tokens" + (f" pad {g.pad}" if any(g.pad) else "")


# --- C14: pixels --------------------------------------------------------------------------------------------------
def _recover(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """uint8 like ``values`` (N, C, L): the nearest level of each channel's increasing ``table`` (C, 256)."""
    return skew.recover_levels(values.transpose(1, 0, 2), table).transpose(1, 0, 2)


def allowance(table: np.ndarray, dtype: str) -> np.ndarray:
    """(C,) float64: `ALLOWANCE_ULPS` ulps of ``dtype`` at each channel's largest |value|."""
    top = np.abs(table).max(axis=1).astype(np.float32)
    ulp = np.spacing(top).astype(np.float64)
    if dtype == "bfloat16":
        ulp = ulp * 2.0**16  # BF16 keeps 8 of float32's 24 significand bits
    return ALLOWANCE_ULPS * ulp


def compare(
    served: np.ndarray, served_table: np.ndarray, want: np.ndarray, want_table: np.ndarray, dtype: str
) -> PixelReport:
    """Every differing value explained: its level (recovered through each side's table) at most 1 off, and the
    value within `allowance` of the checkpoint's normalization of the served level (semantics §16.2, §18)."""
    got_levels, want_levels = _recover(served, served_table), _recover(want, want_table)
    off = np.abs(got_levels.astype(np.int16) - want_levels.astype(np.int16))
    channel = np.arange(served.shape[1]).reshape(1, -1, 1)
    reference = want_table[channel, got_levels].astype(np.float64)
    err = np.abs(served.astype(np.float64) - reference)
    differ = float32_bits(served) != float32_bits(want)
    bad = differ & ~((off <= 1) & (err <= allowance(want_table, dtype).reshape(1, -1, 1)))
    first = "none"
    if bad.any():  # the first in C order, without listing every one (millions where a whole tile differs)
        n, c, i = (int(v) for v in np.unravel_index(int(np.argmax(bad)), bad.shape))
        first = f"patch {n} channel {c} element {i}: level {got_levels[n, c, i]} served, {want_levels[n, c, i]} trained"
    return PixelReport(int(served.size), int(differ.sum()), int(bad.sum()), int(off.max(initial=0)), None, first)


@lru_cache(maxsize=256)
def _levels(side: Any, cfg: Any) -> np.ndarray:
    return side.levels(cfg)


def levels_of(side: Any, cfg: Any) -> np.ndarray:
    """``side.levels(cfg)`` (a path's or the checkpoint's value per level), read once per side and config, as
    `served.level_table` caches a served path's: a side's table is a function of its code and the config, and
    reading it serves a probe image (InternVL on SGLang: a tiled canvas, about a quarter of a second) that C14
    would otherwise serve again for every example. A side or config that cannot key a cache is read every time."""
    try:
        hash((side, cfg))
    except TypeError:
        return side.levels(cfg)
    return _levels(side, cfg)


def pixel_problem(path: Any, image: Any, cfg: Any, trained: Trained) -> str | None:
    """C14 on one path: it serves the image with the checkpoint's grid, every differing value explained."""
    want, want_grid = trained.serve([image], cfg)
    try:
        got, grid = path.serve([image], cfg)
    except Exception as e:  # noqa: BLE001 - a refusal or crash: the checkpoint serves this input
        return f"{path.name} cannot serve it ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]})"
    if np.asarray(grid).tolist() != want_grid.tolist() or got.shape != want.shape:
        return f"{path.name}: grid {np.asarray(grid).tolist()} {got.shape} != checkpoint's {want_grid.tolist()} {want.shape}"
    report = compare(got, levels_of(path, cfg), want, levels_of(trained, cfg), path.dtype)
    return f"{path.name}: {report}{parse_reading(path, image)}" if report.unexplained else None


def parse_reading(path: Any, image: Any) -> str:
    """'' where the path has no stated parse (semantics §20.8) or its parser hands on the rule's image bitwise;
    else a clause naming the departure: a second difference C14's first would hide gets a signature of its own."""
    rule, parse = parsed_served.rule_for(getattr(path, "system", "")), getattr(path, "parsed", None)
    if rule is None or parse is None:
        return ""
    found = parsed_served.differs(parse([image])[0], rule(image))
    return f"; its parser hands on {found}, not what {parsed_served.SECTION} states" if found else ""


# --- C15: normalization -------------------------------------------------------------------------------------------
def levels_differ(served: np.ndarray, trained: np.ndarray) -> tuple[int, int]:
    """(FP32, BF16) counts of the C x 256 values that differ bitwise (BF16: both sides cast as the tower casts)."""
    fp32 = int((float32_bits(served) != float32_bits(trained)).sum())
    bf16 = int((bf16_bits(served) != bf16_bits(trained)).sum())
    return fp32, bf16


def serves_bf16_only(path: Any, served: np.ndarray) -> bool:
    """Whether the path hands the tower BF16 values alone (its levels are BF16-exact): its FP32 is not served."""
    return path.dtype == "bfloat16" and not levels_differ(served, family_norm.bf16(served))[0]


def levels_summary(path: Any, cfg: Any, trained: Trained) -> str:
    """One phrase of C15's evidence: how many of the path's values differ from the checkpoint's, per dtype."""
    served, want = path.levels(cfg), trained.levels(cfg)
    fp32, bf16 = levels_differ(served, want)
    if serves_bf16_only(path, served):
        return f"{path.name}: {bf16} of {served.size} values differ after BF16 (it serves BF16 only)"
    return f"{path.name}: {fp32} FP32 / {bf16} BF16 of {served.size} values differ"


def normalization_problem(path: Any, cfg: Any, trained: Trained) -> str | None:
    """C15 on one path: its C x 256 values bitwise the checkpoint's in FP32 (where the path computes in FP32)
    and after the BF16 cast."""
    served, want = path.levels(cfg), trained.levels(cfg)
    fp32, bf16 = levels_differ(served, want)
    in_bf16 = serves_bf16_only(path, served)
    if in_bf16:
        fp32 = 0  # the path hands the tower BF16 only: its FP32 values are not served
    if not fp32 and not bf16:
        return None
    first = int(np.argwhere(float32_bits(served) != float32_bits(want))[0][1]) if fp32 else None
    where = f", first level {first}" if first is not None else ""
    return (
        f"{path.name}: {fp32} of {served.size} values differ from the checkpoint in FP32{where}, {bf16} of "
        f"{served.size} after BF16" + (" (the path serves BF16)" if in_bf16 else "")
    )


# --- C4: device-finished equals host-finished ---------------------------------------------------------------------
def path_levels(path: Any, cfg: Any) -> np.ndarray:
    """(C, 256) float32: a family path's own table, or, for a Kimi-K3 `ServedPath` (no ``levels``), the levels
    image served as is (`properties.served.level_table`)."""
    return path.levels(cfg) if hasattr(path, "levels") else level_table(path, cfg)


def deferral_problem(device: Any, host: Any, images: Sequence[Any], cfg: Any) -> str | None:
    """C4 on one engine: its default device-finished values equal its host-finished values after the cast to the
    tower's BF16, on every level of every channel and on ``images``."""
    d_levels, h_levels = path_levels(device, cfg), path_levels(host, cfg)
    bits = bf16_bits(d_levels) != bf16_bits(h_levels)
    if bits.any():
        c, u = (int(v) for v in np.argwhere(bits)[0])
        return (
            f"{device.name} vs {host.name}: {int(bits.sum())} of {bits.size} levels differ after BF16 (first level "
            f"{u} channel {c}: {float(d_levels[c, u])!r} vs {float(h_levels[c, u])!r})"
        )
    for image in images:
        d, _ = device.serve([image], cfg)
        h, _ = host.serve([image], cfg)
        if d.shape != h.shape or (bf16_bits(d) != bf16_bits(h)).any():
            return f"{device.name} vs {host.name}: the values of a {image.mode} {image.size} image differ after BF16"
    return None
