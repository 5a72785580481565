"""The report's served-vs-trained steps: the skew table of every served path of the run, and the sweep step's C13
exhaustive geometry over the same paths.

Why apart from `reports.report.run`: the runner orders steps; what a step does with the served paths (loaded
once per process by `reports.report.served.paths.RunPaths`, an engine that cannot load recorded in one line)
lives here, so the runner stays one page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deferlab.reference.system.config import PreprocessConfig
from deferlab.reports.report.served import images, skew
from deferlab.reports.report.served.paths import RunPaths
from deferlab.reports.report.steps import StepFailed


def served_step(
    config: PreprocessConfig, paths: RunPaths, say: Callable[[str], None]
) -> tuple[dict[str, Any], list[skew.Column]]:
    """The skew table of every path of the run: (report.json's ``served``, the columns for the figures)."""
    found = paths.get()
    say(f"served: {len(found)} path(s): {', '.join(p.name for p in found)}")
    samples = images.samples()
    columns = skew.skew_table(found, config, samples, progress=say)
    doc = {**skew.table_dict(columns, samples), "config": config.name, "load_errors": dict(paths.errors)}
    if paths.errors:
        raise StepFailed("; ".join(paths.errors.values()), (doc, columns))
    return doc, columns


def geometry_step(
    config: PreprocessConfig, paths: RunPaths, max_side: int, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """C13 exhaustive over every path of the run (`reports.report.sweeps.geometry`); an engine that could not be loaded
    fails the step, the loaded paths' records are kept."""
    from deferlab.reports.report.sweeps.geometry import geometry_records

    records = geometry_records(paths.get(), config, max_side=max_side, progress=say)
    if paths.errors:
        raise StepFailed("; ".join(paths.errors.values()), records)
    return records
