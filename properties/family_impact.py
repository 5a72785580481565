"""The §21.7 impact numbers of a failing image-family cell (C13 geometry, C14 pixels), measured by its test.

Why a module of its own: the claim tests in ``claims/test_families.py`` decide verdicts; what a failure does on
realistic uploads, the token map a finding draws, and the tower's bf16 numbers at the minimal input are measured
once the verdict is ``fails`` (semantics §21.7), with the same served paths, trained side and comparisons.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deferlab.properties import families as fam
from deferlab.properties import impact
from deferlab.properties.strategies import served as ss
from deferlab.reference.system.families import FAMILIES

MAP_SIDES = tuple(range(32, 2049, 32))  # the token map's widths and heights: 64 x 64 sizes, 32 px apart


def _geometry(path: Any, cfg: Any) -> Any:
    return lambda w, h: path.geometry(w, h, cfg)


def token_map(path: Any, cfg: Any, trained: fam.Trained) -> dict[str, Any]:
    """Tokens served and trained over `MAP_SIDES` x `MAP_SIDES` (rows heights, columns widths; -1 a refusal):
    the picture of a geometry finding (semantics §21.7)."""

    def grid(fn: Any) -> list[list[int]]:
        out = []
        for h in MAP_SIDES:
            row = []
            for w in MAP_SIDES:
                try:
                    row.append(int(fn(w, h).tokens))
                except Exception:  # noqa: BLE001 - a refusal is drawn, not raised
                    row.append(-1)
            out.append(row)
        return out

    return {"kind": "token-map", "widths": list(MAP_SIDES), "heights": list(MAP_SIDES),
            "served": grid(_geometry(path, cfg)), "trained": grid(lambda w, h: trained.geometry(w, h, cfg)),
            "path": getattr(path, "name", "")}  # fmt: skip


def geometry(paths: list[Any], family: str, trained: fam.Trained) -> dict[str, Any]:
    """C13's impact: the realistic share at displayed sizes with the tokens of the affected ones, and the map."""
    cfg = fam.config(family)
    out = impact.geometry_impact([_geometry(p, cfg) for p in paths], lambda w, h: trained.geometry(w, h, cfg))
    out["map"] = token_map(paths[0], cfg, trained)
    return out


def pixels(paths: list[Any], family: str, trained: fam.Trained, case: Any) -> dict[str, Any]:
    """C14's impact: the realistic share (each realistic image remade small, by C14's own comparison), and at
    the minimal input ``case`` (class, width, height, seed), the tower's numbers and both sides' levels."""
    cfg = fam.config(family)
    out = impact.images_impact(
        lambda image: next((p for p in (fam.pixel_problem(x, image, cfg, trained) for x in paths) if p), None),
        size=FAMILIES[family].remade,
    )
    try:
        cls, w, h, seed = case
        image = ss.make_image(str(cls), int(w), int(h), int(seed))
    except (TypeError, ValueError):
        return out  # no recorded input of this shape: the realistic share alone
    want, want_grid = trained.serve([image], cfg)
    for path in paths:
        try:
            got, grid = path.serve([image], cfg)
        except Exception:  # noqa: BLE001 - a refusal has no pixels (the crash class says it)
            continue
        if np.asarray(grid).tolist() != want_grid.tolist() or got.shape != want.shape:
            continue  # a grid change: the sequence class, no pixels to compare
        got_levels = fam._recover(np.asarray(got), path.levels(cfg))
        want_levels = fam._recover(np.asarray(want), trained.levels(cfg))
        numbers = impact.tower_numbers(np.asarray(got), np.asarray(want), got_levels, want_levels)
        if not numbers["differ"] and not numbers["bf16_differ"]:
            continue

        served_rows, trained_rows, offset = window(got_levels, want_levels)
        out["pixels"] = {"input": f"{cls} {w}x{h} seed {seed}", "side": getattr(path, "name", ""), **numbers,
                         "served_levels": served_rows, "trained_levels": trained_rows,
                         "levels_offset": offset}  # fmt: skip
        break
    return out


WINDOW = 256  # elements per channel kept for the picture (a tiled InternVL input has millions: never all of them)


def window(served: np.ndarray, trained: np.ndarray) -> tuple[list[list[int]], list[list[int]], int]:
    """Both sides' levels as (channels, elements) rows, cut to `WINDOW` elements from a little before the first
    that differs, and that window's offset: what a finding's picture draws, small enough for a versions.json."""

    def rows(levels: np.ndarray) -> np.ndarray:
        return levels.transpose(1, 0, 2).reshape(levels.shape[1], -1).astype(int)

    a, b = rows(served), rows(trained)
    differ = np.flatnonzero((a != b).any(axis=0))
    start = max(0, int(differ[0]) - WINDOW // 8) if differ.size else 0
    return a[:, start : start + WINDOW].tolist(), b[:, start : start + WINDOW].tolist(), start
