"""The report's figures (matplotlib, Agg, PNG): one function per figure, each returns the path it wrote.

Why separate from `sweeps`: the numbers are tested as pure functions; this
module only draws them. Every figure is written atomically (temp + rename) so
an interrupted run never leaves a truncated PNG behind.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap, TwoSlopeNorm  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from deferlab.reference.system.config import PreprocessConfig  # noqa: E402
from deferlab.reports.report.plots import save as _save  # noqa: E402
from deferlab.reports.report.sweeps import compute as sweeps  # noqa: E402

DEFER_CMAP = ListedColormap(["#d9534f", "#5cb85c"])  # eager, deferred
CURVE = "#1f3b99"


def _extent(side: np.ndarray) -> list[float]:
    return [float(side[0]), float(side[-1]), float(side[0]), float(side[-1])]


def _map(ax: Any, values: np.ndarray, side: np.ndarray, **style: Any) -> Any:
    """``values`` over the swept sizes, origin at the smallest size, one cell per sampled size."""
    return ax.imshow(values, origin="lower", extent=_extent(side), interpolation="nearest", **style)


def _size_axes(ax: Any) -> None:
    ax.set_xlabel("width (px)")
    ax.set_ylabel("height (px)")


def _panel_per_limit(limits: tuple[int, ...]) -> tuple[plt.Figure, list]:
    """One square panel per in_patch_limit, as (axes, limit) pairs."""
    fig, axes = plt.subplots(1, len(limits), figsize=(4.6 * len(limits), 4.6), squeeze=False, layout="constrained")
    return fig, list(zip(axes[0], limits, strict=True))


_SweepDrawing = Callable[[PreprocessConfig, int, np.ndarray, tuple[int, ...]], plt.Figure]


def _sweep_figure(draw: _SweepDrawing) -> Callable[..., Path]:
    """A figure over the swept image sizes: ``draw(config, step, side, limits)`` returns it, this saves it to ``path``.

    The one signature of the sweep maps, ``(config, step, path, limits, max_side) -> path``.
    """

    def figure(
        config: PreprocessConfig,
        step: int,
        path: Path,
        limits: tuple[int, ...] = sweeps.SWEEP_LIMITS,
        max_side: int = sweeps.MAX_SIDE,
    ) -> Path:
        return _save(draw(config, step, sweeps.sides(max_side, step), limits), path)

    figure.__name__ = figure.__qualname__ = draw.__name__
    figure.__doc__ = draw.__doc__
    return figure


@_sweep_figure
def decision_maps(config: PreprocessConfig, step: int, side: np.ndarray, limits: tuple[int, ...]) -> plt.Figure:
    """Defer / eager over width x height per in_patch_limit (columns) and channel count (rows), raw == processed curve."""
    fig, axes = plt.subplots(2, len(limits), figsize=(4.2 * len(limits), 9), squeeze=False, layout="constrained")
    for j, limit in enumerate(limits):
        cfg = sweeps.with_limit(config, limit)
        for i, channels in enumerate(sweeps.CHANNELS):
            ax = axes[i][j]
            raw, processed, defer = sweeps.decision_grid(cfg, channels, side, side)
            _map(ax, defer.astype(float), side, cmap=DEFER_CMAP, vmin=0, vmax=1, aspect="equal")
            diff = (processed - raw).astype(float)
            if diff.min() < 0 < diff.max():
                ax.contour(side, side, diff, levels=[0.0], colors=CURVE, linewidths=1.2)
            ax.set_title(
                f"in_patch_limit={limit}, {channels} ch\n{100 * defer.mean():.1f}% of sizes defer", fontsize=10
            )
            _size_axes(ax)
    handles = [
        Patch(color="#5cb85c", label="deferred (raw uint8 shipped)"),
        Patch(color="#d9534f", label="eager (FP32 patches shipped)"),
        Line2D([], [], color=CURVE, label="raw bytes == processed bytes"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3)
    fig.suptitle(f"Deferral decision per image size ({config.name}; map sampled every {step} px)")
    return fig


@_sweep_figure
def byte_ratio_maps(config: PreprocessConfig, step: int, side: np.ndarray, limits: tuple[int, ...]) -> plt.Figure:
    """log2(processed / raw) bytes for RGB images per in_patch_limit: > 0 is where raw pixels are smaller."""
    fig, panels = _panel_per_limit(limits)
    for ax, limit in panels:
        ratio = np.log2(sweeps.byte_ratio_grid(sweeps.with_limit(config, limit), 3, side, side))
        bound = max(abs(ratio.min()), abs(ratio.max()), 1e-6)
        im = _map(ax, ratio, side, cmap="RdBu", norm=TwoSlopeNorm(0.0, -bound, bound))
        if ratio.min() < 0 < ratio.max():
            ax.contour(side, side, ratio, levels=[0.0], colors="k", linewidths=1.0)
        ax.set_title(f"in_patch_limit={limit}")
        _size_axes(ax)
        fig.colorbar(im, ax=ax, label="log2(processed / raw bytes)", shrink=0.8)
    fig.legend(
        handles=[Line2D([], [], color="k", label="raw == processed (gate boundary)")], loc="outside lower center"
    )
    fig.suptitle(f"FP32 patch bytes / raw uint8 bytes, RGB ({config.name})")
    return fig


@_sweep_figure
def token_maps(config: PreprocessConfig, step: int, side: np.ndarray, limits: tuple[int, ...]) -> plt.Figure:
    """Vision tokens per image size for each in_patch_limit."""
    fig, panels = _panel_per_limit(limits)
    for ax, limit in panels:
        tokens = sweeps.token_grid(sweeps.with_limit(config, limit), side, side)
        im = _map(ax, tokens, side, cmap="viridis")
        ax.set_title(f"in_patch_limit={limit}\nmax {int(tokens.max())} tokens on this grid", fontsize=10)
        _size_axes(ax)
        fig.colorbar(im, ax=ax, label="tokens", shrink=0.8)
    fig.suptitle(f"Vision tokens per image ({config.name})")
    return fig


def flip_density(records: list[dict[str, Any]], path: Path) -> Path:
    """Decision flips per one-pixel width step, by image area, one line per (limit, channels)."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained")
    for r in (r for r in records if r["kind"] == "decision_map"):
        bins = r["flip_density_by_area"]
        if not any(b["flips"] for b in bins):
            continue
        mids = [np.sqrt(b["area_lo"] * b["area_hi"]) for b in bins]
        ax.plot(
            mids,
            [1000 * b["density"] for b in bins],
            drawstyle="steps-mid",
            label=f"L={r['in_patch_limit']}, C={r['channels']}",
        )
    ax.set_xscale("log")
    ax.set_xlabel("image area (pixels, log bins)")
    ax.set_ylabel("flips per 1000 one-pixel width steps")
    ax.set_title("Flip density near the limits (every size, one-pixel steps)")
    if ax.lines:
        ax.legend(fontsize=8)
    maps = [r for r in records if r["kind"] == "decision_map" and r["channels"] == 3]
    rays = [ray["ray"] for ray in maps[0]["rays"]] if maps else []
    width = 0.8 / max(len(maps), 1)
    for k, r in enumerate(maps):
        ax2.bar(
            np.arange(len(rays)) + k * width,
            [ray["flips"] for ray in r["rays"]],
            width,
            label=f"L={r['in_patch_limit']}",
        )
    ax2.set_xticks(np.arange(len(rays)) + 0.4 - width / 2, rays)
    ax2.set_xlabel("aspect ray (w:h), width stepped by 1 px")
    ax2.set_ylabel("decision flips along the ray")
    ax2.set_title("Flips along aspect rays, RGB (monotone gate: at most 1)")
    ax2.axhline(1, color="k", ls="--", lw=0.8, label="one flip")
    ax2.legend(fontsize=8)
    return _save(fig, path)


def aggregation_maps(config: PreprocessConfig, step: int, path: Path, max_side: int = sweeps.MAX_SIDE) -> Path:
    """Where the per-request decision overrides the swept RGB image's own, coloured by the extra payload bytes."""
    side = sweeps.sides(max_side, step)
    cfg = sweeps.with_limit(config, sweeps.AGGREGATION_LIMIT)
    fig, axes = plt.subplots(
        1, len(sweeps.COMPANIONS), figsize=(6.5 * len(sweeps.COMPANIONS), 5.4), squeeze=False, layout="constrained"
    )
    for ax, (name, comp) in zip(axes[0], sweeps.COMPANIONS.items(), strict=True):
        differs, cost = sweeps.aggregation_grid(cfg, comp, 3, side, side)
        shown = np.where(differs, cost / 2**20, np.nan)
        im = _map(ax, shown, side, cmap="magma_r")
        ax.set_facecolor("#e8e8e8")
        ax.set_title(f"with {name}: {100 * differs.mean():.1f}% of sizes overridden")
        ax.set_xlabel("swept image width (px)")
        ax.set_ylabel("swept image height (px)")
        fig.colorbar(im, ax=ax, label="extra payload vs per-image (MiB)", shrink=0.8)
    fig.legend(
        handles=[Patch(color="#e8e8e8", label="request decision == image's own decision")], loc="outside lower center"
    )
    fig.suptitle(
        f"Per-request vs per-image gate, request = companion + one RGB image (in_patch_limit={sweeps.AGGREGATION_LIMIT})"
    )
    return _save(fig, path)
