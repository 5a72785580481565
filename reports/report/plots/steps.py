"""The report's figure steps: one ``plot:<name>`` step per figure, in report order, each with its caption.

Why steps: a figure that cannot be drawn (its data's step was skipped or failed, matplotlib raising) is a
skipped or failed step of its own, and the other figures are still drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reports.report.plots import figures as plots
from deferlab.reports.report.plots import served as plots_served
from deferlab.reports.report.plots import sim as plots_sim
from deferlab.reports.report.steps import StepRunner
from deferlab.reports.report.sweeps import collect as sweep_report
from deferlab.reports.report.sweeps import compute as sweeps_mod

FIGURES = (  # name, title, caption
    (
        "decision_maps",
        "Decision map",
        "Deferred (green) vs eager (red) per width x height, for each in_patch_limit and 3/4 channels; the blue "
        "curve is raw bytes == processed bytes.",
    ),
    (
        "byte_ratio",
        "Processed / raw bytes",
        "log2 of FP32 patch bytes over raw uint8 bytes (RGB): blue is where shipping raw pixels is cheaper; black "
        "line = the gate's boundary.",
    ),
    ("tokens", "Token count", "Vision tokens per image size: flat where in_patch_limit binds."),
    (
        "flip_density",
        "Flip density",
        "Decision changes per one-pixel step by image area (left) and along aspect-ratio rays (right): more than one "
        "flip on a ray means the byte rule is not monotone in size.",
    ),
    (
        "aggregation",
        "Per-request vs per-image decision",
        "Where deciding once per request overrides the swept image's own decision, with the payload that costs.",
    ),
    (
        "sim_latency",
        "TTFT and throughput vs load (simulator)",
        "Eager (red) vs deferred (green) under SGLang 0.5.23's request path (sim/README.md), 12 offered loads per "
        "scenario from light load past saturation; dotted verticals: each path's capacity. The PR's A/B setting "
        "(pr-ab-*, on one 8-GPU host and on two 4-GPU trays) comes first. Cost model: sim/profiles.",
    ),
    (
        "sim_grid",
        "Does deferral help my topology? (simulator)",
        "Capacity gain of deferral and the P90 TTFT change at half the eager capacity, per TP size and image size "
        "(4 images per request), for each cost profile and for hosts of 8 and of 4 GPUs (TP 8 then spans two nodes "
        "and the features are pickled instead of shared).",
    ),
    (
        "sim_anchors",
        "Model vs the PR's reported numbers (simulator)",
        "Each anchor of PR #33921 next to the model on every cost profile and topology, nothing fitted; the "
        "microbenchmark also as timed from impl's real producers on this machine (deferlab calibrate).",
    ),
    (
        "sim_placement",
        "Owner load imbalance (simulator)",
        "max / mean owner cost over the vision ranks per placement strategy, per shipped scenario.",
    ),
    (
        "sim_payload",
        "Payload alternatives (simulator)",
        "Bytes per copy of the workload's images as FP32 patches, BF16 patches, raw uint8 and encoded files.",
    ),
)


def plot_steps(
    runner: StepRunner,
    stage: Path,
    *,
    config: PreprocessConfig,
    profile: str,
    grid: tuple[int, tuple[int, ...]],
    sweeps: list[dict[str, Any]],
    sim: list[dict[str, Any]],
    served: tuple[dict[str, Any] | None, list[Any]],
) -> list[dict[str, str]]:
    """Every figure into ``stage``: ``grid`` is (max side, limits) of the sweeps, ``served`` the served step's
    (table, columns). Returns report.json's ``figures``."""
    side, lim = grid
    step = max(1, sweep_report.PLOT_STEP[profile] * side // sweeps_mod.MAX_SIDE)
    makers = {
        "decision_maps": lambda p: plots.decision_maps(config, step, p, limits=lim, max_side=side),
        "byte_ratio": lambda p: plots.byte_ratio_maps(config, step, p, limits=lim, max_side=side),
        "tokens": lambda p: plots.token_maps(config, step, p, limits=lim, max_side=side),
        "flip_density": (lambda p: plots.flip_density(sweeps, p)) if sweeps else None,
        "aggregation": lambda p: plots.aggregation_maps(config, step, p, max_side=side),
        "sim_placement": (lambda p: plots_sim.placement_imbalance(sim, p)) if sim else None,
        "sim_latency": (lambda p: plots_sim.latency_vs_load(sim, p)) if sim else None,
        "sim_grid": (lambda p: plots_sim.tp_size_grid(sim, p)) if sim else None,
        "sim_anchors": (lambda p: plots_sim.anchors_chart(sim, p)) if sim else None,
        "sim_payload": (lambda p: plots_sim.payload_alternatives(sim, p)) if sim else None,
    }
    figures = []
    for name, title, caption in FIGURES:
        maker = makers[name]
        if maker is None:
            runner.skipped(f"plot:{name}", "no data: its step was skipped or failed")
            continue
        if runner.run(f"plot:{name}", maker, stage / f"{name}.png", group="plots") is not None:  # None: nothing drawn
            figures.append({"name": name, "file": f"{name}.png", "title": title, "caption": caption})
    table, columns = served
    if columns:
        figures += runner.run("plot:served", plots_served.served_figures, table, columns, stage, group="plots") or []
    else:
        runner.skipped("plot:served", "no data: the served step was skipped or failed")
    return figures
